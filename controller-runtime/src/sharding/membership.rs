//! Membership: this replica's shard Lease, its view of the ring, and (when
//! elected) the sharder that moves the ring from epoch to epoch.
//!
//! One [`Membership`] per replica and ring. [`Membership::run`]:
//!
//! - creates the shard Lease named after the identity, labelled with the
//!   ring's name, and renews it every retry period as leader election
//!   renews its Lease; each write also carries the epoch this replica
//!   acknowledges (the oldest epoch its sharded controllers have all
//!   adopted and drained, see [`AckHandle`]). A replica that cannot renew
//!   within the renew deadline is *fenced*: [`Membership::fence`] fires (its
//!   controllers stop admitting keys and abort what is in flight) and `run`
//!   returns [`MembershipError::LostLease`], before any other replica can
//!   judge the Lease expired (the deadline is shorter than the duration);
//! - watches the ring's Leases (an informer with a label selector on the
//!   ring label) and publishes a [`RingView`] (epoch, members, acks) to
//!   [`Membership::subscribe`]rs;
//! - competes for the sharder Lease (leader election, [`crate::leaderelection`]);
//!   while it leads, it writes a new epoch to the ring-state Lease whenever
//!   the live shard Leases differ from the members: live Leases join, and a
//!   member leaves once its Lease has not changed for its duration (by this
//!   replica's clock, confirmed by a fresh GET, so a stalled watch never
//!   removes a live member) or is gone;
//! - on stop (after the manager has drained the controllers) deletes its
//!   shard Lease, so the others take its keys at once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::key::ObjectOrTombstone;
use informer_core::shared_informer::{ResourceEventHandler, SharedIndexInformer};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube_client::api::{DeleteParams, PostParams, Preconditions};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{ConfigError, ShardingConfig};
use super::coordinator;
use super::replica::Replica;
pub use super::view::RingView;
use super::view::{ACK_ANNOTATION, RING_LABEL, ROLE_LABEL, ROLE_SHARD, ring_state};
use crate::leaderelection::{Attempted, renew_until_lost};

/// Errors of shard membership.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MembershipError {
    /// The settings break a rule.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// This replica could not renew its shard Lease within the renew
    /// deadline: it stopped reconciling and left the ring.
    #[error("{identity} lost its shard lease: {reason}")]
    LostLease {
        /// This replica.
        identity: String,
        /// Why.
        reason: String,
    },
    /// Another writer changed the Lease twice while this replica wrote it.
    #[error("lease {lease} kept changing under this replica's writes (conflict)")]
    Conflict {
        /// The Lease's name.
        lease: String,
    },
    /// The shard Lease of this replica's identity belongs to another ring
    /// in the same namespace: shard Leases are named after the identity,
    /// so an identity must be unique per namespace across rings.
    #[error(
        "shard lease {lease} belongs to ring {other_ring}, not {ring}: an identity names its \
         shard Lease and must be unique in the namespace across rings (ShardingConfig::identity)"
    )]
    IdentityTaken {
        /// The Lease's name (this replica's identity).
        lease: String,
        /// This replica's ring.
        ring: String,
        /// The ring the Lease belongs to.
        other_ring: String,
    },
    /// A request to the API server failed.
    #[error("{op} of lease {lease} failed: {source}")]
    Api {
        /// get, create, update or delete.
        op: &'static str,
        /// The Lease's name.
        lease: String,
        /// The client error.
        #[source]
        source: kube_client::Error,
    },
}

/// One acknowledging party (a sharded controller): the epoch it has adopted
/// and drained. The replica acknowledges the oldest epoch over all of them.
#[derive(Debug)]
pub(crate) struct AckHandle {
    slot: Arc<AtomicU64>,
    changed: Arc<Notify>,
}

impl AckHandle {
    /// A handle tied to no membership (for tests).
    #[cfg(test)]
    pub(crate) fn detached() -> AckHandle {
        AckHandle {
            slot: Arc::new(AtomicU64::new(0)),
            changed: Arc::new(Notify::new()),
        }
    }

    /// Reports that everything this party runs belongs to `epoch`'s
    /// assignment (and asks for a renewal that publishes it).
    pub(crate) fn acknowledge(&self, epoch: u64) {
        if self.slot.fetch_max(epoch, Ordering::AcqRel) < epoch {
            self.changed.notify_one();
        }
    }

    /// The epoch acknowledged so far.
    pub(crate) fn acknowledged(&self) -> u64 {
        self.slot.load(Ordering::Acquire)
    }
}

