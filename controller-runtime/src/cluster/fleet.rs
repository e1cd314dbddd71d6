//! The fleet: the clusters a manager reconciles besides its own, engaged
//! and disengaged while it runs.
//!
//! Engaging a cluster gives it an engagement task while the manager runs
//! (see `engagement.rs`): it asks the cluster's API server for its version
//! until it answers (retrying with jittered [`EngageBackoff`]), then starts
//! the cluster's informers and *attaches* it, which is when fleet
//! controllers start watching it; it keeps looking every `probe_interval`
//! and reports the cluster's [`ClusterHealth`] (`Ready` only while it
//! answers, its informers have synced and none is forbidden to list; the
//! metrics, and `/readyz` if asked, see [`Fleet::readyz_threshold`])
//! without ever stopping the manager or the other clusters. Disengaging detaches the cluster first
//! (controllers remove their handlers and forget its requests), then stops
//! its informers and its event writer and removes its metric series (the
//! fleet's and its informers' `informer_*{cluster}`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kube_client::Client;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::health::{ClusterHealth, EngageBackoff};
use super::hooks::{ClusterInfo, EveryMember, Hook, MemberSetup};
use super::metrics::FleetMetrics;
use super::permissions::ListAccess;
use super::{Cluster, ClusterOptions};
use crate::healthz::{Checks, check_fn};
use crate::metrics::{ClusterInformerMetrics, Metrics, MetricsError, PrometheusInformerMetrics};

/// Why a cluster could not be engaged. New variants may be added: a
/// `match` on it has a `_ =>` arm.
///
/// ```no_run
/// # fn demo(mgr: controller_runtime::manager::Manager, client: kube_client::Client) {
/// use controller_runtime::cluster::FleetError;
/// match mgr.fleet().engage("edge-1", client) {
///     Ok(_) => {}
///     Err(FleetError::AlreadyEngaged(_)) => {} // engaged before: fine
///     Err(error) => eprintln!("not engaged: {error}"),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The name is empty, longer than 253 characters, or has characters
    /// other than lower-case letters, digits, `-` and `.`.
    #[error("invalid cluster name {0:?}: use 1-253 of [a-z0-9-.]")]
    InvalidName(String),
    /// A cluster of that name is engaged already (disengage it first).
    #[error("cluster {0:?} is engaged already")]
    AlreadyEngaged(String),
    /// The fleet's [filter](Fleet::filter) keeps the cluster out.
    #[error("cluster {0:?} is kept out by the fleet's filter")]
    Filtered(String),
}

/// The attached clusters (informers started), by name, as fleet
/// controllers follow them.
pub(crate) type Attached = BTreeMap<Arc<str>, Cluster>;

/// The clusters a manager reconciles besides its own; see the
/// [module documentation](crate::cluster). Cheap to clone; clones share
/// everything. [`Manager::fleet`](crate::manager::Manager::fleet) is the
/// manager's; [`Provider`](super::Provider)s engage and disengage its
/// clusters, and a program may too.
///
/// ```no_run
/// # async fn demo(mgr: controller_runtime::manager::Manager, client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let fleet = mgr.fleet();
/// fleet.engage("edge-1", client)?;
/// assert_eq!(fleet.names(), ["edge-1"]);
/// println!("{:?}", fleet.health("edge-1"));
/// assert!(fleet.disengage("edge-1").await);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

struct Inner {
    options: ClusterOptions,
    backoff: EngageBackoff,
    metrics: FleetMetrics,
    informer_families: Arc<PrometheusInformerMetrics>,
    readyz: Checks,
    /// How many engaged clusters may be not ready before `/readyz` fails;
    /// `usize::MAX` until [`Fleet::readyz_threshold`] is called (no check).
    readyz_threshold: AtomicUsize,
    state: Mutex<State>,
    attached: watch::Sender<Attached>,
    /// The filter, hooks and indexes of every member.
    every: EveryMember,
}

