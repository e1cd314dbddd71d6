//! The manager's errors: [`ManagerError`], the one error type of setting
//! up a manager and its controllers and of running them, and
//! [`BuilderError`], a controller's invalid settings inside it.
//!
//! `BuilderError` is defined here, below the controller, so that
//! `ManagerError` holds it typed (the manager never imports the controller);
//! users name it as [`crate::controller::BuilderError`].

use std::net::SocketAddr;
use std::time::Duration;

use super::served::UnservedResource;
use crate::error::BoxError;
use crate::healthz::HealthzError;
use crate::leaderelection::LeaderElectionError;
use crate::metrics::MetricsError;
#[cfg(feature = "webhook")]
use crate::webhook::WebhookError;

/// Errors of building a controller, returned by
/// [`ControllerBuilder::complete`](crate::controller::ControllerBuilder::complete)
/// inside [`ManagerError::Controller`].
///
/// ```
/// use controller_runtime::manager::ManagerError;
/// use controller_runtime::controller::BuilderError;
/// let err = ManagerError::from(BuilderError::ZeroConcurrency("web".into()));
/// assert!(matches!(err, ManagerError::Controller(BuilderError::ZeroConcurrency(_))));
/// assert!(std::error::Error::source(&err).is_some());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuilderError {
    /// Controller names appear in metrics labels and logs: non-empty, at
    /// most 63 characters of `[a-zA-Z0-9_.-]`.
    #[error(
        "invalid controller name {0:?}: use 1-63 characters of letters, digits, '-', '_' or '.'"
    )]
    InvalidName(String),
    /// Another controller of this manager has the name.
    #[error("a controller named {0:?} is already registered with this manager")]
    DuplicateName(String),
    /// `max_concurrent_reconciles(0)` would never reconcile.
    #[error("controller {0:?}: max_concurrent_reconciles must be at least 1")]
    ZeroConcurrency(String),
    /// `reconcile_timeout(0)` would time out every reconcile.
    #[error("controller {0:?}: reconcile_timeout must be positive")]
    ZeroTimeout(String),
    /// A second label-mode sharded controller on one ring: the ring's
    /// labels name one controller's shards.
    #[error("ring {ring:?} already has a label-mode controller; use one ring per controller")]
    SecondLabelController {
        /// The ring.
        ring: String,
    },
    /// A fleet controller sharded in label mode: the sharder would have to
    /// label objects in the member clusters. Fleet controllers shard in
    /// filter mode ([`ShardMode::Filter`](crate::sharding::config::ShardMode)).
    #[error(
        "fleet controller {controller:?}: ring {ring:?} is in label mode; a fleet controller \
         shards in filter mode only (ShardingConfig::mode(ShardMode::Filter))"
    )]
    FleetLabelMode {
        /// The fleet controller.
        controller: String,
        /// The ring.
        ring: String,
    },
    /// The shard membership of a sharded controller could not be made (a
    /// `sharding::membership::MembershipError`: its settings break a rule).
    #[error("shard membership: {0}")]
    Membership(#[source] BoxError),
}

/// Errors of the manager: the one error type of setting up a manager and
/// its controllers, and of running them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// A controller's settings are invalid (its name, concurrency,
    /// timeout, or a second label-mode controller on one shard ring).
    #[error("controller setup: {0}")]
    Controller(#[from] BuilderError),
    /// A server address could not be bound.
    #[error("cannot bind the {what} server to {addr}: {source}")]
    Bind {
        /// `health` or `metrics`.
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The leader election settings are invalid.
    #[error("leader election: {0}")]
    LeaderElection(#[from] LeaderElectionError),
    /// Creating or registering metrics failed.
    #[error("metrics: {0}")]
    Metrics(#[from] MetricsError),
    /// A health check could not be added.
    #[error("health checks: {0}")]
    Healthz(#[from] HealthzError),
    /// A webhook was registered on a manager without a webhook server.
    #[cfg(feature = "webhook")]
    #[error("webhooks: no webhook server: configure one with ManagerBuilder::webhook_server")]
    NoWebhookServer,
    /// A webhook was registered after the manager started its webhook
    /// server.
    #[cfg(feature = "webhook")]
    #[error(
        "webhooks: the webhook server is running already; register webhooks before Manager::run"
    )]
    WebhookServerRunning,
    /// The webhook server refused a webhook (a path registered twice).
    #[cfg(feature = "webhook")]
    #[error("webhooks: {0}")]
    Webhook(#[source] WebhookError),
    /// A resource a controller watches is not served by the API server (its
    /// CRD is not installed, or its group-version is not enabled), found by
    /// discovery when [`Manager::run`](super::Manager::run) starts, before
    /// any informer (Go's controller-runtime: "no matches for kind").
    /// [`ManagerBuilder::wait_for_crds`](super::ManagerBuilder::wait_for_crds)
    /// waits for such resources instead, for a time.
    #[error(
        "{}{}",
        unserved.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        match waited {
            Some(waited) => format!(" (waited {waited:?})"),
            None => " (ManagerBuilder::wait_for_crds waits for a CRD installed later)".to_string(),
        }
    )]
    NotServed {
        /// Each watched resource that is not served.
        unserved: Vec<UnservedResource>,
        /// How long the manager waited for them, when it was told to.
        waited: Option<Duration>,
    },
    /// [`Manager::run`] was called a second time.
    #[error("the manager was already started; a manager runs once")]
    AlreadyStarted,
    /// A runnable (for example a controller whose caches did not sync) failed.
    #[error("runnable {name} failed: {source}")]
    Runnable {
        /// The runnable's name.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// This replica led and lost the lease; its controllers were stopped.
    #[error("leader election lost: {0}")]
    LeadershipLost(String),
    /// Some runnables did not finish within the graceful-shutdown timeout
    /// and were aborted.
    #[error("runnables did not stop within {timeout:?} and were aborted: {}", unfinished.join(", "))]
    ShutdownTimeout {
        /// The graceful-shutdown timeout.
        timeout: Duration,
        /// Names of the aborted runnables.
        unfinished: Vec<String>,
    },
}