/// A replica's membership in one ring; see the [module documentation](self).
/// Cheap to clone; clones share state.
///
/// ```no_run
/// use controller_runtime::sharding::config::ShardingConfig;
/// use controller_runtime::sharding::membership::Membership;
/// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let membership = Membership::new(client, ShardingConfig::new("default", "widgets"))?;
/// // ... `.sharded(&membership)` on controllers of a running manager; then:
/// let mut view = membership.subscribe();
/// view.wait_for(|v| v.settled() && v.members().iter().any(|m| m == membership.identity())).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Membership {
    inner: Arc<Replica>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("config", &self.inner.config)
            .field("view", &*self.inner.view.borrow())
            .finish()
    }
}

/// Wakes the view loop on every change of a ring Lease.
struct Changed(watch::Sender<u64>);

impl ResourceEventHandler<Lease> for Changed {
    fn on_add(&self, _: Arc<Lease>, _: bool) {
        self.0.send_modify(|n| *n += 1);
    }
    fn on_update(&self, _: Arc<Lease>, _: Arc<Lease>) {
        self.0.send_modify(|n| *n += 1);
    }
    fn on_delete(&self, _: ObjectOrTombstone<Lease>) {
        self.0.send_modify(|n| *n += 1);
    }
}

impl Membership {
    /// A membership in `config`'s ring through `client`.
    pub fn new(
        client: kube_client::Client,
        config: ShardingConfig,
    ) -> Result<Membership, MembershipError> {
        config.validate()?;
        Ok(Membership {
            inner: Arc::new(Replica::new(client, config)),
        })
    }

    /// This replica's identity (its shard Lease's name and ring member name).
    pub fn identity(&self) -> &str {
        &self.inner.config.identity
    }

    /// The settings.
    pub fn config(&self) -> &ShardingConfig {
        &self.inner.config
    }

    /// A receiver of this replica's view of the ring.
    pub fn subscribe(&self) -> watch::Receiver<RingView> {
        self.inner.view.subscribe()
    }

    /// The view now.
    pub fn view(&self) -> RingView {
        self.inner.view.borrow().clone()
    }

    /// Fires when this replica must stop reconciling at once: its shard
    /// Lease could not be renewed in time.
    pub fn fence(&self) -> CancellationToken {
        self.inner.fence.clone()
    }

    /// Whether this replica is the ring's sharder now.
    pub fn is_sharder(&self) -> bool {
        self.inner.sharder.load(Ordering::Acquire)
    }

    /// A receiver reading `true` while this replica is the ring's sharder.
    pub(crate) fn sharder_watch(&self) -> watch::Receiver<bool> {
        self.inner.sharder_watch.subscribe()
    }

    /// The client the membership talks through.
    pub(super) fn client(&self) -> kube_client::Client {
        self.inner.client.clone()
    }

    /// The members of the ring state read afresh from the server (`None`
    /// when it cannot be read).
    pub(super) async fn fresh_members(&self) -> Option<Vec<String>> {
        match self
            .inner
            .leases
            .get_opt(&self.inner.config.ring_state_name())
            .await
        {
            Ok(state) => Some(state.map(|s| ring_state(&s).1).unwrap_or_default()),
            Err(error) => {
                tracing::debug!(%error, "sharder: reading the ring state");
                None
            }
        }
    }

    /// How long ago `member`'s shard Lease expired by this replica's
    /// observations (`None` while live or unknown).
    pub(super) fn expired_for(&self, member: &str) -> Option<std::time::Duration> {
        self.inner.observations.lock().expired_for(
            member,
            Instant::now(),
            self.inner.config.timing.lease_duration,
        )
    }

    /// When `member`'s shard Lease stopped counting by this replica's
    /// observations (see [`Observations::expired_at`](super::view::Observations::expired_at)).
    pub(super) fn expired_at(&self, member: &str) -> Option<Instant> {
        self.inner
            .observations
            .lock()
            .expired_at(member, self.inner.config.timing.lease_duration)
    }

    /// Claims the one label-mode controller of this membership; `false`
    /// when another already has it.
    pub(super) fn claim_label_controller(&self) -> bool {
        !self.inner.label_controller.swap(true, Ordering::AcqRel)
    }

    /// Successful renewals of the shard Lease so far.
    pub fn renewals(&self) -> u64 {
        self.inner.renewals.load(Ordering::Relaxed)
    }

