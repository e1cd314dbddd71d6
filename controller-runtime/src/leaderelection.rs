//! Lease-based leader election, so that one replica of a controller works at
//! a time.
//!
//! Layer 1 (building blocks): imports nothing else of this crate.
//!
//! Candidates compete for one `coordination.k8s.io/v1` Lease. The holder
//! renews it every retry period; a candidate takes the lease over when it is
//! free (released, empty holder) or when it has not changed for the lease
//! duration, judged by the candidate's own clock from when it last saw the
//! lease change (clocks of different machines are never compared). Every
//! write carries the lease's `resourceVersion`, so two candidates racing for
//! it cannot both win: the loser gets 409 Conflict. A new holder increments
//! `leaseTransitions`.
//!
//! A leader that cannot renew within the renew deadline stops leading at
//! once, before any other candidate can consider the lease expired (the
//! renew deadline is shorter than the lease duration). When cancelled, a
//! leader stops leading and then releases the lease so that a successor
//! takes over at its next attempt.
//!
//! Leadership is reported through a `tokio::sync::watch` channel
//! ([`LeaderElector::subscribe`]) and optional callbacks, run at the moment
//! leadership starts or stops.
//!
//! ```no_run
//! use controller_runtime::leaderelection::{LeaderElectionConfig, LeaderElector};
//! use tokio_util::sync::CancellationToken;
//! # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let config = LeaderElectionConfig::new("default", "my-operator", "pod-a");
//! let elector = LeaderElector::new(client, config)?;
//! let mut leading = elector.subscribe();
//! let cancel = CancellationToken::new();
//! let run = tokio::spawn({
//!     let (elector, cancel) = (elector.clone(), cancel.clone());
//!     async move { elector.run(cancel).await }
//! });
//! leading.wait_for(|l| *l).await?;
//! // ... reconcile while *leading.borrow() is true ...
//! cancel.cancel(); // stop leading and release the lease
//! run.await??;
//! # Ok(()) }
//! ```

mod config;
mod lock;
mod timing;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use config::{LeaderElectionConfig, default_identity};
pub use lock::{ApiLeaseLock, LeaseLock};
use lock::{Decision, Observed};
pub(crate) use timing::{Attempted, renew_until_lost};
pub use timing::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaseTiming, TimingError,
};

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaderElectionError {
    /// The settings break a rule (lease > renew deadline > 1.2 x retry).
    #[error("invalid leader election config: {reason}")]
    InvalidConfig {
        /// Which rule and which values.
        reason: String,
    },
    /// Another candidate wrote the lease first (409 Conflict or
    /// AlreadyExists): the race is lost, not an error of the server.
    #[error("lease {lease} was changed by another candidate (conflict)")]
    Conflict {
        /// `namespace/name` of the lease.
        lease: String,
    },
    /// A request to the API server failed.
    #[error("{op} of lease {lease} failed: {source}")]
    Api {
        /// The operation: get, create or update.
        op: &'static str,
        /// `namespace/name` of the lease.
        lease: String,
        /// The client error, with the API `Status` when there was one.
        #[source]
        source: kube_client::Error,
    },
    /// This candidate was leading and lost the lease: it could not renew
    /// within the renew deadline, or another candidate holds it now.
    #[error("{identity} lost the lease {lease}: {reason}")]
    LostLease {
        /// This candidate.
        identity: String,
        /// `namespace/name` of the lease.
        lease: String,
        /// Why.
        reason: String,
    },
}

/// How one acquire-or-renew attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease.
    Held,
    /// Another candidate holds an unexpired lease.
    HeldByOther,
    /// Another writer changed the lease between our read and our write.
    Raced,
}

type Callback = Arc<dyn Fn() + Send + Sync>;
type LeaderCallback = Arc<dyn Fn(&str) + Send + Sync>;

struct Inner {
    config: LeaderElectionConfig,
    lock: Box<dyn LeaseLock>,
    observed: Mutex<Option<Observed>>,
    leading: watch::Sender<bool>,
    on_started: Option<Callback>,
    on_stopped: Option<Callback>,
    on_new_leader: Option<LeaderCallback>,
}

/// One candidate in a leader election. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct LeaderElector {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.inner.config)
            .field("leading", &*self.inner.leading.borrow())
            .finish()
    }
}

/// Builds a [`LeaderElector`] with callbacks.
#[must_use]
pub struct LeaderElectorBuilder {
    config: LeaderElectionConfig,
    lock: Box<dyn LeaseLock>,
    on_started: Option<Callback>,
    on_stopped: Option<Callback>,
    on_new_leader: Option<LeaderCallback>,
}

impl LeaderElectorBuilder {
    /// Runs `f` at the moment this candidate starts leading.
    pub fn on_started_leading(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_started = Some(Arc::new(f));
        self
    }

    /// Runs `f` at the moment this candidate stops leading.
    pub fn on_stopped_leading(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_stopped = Some(Arc::new(f));
        self
    }

