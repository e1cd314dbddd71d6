//! Providers: what engages and disengages the clusters of a fleet while
//! the manager runs. Implementors write an `async fn run`; the manager
//! holds them behind a crate-private object-safe adapter.

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
/// `run` is an `async fn`. A provider of its own that reads kubeconfigs
/// makes their clients with [`MemberClientOptions`](super::MemberClientOptions),
/// as the [`SecretProvider`](super::SecretProvider) does (inline
/// credentials only, no retry under the informers, timeouts), and may give
/// the fleet's [filter](Fleet::filter) labels through
/// [`Fleet::engage_with`]:
///
/// ```
/// use std::collections::BTreeMap;
/// use controller_runtime::BoxError;
/// use controller_runtime::CancellationToken;
/// use controller_runtime::cluster::{ClusterInfo, Fleet, MemberClientOptions, Provider};
///
/// /// Engages the clusters of kubeconfigs found in a directory, labelled
/// /// with where they came from.
/// struct Directory(std::path::PathBuf);
///
/// impl Provider for Directory {
///     fn name(&self) -> String {
///         format!("directory {}", self.0.display())
///     }
///
///     async fn run(&self, fleet: Fleet, stop: CancellationToken) -> Result<(), BoxError> {
///         let options = MemberClientOptions::new(); // inline credentials only
///         for entry in std::fs::read_dir(&self.0)? {
///             let path = entry?.path();
///             let Some(name) = path.file_stem().and_then(|s| s.to_str()) else { continue };
///             let yaml = std::fs::read(&path)?;
///             let client = options.client_from_yaml(name, &yaml).await?;
///             let labels = BTreeMap::from([("source".to_string(), "directory".to_string())]);
///             fleet.engage_with(ClusterInfo::new(name).with_labels(labels), client)?;
///         }
///         stop.cancelled().await;
///         Ok(())
///     }
/// }
/// ```
pub trait Provider: Send + Sync + 'static {
    /// A name for logs and errors.
    fn name(&self) -> String;

    /// Engages and disengages clusters in `fleet` until `stop` fires.
    fn run(
        &self,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// A [`Provider`] as the manager holds it (any provider, behind one
/// pointer type).
pub(crate) trait DynProvider: Send + Sync {
    fn name(&self) -> String;

    fn run(
        self: Arc<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>>;
}

impl<P: Provider> DynProvider for P {
    fn name(&self) -> String {
        Provider::name(self)
    }

    fn run(
        self: Arc<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { Provider::run(&*self, fleet, stop).await })
    }
}
