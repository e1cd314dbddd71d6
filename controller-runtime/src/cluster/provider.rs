//! Providers: what engages and disengages the clusters of a fleet while
//! the manager runs, and the simplest one, a static list.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube_client::Client;
use kube_client::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::fleet::{Fleet, FleetError};
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

/// Why a provider could not turn a kubeconfig into a client.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The kubeconfig does not parse or names no usable context.
    #[error("cluster {cluster:?}: kubeconfig: {source}")]
    Kubeconfig {
        /// The cluster it was for.
        cluster: String,
        /// What is wrong with it.
        #[source]
        source: KubeconfigError,
    },
    /// No client can be made from the kubeconfig (TLS settings, proxy).
    #[error("cluster {cluster:?}: client: {source}")]
    Client {
        /// The cluster it was for.
        cluster: String,
        /// kube-client's error.
        #[source]
        source: kube_client::Error,
    },
    /// The fleet refused the cluster.
    #[error(transparent)]
    Fleet(#[from] FleetError),
}

/// A client for the current context of `kubeconfig`.
pub(crate) async fn client_from_kubeconfig(
    cluster: &str,
    kubeconfig: Kubeconfig,
) -> Result<Client, ProviderError> {
    let config =
        kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|source| ProviderError::Kubeconfig {
                cluster: cluster.to_string(),
                source,
            })?;
    Client::try_from(config).map_err(|source| ProviderError::Client {
        cluster: cluster.to_string(),
        source,
    })
}

enum Reach {
    Client(Client),
    Kubeconfig(Box<Kubeconfig>),
}

/// A fixed list of clusters, engaged when the manager starts and
/// disengaged when it stops: each a client, or a kubeconfig (its current
/// context). A kubeconfig that gives no client stops the manager with a
/// [`ProviderError`] naming the cluster; an unreachable cluster does not.
///
/// ```no_run
/// # async fn demo(client: kube_client::Client, edge: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use controller_runtime::cluster::StaticProvider;
/// use controller_runtime::manager::Manager;
/// let kubeconfig = kube_client::config::Kubeconfig::read_from("edge-2.kubeconfig")?;
/// let mgr = Manager::builder(client)
///     .provider(StaticProvider::new().client("edge-1", edge).kubeconfig("edge-2", kubeconfig))
///     .build()
///     .await?;
/// # let _ = mgr;
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct StaticProvider {
    clusters: Mutex<Vec<(String, Reach)>>,
}

impl std::fmt::Debug for StaticProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .clusters
            .lock()
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        f.debug_struct("StaticProvider")
            .field("clusters", &names)
            .finish()
    }
}

impl StaticProvider {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the cluster `name` reached through `client`.
    #[must_use]
    pub fn client(self, name: impl Into<String>, client: Client) -> Self {
        self.clusters
            .lock()
            .push((name.into(), Reach::Client(client)));
        self
    }

    /// Adds the cluster `name` reached through `kubeconfig`'s current
    /// context.
    #[must_use]
    pub fn kubeconfig(self, name: impl Into<String>, kubeconfig: Kubeconfig) -> Self {
        self.clusters
            .lock()
            .push((name.into(), Reach::Kubeconfig(Box::new(kubeconfig))));
        self
    }
}

impl Provider for StaticProvider {
    fn name(&self) -> String {
        "static".to_string()
    }

    fn run(
        self: Arc<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        let clusters = std::mem::take(&mut *self.clusters.lock());
        Box::pin(async move {
            for (name, reach) in clusters {
                let client = match reach {
                    Reach::Client(client) => client,
                    Reach::Kubeconfig(kubeconfig) => {
                        client_from_kubeconfig(&name, *kubeconfig).await?
                    }
                };
                fleet.engage(&name, client).map_err(ProviderError::from)?;
            }
            stop.cancelled().await;
            Ok(())
        })
    }
}