    /// Runs `f` with the holder's identity whenever a different holder is
    /// observed.
    pub fn on_new_leader(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_new_leader = Some(Arc::new(f));
        self
    }

    /// Validates the config and builds the elector.
    pub fn build(self) -> Result<LeaderElector, LeaderElectionError> {
        self.config.validate()?;
        let (leading, _) = watch::channel(false);
        Ok(LeaderElector {
            inner: Arc::new(Inner {
                config: self.config,
                lock: self.lock,
                observed: Mutex::new(None),
                leading,
                on_started: self.on_started,
                on_stopped: self.on_stopped,
                on_new_leader: self.on_new_leader,
            }),
        })
    }
}

impl LeaderElector {
    /// An elector for the Lease named in `config`, through `client`.
    pub fn new(
        client: kube_client::Client,
        config: LeaderElectionConfig,
    ) -> Result<Self, LeaderElectionError> {
        Self::builder(client, config).build()
    }

    /// A builder for an elector over the API server's Lease.
    pub fn builder(
        client: kube_client::Client,
        config: LeaderElectionConfig,
    ) -> LeaderElectorBuilder {
        let lock = ApiLeaseLock::new(client, &config.lease_namespace, &config.lease_name);
        Self::builder_with_lock(config, lock)
    }

    /// A builder for an elector over any [`LeaseLock`].
    pub fn builder_with_lock(
        config: LeaderElectionConfig,
        lock: impl LeaseLock,
    ) -> LeaderElectorBuilder {
        LeaderElectorBuilder {
            config,
            lock: Box::new(lock),
            on_started: None,
            on_stopped: None,
            on_new_leader: None,
        }
    }