#[derive(Default)]
struct State {
    /// Set while the manager runs: engagements get their task at once.
    running: Option<CancellationToken>,
    engaged: BTreeMap<Arc<str>, Engagement>,
    /// Run on each member as it is engaged (under this lock, so that none
    /// is missed by one added meanwhile).
    setups: Vec<MemberSetup>,
}

struct Engagement {
    cluster: Cluster,
    /// The `informer_*` series of the cluster's informers.
    informer_metrics: ClusterInformerMetrics,
    /// Whose informers' lists the cluster forbids.
    access: Arc<ListAccess>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("engaged", &self.names())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// The fleet of a manager: its clusters built with `options`, reported
    /// in `metrics` and, if [`readyz_threshold`](Self::readyz_threshold)
    /// is called, in `readyz`.
    pub(crate) fn new(
        options: ClusterOptions,
        backoff: EngageBackoff,
        metrics: &Metrics,
        readyz: Checks,
    ) -> Result<Self, MetricsError> {
        Ok(Fleet {
            inner: Arc::new(Inner {
                options,
                backoff,
                metrics: FleetMetrics::new(metrics)?,
                informer_families: metrics.informer_families(),
                readyz,
                readyz_threshold: AtomicUsize::new(usize::MAX),
                state: Mutex::new(State::default()),
                attached: watch::Sender::new(Attached::new()),
                every: EveryMember::default(),
            }),
        })
    }

    /// Engages the cluster `name` reached through `client`: while the
    /// manager runs (at once, or when it starts), the cluster is reached,
    /// its [engage hooks](Self::on_engage) run, its informers started and
    /// fleet controllers reconcile in it. Returns the cluster (its
    /// informers are not running yet). The same as
    /// [`engage_with`](Self::engage_with) a [`ClusterInfo`] without labels.
    pub fn engage(&self, name: &str, client: Client) -> Result<Cluster, FleetError> {
        self.engage_with(ClusterInfo::new(name), client)
    }

    /// [`engage`](Self::engage) the cluster `info` names, unless the
    /// fleet's [filter](Self::filter) keeps it out
    /// ([`FleetError::Filtered`]). Providers give the labels they know
    /// (a [`SecretProvider`](super::SecretProvider) the Secret's).
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager, client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::collections::BTreeMap;
    /// use controller_runtime::cluster::ClusterInfo;
    /// let labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
    /// mgr.fleet().engage_with(ClusterInfo::new("edge-1").with_labels(labels), client)?;
    /// # Ok(()) }
    /// ```
    pub fn engage_with(&self, info: ClusterInfo, client: Client) -> Result<Cluster, FleetError> {
        let name = info.name();
        validate_name(name)?;
        if !self.inner.every.admits(&info) {
            tracing::info!(cluster = name, "cluster kept out by the fleet's filter");
            return Err(FleetError::Filtered(name.to_string()));
        }
        let mut state = self.inner.state.lock();
        if state.engaged.contains_key(name) {
            return Err(FleetError::AlreadyEngaged(name.to_string()));
        }
        let informer_metrics =
            ClusterInformerMetrics::new(Arc::clone(&self.inner.informer_families), name);
        let access = Arc::new(ListAccess::new(Arc::new(informer_metrics.clone())));
        let cluster = Cluster::new(
            name,
            client,
            &self.inner.options,
            Some(Arc::clone(&access) as _),
        );
        cluster.set_health(ClusterHealth::Pending);
        for setup in &state.setups {
            setup(&cluster);
        }
        let mut engagement = Engagement {
            cluster: cluster.clone(),
            informer_metrics,
            access,
            stop: CancellationToken::new(),
            task: None,
        };
        self.inner.metrics.engaged(name);
        if let Some(running) = &state.running {
            engagement.stop = running.child_token();
            engagement.task = Some(self.spawn(&engagement));
        }
        state.engaged.insert(cluster.inner.name.clone(), engagement);
        drop(state);
        tracing::info!(cluster = name, "cluster engaged");
        Ok(cluster)
    }