    /// A new acknowledging party; the replica's acknowledged epoch is the
    /// oldest over all live handles.
    pub(crate) fn ack_handle(&self) -> AckHandle {
        let slot = Arc::new(AtomicU64::new(0));
        self.inner.acks.lock().push(Arc::downgrade(&slot));
        AckHandle {
            slot,
            changed: Arc::clone(&self.inner.ack_changed),
        }
    }

    /// The epoch this replica acknowledges now.
    pub fn acknowledged(&self) -> u64 {
        let mut acks = self.inner.acks.lock();
        acks.retain(|w| w.strong_count() > 0);
        let oldest = acks
            .iter()
            .filter_map(Weak::upgrade)
            .map(|s| s.load(Ordering::Acquire))
            .min();
        oldest.unwrap_or_else(|| self.inner.view.borrow().epoch)
    }

    /// Whether the membership was installed in a manager before (and
    /// marks it installed).
    pub(super) fn mark_installed(&self) -> bool {
        self.inner.installed.swap(true, Ordering::AcqRel)
    }

    /// Joins the ring and stays in it until `stop` fires (then leaves) or the
    /// shard Lease is lost (then fences and returns
    /// [`MembershipError::LostLease`]). A sharded controller runs it as a
    /// manager runnable (`.sharded(..)`); hidden, for tests of the ring
    /// without a manager.
    #[doc(hidden)]
    pub async fn run(&self, stop: CancellationToken) -> Result<(), MembershipError> {
        let cfg = &self.inner.config;
        let factory = SharedInformerFactory::builder(self.inner.client.clone()).build();
        let informer: SharedIndexInformer<Lease> = factory.namespaced_informer_with(
            &cfg.namespace,
            InformerOptions::new().label_selector(format!("{RING_LABEL}={}", cfg.ring)),
        );
        let (changed, changes) = watch::channel(0u64);
        // The informer is fresh and not stopped: registering cannot fail.
        let _registration = informer.add_event_handler(Changed(changed)).ok();
        factory.start();
        let election_stop = CancellationToken::new();
        let (election, leading) = coordinator::elect(&self.inner, election_stop.clone());
        let result = tokio::select! {
            () = stop.cancelled() => Ok(()),
            lost = self.renew_loop(&stop) => lost,
            () = self.view_loop(&informer, changes.clone()) => Ok(()),
            () = coordinator::run(&self.inner, &informer, changes, leading) => Ok(()),
        };
        self.inner.set_sharder(false);
        election_stop.cancel();
        if let Err(error) = &result {
            // Fenced: return at once so that the manager stops; the
            // informer and the sharder election wind down on their own.
            self.inner.fence.cancel();
            tracing::error!(%error, ring = %cfg.ring, "left the ring: shard lease lost");
            tokio::spawn(async move {
                factory.shutdown().await;
                let _ = election.await;
            });
            return result;
        }
        self.leave().await;
        let limit = cfg.timing.renew_deadline;
        if tokio::time::timeout(limit, factory.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(ring = %cfg.ring, "shard lease informer did not stop in time");
        }
        // The sharder's election releases its Lease when it led.
        if tokio::time::timeout(limit, election).await.is_err() {
            tracing::warn!(ring = %cfg.ring, "sharder election did not stop in time");
        }
        result
    }

