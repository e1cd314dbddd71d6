//! Providers: what engages and disengages the clusters of a fleet while
//! the manager runs.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::fleet::Fleet;
use crate::error::BoxError;

/// Discovers clusters and engages them in (and disengages them from) a
/// manager's [`Fleet`] while the manager runs (multicluster-runtime's
/// provider). The manager runs each provider on every replica from
/// [`Manager::run`](crate::manager::Manager::run) until it stops; the
/// fleet disengages every cluster when the manager stops. An error stops
/// the manager; a cluster that cannot be reached is no error (the fleet
/// retries it, see [`EngageBackoff`](super::EngageBackoff)).
///
/// ```
/// use std::sync::Arc;
/// use controller_runtime::BoxError;
/// use controller_runtime::cluster::{Fleet, Provider};
/// use controller_runtime::CancellationToken;
/// use futures::future::BoxFuture;
///
/// /// Engages one cluster for as long as the manager runs.
/// struct One(kube_client::Client);
///
/// impl Provider for One {
///     fn name(&self) -> String {
///         "one".into()
///     }
///     fn run(self: Arc<Self>, fleet: Fleet, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
///         Box::pin(async move {
///             fleet.engage("one", self.0.clone())?;
///             stop.cancelled().await;
///             Ok(())
///         })
///     }
/// }
/// ```
pub trait Provider: Send + Sync + 'static {
    /// A name for logs and errors.
    fn name(&self) -> String;

    /// Engages and disengages clusters in `fleet` until `stop` fires.
    fn run(
        self: Arc<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>>;
}