    /// Disengages the cluster `name`: fleet controllers stop watching it
    /// and drop its queued requests, then its informers and event writer
    /// are stopped (waited for up to 5 s). `false` if it was not engaged.
    pub async fn disengage(&self, name: &str) -> bool {
        let Some(engagement) = self.inner.state.lock().engaged.remove(name) else {
            return false;
        };
        self.detach(name);
        engagement.stop.cancel();
        if let Some(task) = engagement.task {
            let _ = task.await;
        }
        self.inner.metrics.disengaged(name);
        engagement.informer_metrics.remove_series();
        tracing::info!(cluster = name, "cluster disengaged");
        true
    }

    /// The names of the engaged clusters, sorted.
    pub fn names(&self) -> Vec<String> {
        let state = self.inner.state.lock();
        state.engaged.keys().map(|n| n.to_string()).collect()
    }

    /// The engaged cluster `name`.
    pub fn get(&self, name: &str) -> Option<Cluster> {
        let state = self.inner.state.lock();
        state.engaged.get(name).map(|e| e.cluster.clone())
    }

    /// What the fleet knows of the engaged cluster `name`.
    pub fn health(&self, name: &str) -> Option<ClusterHealth> {
        let state = self.inner.state.lock();
        state.engaged.get(name).map(|e| e.cluster.health())
    }

    /// Follows the attached clusters (those whose informers run).
    pub(crate) fn subscribe(&self) -> watch::Receiver<Attached> {
        self.inner.attached.subscribe()
    }

    /// Starts the engagement of every cluster engaged so far, and of those
    /// engaged later, until `stop` (the manager runs).
    pub(crate) fn start(&self, stop: &CancellationToken) {
        let mut state = self.inner.state.lock();
        state.running = Some(stop.clone());
        let pending: Vec<Arc<str>> = state
            .engaged
            .iter()
            .filter(|(_, e)| e.task.is_none())
            .map(|(n, _)| Arc::clone(n))
            .collect();
        for name in pending {
            if let Some(engagement) = state.engaged.get_mut(&name) {
                engagement.stop = stop.child_token();
                engagement.task = Some(self.spawn(engagement));
            }
        }
    }

    /// Disengages every cluster (the manager stops), waiting for their
    /// engagements until `give_up`.
    pub(crate) async fn shutdown(&self, give_up: Instant) {
        let engaged = {
            let mut state = self.inner.state.lock();
            state.running = None;
            std::mem::take(&mut state.engaged)
        };
        self.inner.attached.send_replace(Attached::new());
        for (name, engagement) in engaged {
            engagement.stop.cancel();
            if let Some(task) = engagement.task
                && tokio::time::timeout_at(give_up, task).await.is_err()
            {
                tracing::warn!(cluster = %name, "cluster did not stop in time");
            }
            self.inner.metrics.disengaged(&name);
            engagement.informer_metrics.remove_series();
        }
    }

    /// Runs `setup` on every engaged member now (starting the informers it
    /// requested in those attached already) and on every member engaged
    /// later, before its informers start.
    pub(super) fn add_setup(&self, setup: MemberSetup) {
        let mut state = self.inner.state.lock();
        for engagement in state.engaged.values() {
            setup(&engagement.cluster);
            if engagement.cluster.cache().is_started() {
                engagement.cluster.informer_factory().start();
            }
        }
        state.setups.push(setup);
    }

    pub(super) fn every(&self) -> &EveryMember {
        &self.inner.every
    }

    /// The engage hooks, in the order they were added.
    pub(super) fn hooks(&self) -> Vec<Hook> {
        self.inner.every.hooks()
    }

    pub(super) fn backoff(&self) -> EngageBackoff {
        self.inner.backoff
    }