    /// Deletes the shard Lease (only when it is still ours as last written).
    async fn leave(&self) {
        self.inner.fence.cancel();
        let name = self.inner.config.shard_lease_name();
        let rv = match self.inner.leases.get_opt(name).await {
            Ok(Some(l)) => l.metadata.resource_version,
            _ => return,
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: rv,
                uid: None,
            }),
            ..Default::default()
        };
        match self.inner.leases.delete(name, &params).await {
            Ok(_) => tracing::info!(identity = %name, "left the ring: shard lease deleted"),
            Err(error) => tracing::warn!(%error, identity = %name, "leaving the ring"),
        }
    }

    fn shard_lease(&self, current: Option<Lease>) -> Lease {
        let cfg = &self.inner.config;
        let mut lease = current.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(cfg.identity.clone()),
                namespace: Some(cfg.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (RING_LABEL.to_string(), cfg.ring.clone()),
                    (ROLE_LABEL.to_string(), ROLE_SHARD.to_string()),
                ])),
                ..Default::default()
            },
            spec: None,
        });
        let now = MicroTime(jiff::Timestamp::now());
        let mut spec = lease.spec.take().unwrap_or_else(|| LeaseSpec {
            acquire_time: Some(now.clone()),
            lease_transitions: Some(0),
            ..Default::default()
        });
        spec.holder_identity = Some(cfg.identity.clone());
        spec.lease_duration_seconds = Some(cfg.timing.lease_duration_seconds());
        spec.renew_time = Some(now);
        lease.spec = Some(spec);
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ACK_ANNOTATION.to_string(), self.acknowledged().to_string());
        lease
    }

    /// One write of the shard Lease: create it, or replace our last copy
    /// (a conflict re-reads it and writes again once).
    async fn write_lease(&self, current: &mut Option<Lease>) -> Result<(), MembershipError> {
        let name = self.inner.config.shard_lease_name().to_string();
        let api_err = |op, source| MembershipError::Api {
            op,
            lease: name.clone(),
            source,
        };
        for _ in 0..2 {
            let result = match current.clone() {
                None => {
                    self.inner
                        .leases
                        .create(&PostParams::default(), &self.shard_lease(None))
                        .await
                }
                Some(lease) => {
                    self.inner
                        .leases
                        .replace(
                            &name,
                            &PostParams::default(),
                            &self.shard_lease(Some(lease)),
                        )
                        .await
                }
            };
            match result {
                Ok(written) => {
                    *current = Some(written);
                    return Ok(());
                }
                Err(kube_client::Error::Api(s)) if s.code == 409 => {
                    *current = self
                        .inner
                        .leases
                        .get_opt(&name)
                        .await
                        .map_err(|e| api_err("get", e))?;
                    self.check_ring(current.as_ref())?;
                }
                Err(e) => return Err(api_err("write", e)),
            }
        }
        Err(MembershipError::Conflict { lease: name })
    }

    /// Refuses a Lease of this identity's name that another ring holds.
    fn check_ring(&self, lease: Option<&Lease>) -> Result<(), MembershipError> {
        let cfg = &self.inner.config;
        let ring = lease
            .and_then(|l| l.metadata.labels.as_ref())
            .and_then(|labels| labels.get(RING_LABEL));
        match ring {
            Some(other) if *other != cfg.ring => Err(MembershipError::IdentityTaken {
                lease: cfg.shard_lease_name().to_owned(),
                ring: cfg.ring.clone(),
                other_ring: other.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Writes the shard Lease every retry period, and at once when the
    /// acknowledged epoch grows. Returns only when the Lease is lost.
    async fn renew_loop(&self, stop: &CancellationToken) -> Result<(), MembershipError> {
        let cfg = &self.inner.config;
        let mut current: Option<Lease> = None;
        // Joining: nothing is owned before the first write, so failures
        // only delay the join.
        loop {
            match self.write_lease(&mut current).await {
                Ok(()) => break,
                Err(error @ MembershipError::IdentityTaken { .. }) => return Err(error),
                Err(error) => tracing::warn!(%error, "joining the ring"),
            }
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(cfg.timing.retry_period) => {}
            }
        }
        self.inner.renewals.fetch_add(1, Ordering::Relaxed);
        let current = tokio::sync::Mutex::new(current);
        // The acknowledged epoch the last attempt wrote.
        let published = AtomicU64::new(self.acknowledged());
        let acknowledgement = || async {
            if self.acknowledged() == published.load(Ordering::Acquire) {
                self.inner.ack_changed.notified().await;
            }
        };
        let attempt = || async {
            published.store(self.acknowledged(), Ordering::Release);
            match self.write_lease(&mut *current.lock().await).await {
                Ok(()) => {
                    self.inner.renewals.fetch_add(1, Ordering::Relaxed);
                    Attempted::Renewed
                }
                Err(error) => {
                    tracing::warn!(%error, "renewing the shard lease");
                    Attempted::Failed
                }
            }
        };
        // A failed write is retried sooner than a renewal is due. Only a
        // loss returns: `stop` ends the run around this loop.
        let lost = renew_until_lost(
            cfg.timing,
            Instant::now(),
            cfg.timing.retry_period / 4,
            &CancellationToken::new(),
            acknowledgement,
            attempt,
        )
        .await;
        match lost {
            Ok(()) => Ok(()),
            Err(reason) => {
                self.inner.fence.cancel();
                Err(MembershipError::LostLease {
                    identity: cfg.identity.clone(),
                    reason,
                })
            }
        }
    }

    /// Recomputes the view whenever a ring Lease changes.
    async fn view_loop(
        &self,
        informer: &SharedIndexInformer<Lease>,
        mut changes: watch::Receiver<u64>,
    ) {
        loop {
            self.inner.refresh_view(informer);
            if changes.changed().await.is_err() {
                return;
            }
        }
    }
}