    /// A receiver that sees `true` while this candidate leads.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.inner.leading.subscribe()
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        *self.inner.leading.borrow()
    }

    /// The holder named in the lease as last observed, if any.
    pub fn observed_leader(&self) -> Option<String> {
        self.inner
            .observed
            .lock()
            .as_ref()
            .and_then(|o| o.holder().map(str::to_string))
    }

    /// The settings in use.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.inner.config
    }

    /// Competes for the lease until `cancel` fires, leads while it holds it.
    ///
    /// Returns `Ok(())` when cancelled (after releasing the lease if this
    /// candidate led and `release_on_cancel` is set), and
    /// [`LeaderElectionError::LostLease`] when it led and lost the lease; the
    /// watch channel reads `false` before either return.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), LeaderElectionError> {
        let Some(leading_since) = self.acquire(&cancel).await else {
            return Ok(());
        };
        self.set_leading(true);
        let result = self.renew_loop(&cancel, leading_since).await;
        self.set_leading(false);
        match result {
            Ok(()) => {
                if self.inner.config.release_on_cancel {
                    self.release().await;
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Tries until it holds the lease; returns when the winning attempt
    /// started, or `None` when cancelled.
    async fn acquire(&self, cancel: &CancellationToken) -> Option<Instant> {
        let retry = self.inner.config.timing.retry_period;
        loop {
            let started = Instant::now();
            // A hung request must not hold up the next attempt for long.
            let limit = self.inner.config.timing.renew_deadline;
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return None,
                r = tokio::time::timeout(limit, self.try_acquire_or_renew()) => r,
            };
            match attempt {
                Ok(Ok(Attempt::Held)) => return Some(started),
                Ok(Ok(Attempt::HeldByOther | Attempt::Raced)) => {}
                Ok(Err(error)) => tracing::warn!(%error, "leader election: acquire attempt failed"),
                Err(_elapsed) => tracing::warn!("leader election: acquire attempt timed out"),
            }
            let jitter = retry.mul_f64(rand::rng().random_range(0.0..0.2));
            tokio::select! {
                _ = cancel.cancelled() => return None,
                _ = tokio::time::sleep(retry + jitter) => {}
            }
        }
    }

    /// Renews every retry period; returns `Ok` when cancelled and
    /// `LostLease` when a renewal did not succeed within the renew deadline
    /// or another holder was found.
    async fn renew_loop(
        &self,
        cancel: &CancellationToken,
        last_renew: Instant,
    ) -> Result<(), LeaderElectionError> {
        let timing = self.inner.config.timing;
        let attempt = || async {
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held) => Attempted::Renewed,
                Ok(Attempt::Raced) => {
                    tracing::debug!("leader election: renewal lost a write race; retrying");
                    Attempted::Failed
                }
                Ok(Attempt::HeldByOther) => Attempted::Lost(format!(
                    "another candidate ({}) holds it",
                    self.observed_leader().unwrap_or_default()
                )),
                Err(error) => {
                    tracing::warn!(%error, "leader election: renew attempt failed");
                    Attempted::Failed
                }
            }
        };
        renew_until_lost(
            timing,
            last_renew,
            timing.retry_period,
            cancel,
            futures::future::pending,
            attempt,
        )
        .await
        .map_err(|reason| self.lost(reason))
    }

    fn lost(&self, reason: String) -> LeaderElectionError {
        LeaderElectionError::LostLease {
            identity: self.inner.config.identity.clone(),
            lease: self.inner.lock.describe(),
            reason,
        }
    }

    fn set_leading(&self, leading: bool) {
        let changed = self.inner.leading.send_if_modified(|l| {
            let changed = *l != leading;
            *l = leading;
            changed
        });
        if !changed {
            return;
        }
        let id = &self.inner.config.identity;
        if leading {
            tracing::info!(identity = %id, lease = %self.inner.lock.describe(), "started leading");
            if let Some(f) = &self.inner.on_started {
                f();
            }
        } else {
            tracing::info!(identity = %id, lease = %self.inner.lock.describe(), "stopped leading");
            if let Some(f) = &self.inner.on_stopped {
                f();
            }
        }
    }

    fn observe(&self, lease: Lease, now: Instant) -> Observed {
        let mut slot = self.inner.observed.lock();
        let before = slot.as_ref().and_then(|o| o.holder().map(str::to_string));
        let observed = Observed::update(slot.as_ref(), lease, now);
        let after = observed.holder().map(str::to_string);
        *slot = Some(observed.clone());
        drop(slot);
        if after != before
            && let (Some(holder), Some(f)) = (after.as_deref(), &self.inner.on_new_leader)
        {
            f(holder);
        }
        observed
    }

    /// One attempt: read the lease; create it, take it over or renew it when
    /// the rules allow.
    ///
    /// Every observation is stamped with the local time at which the read or
    /// write that produced it *returned*, never when it was sent: a follower
    /// whose GET took seconds must count the lease's duration from the
    /// answer, or a slow read would shorten its wait and let it take over
    /// while the old leader still leads. (The leader's own renew deadline is
    /// counted from when the renewal was sent, the safe side for it.)
    async fn try_acquire_or_renew(&self) -> Result<Attempt, LeaderElectionError> {
        let cfg = &self.inner.config;
        let lock = &self.inner.lock;
        let duration_secs = cfg.timing.lease_duration_seconds();
        let read = lock.get().await?;
        let now = Instant::now();
        let Some(current) = read else {
            let spec = lock::next_spec(None, &cfg.identity, duration_secs, jiff::Timestamp::now());
            let lease = lock::new_lease(&cfg.lease_namespace, &cfg.lease_name, spec);
            return match lock.create(lease).await {
                Ok(created) => {
                    self.observe(created, Instant::now());
                    Ok(Attempt::Held)
                }
                Err(LeaderElectionError::Conflict { .. }) => Ok(Attempt::Raced),
                Err(e) => Err(e),
            };
        };
        let observed = self.observe(current, now);
        if let Decision::Wait { .. } =
            lock::decide(&observed, &cfg.identity, now, cfg.timing.lease_duration)
        {
            return Ok(Attempt::HeldByOther);
        }
        let mut lease = observed.lease;
        lease.spec = Some(lock::next_spec(
            lease.spec.as_ref(),
            &cfg.identity,
            duration_secs,
            jiff::Timestamp::now(),
        ));
        match lock.update(lease).await {
            Ok(updated) => {
                self.observe(updated, Instant::now());
                Ok(Attempt::Held)
            }
            Err(LeaderElectionError::Conflict { .. }) => Ok(Attempt::Raced),
            Err(e) => Err(e),
        }
    }

    /// Writes an empty holder if we still hold the lease. When the write
    /// races (a renewal cancelled in flight may have changed the lease), it
    /// reads the lease once more and retries if we still hold it.
    async fn release(&self) {
        let Some(mut lease) = self.inner.observed.lock().as_ref().map(|o| o.lease.clone()) else {
            return;
        };
        for _ in 0..2 {
            if lock::holder(&lease) != Some(self.inner.config.identity.as_str()) {
                return;
            }
            lease.spec = Some(lock::released_spec(
                lease.spec.as_ref(),
                jiff::Timestamp::now(),
            ));
            match self.inner.lock.update(lease).await {
                Ok(updated) => {
                    self.observe(updated, Instant::now());
                    tracing::info!(lease = %self.inner.lock.describe(), "released the lease");
                    return;
                }
                Err(LeaderElectionError::Conflict { .. }) => match self.inner.lock.get().await {
                    Ok(Some(fresh)) => lease = fresh,
                    Ok(None) => return,
                    Err(error) => {
                        tracing::warn!(%error, "leader election: release failed");
                        return;
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, "leader election: release failed");
                    return;
                }
            }
        }
    }
}

/// Waits until `rx` reads `leading` or `timeout` passes; `true` if it did.
/// A small helper for managers and tests.
pub async fn wait_for_leading(
    rx: &mut watch::Receiver<bool>,
    leading: bool,
    timeout: Duration,
) -> bool {
    tokio::time::timeout(timeout, rx.wait_for(|l| *l == leading))
        .await
        .is_ok_and(|r| r.is_ok())
}

#[cfg(test)]
mod tests;