    /// How long a member's informers may take to sync before it is
    /// reported failing (the manager's cache-sync timeout).
    pub(super) fn sync_timeout(&self) -> Duration {
        self.inner.options.cache_sync_timeout
    }

    pub(super) fn metrics(&self) -> &FleetMetrics {
        &self.inner.metrics
    }

    /// Starts `cluster`'s informers and lets fleet controllers in, unless
    /// it was disengaged meanwhile (checked under the fleet's lock, which
    /// `disengage` takes to remove it before detaching it); `false` then.
    pub(super) fn attach(&self, cluster: &Cluster, stop: &CancellationToken) -> bool {
        let state = self.inner.state.lock();
        let current = state
            .engaged
            .get(cluster.name())
            .is_some_and(|e| e.cluster.same_as(cluster));
        if !current || stop.is_cancelled() {
            return false;
        }
        cluster.start_informers();
        let (name, cluster) = (cluster.name_arc(), cluster.clone());
        self.inner.attached.send_modify(|attached| {
            attached.insert(name, cluster);
        });
        true
    }

    fn detach(&self, name: &str) {
        self.inner
            .attached
            .send_if_modified(|attached| attached.remove(name).is_some());
    }

    fn spawn(&self, engagement: &Engagement) -> JoinHandle<()> {
        self.spawn_engagement(
            engagement.cluster.clone(),
            Arc::clone(&engagement.access),
            engagement.stop.clone(),
        )
    }

    /// Makes the manager's `/readyz` fail (check `fleet clusters`, naming
    /// them with their last error) while more than `max_not_ready` engaged
    /// clusters are not ready ([`ClusterHealth::Pending`] or `Failing`);
    /// `0` fails it while any one is not. Called again, the new threshold
    /// replaces the old.
    ///
    /// Without it (the default) the members' health is reported in
    /// [`health`](Self::health) and the `controller_runtime_fleet_*`
    /// metrics only: the manager's readiness is about the manager, so one
    /// unreachable member does not take every replica (and the hub's
    /// webhooks they serve) out of its Service.
    ///
    /// ```no_run
    /// # fn demo(mgr: controller_runtime::manager::Manager) {
    /// // Unready once more than a third of 30 members are unreachable.
    /// mgr.fleet().readyz_threshold(10);
    /// # }
    /// ```
    pub fn readyz_threshold(&self, max_not_ready: usize) {
        let before = self
            .inner
            .readyz_threshold
            .swap(max_not_ready.min(usize::MAX - 1), Ordering::AcqRel);
        if before != usize::MAX {
            return;
        }
        let fleet = Arc::downgrade(&self.inner);
        let check = check_fn(move || {
            let Some(inner) = fleet.upgrade() else {
                return Ok(());
            };
            let threshold = inner.readyz_threshold.load(Ordering::Acquire);
            let state = inner.state.lock();
            let down: Vec<String> = state
                .engaged
                .iter()
                .filter_map(|(n, e)| match e.cluster.health() {
                    ClusterHealth::Ready => None,
                    ClusterHealth::Failing { error, .. } => Some(format!("{n} ({error})")),
                    ClusterHealth::Pending => Some(format!("{n} (not ready yet)")),
                })
                .collect();
            if down.len() <= threshold {
                Ok(())
            } else {
                Err(format!(
                    "{} clusters not ready (at most {threshold} may be): {}",
                    down.len(),
                    down.join(", ")
                ))
            }
        });
        if let Err(error) = self.inner.readyz.add("fleet clusters", check) {
            tracing::warn!(%error, "cannot add the fleet's readiness check");
        }
    }
}

fn validate_name(name: &str) -> Result<(), FleetError> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(FleetError::InvalidName(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(validate_name("edge-1.eu").is_ok());
        for bad in ["", "Edge", "a/b", "a b", &"x".repeat(254)] {
            assert!(
                matches!(validate_name(bad), Err(FleetError::InvalidName(_))),
                "{bad:?}"
            );
        }
    }
}
