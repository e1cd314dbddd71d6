//! The simplest provider: a fixed list of clusters, each a client or a
//! kubeconfig of the program's own.

use kube_client::Client;
use kube_client::config::Kubeconfig;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::fleet::{Fleet, FleetError};
use super::member_client::{MemberClientOptions, ProviderError};
use super::provider::Provider;
use crate::error::BoxError;

enum Reach {
    Client(Client),
    Kubeconfig(Box<Kubeconfig>),
}

/// A fixed list of clusters, engaged when the manager starts and
/// disengaged when it stops: each a client, or a kubeconfig (its current
/// context). A kubeconfig that gives no client stops the manager with a
/// [`ProviderError`] naming the cluster; an unreachable cluster does not,
/// and one the fleet's [filter](Fleet::filter) keeps out is skipped.
///
/// The kubeconfigs are the program's own, so they are trusted: `exec`,
/// `auth-provider` and file references are allowed (unlike the
/// [`SecretProvider`](super::SecretProvider)'s). Their clients are made
/// with [`MemberClientOptions`] (no retry under the informers, connect and
/// read timeouts); [`client_options`](Self::client_options) changes them.
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
pub struct StaticProvider {
    clusters: Mutex<Vec<(String, Reach)>>,
    options: MemberClientOptions,
}

impl Default for StaticProvider {
    fn default() -> Self {
        StaticProvider {
            clusters: Mutex::default(),
            options: MemberClientOptions::new().allow_external_credentials(),
        }
    }
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

    /// How the kubeconfigs' clients are made (default:
    /// [`MemberClientOptions::new`] with external credentials allowed).
    #[must_use]
    pub fn client_options(mut self, options: MemberClientOptions) -> Self {
        self.options = options;
        self
    }
}

impl Provider for StaticProvider {
    fn name(&self) -> String {
        "static".to_string()
    }

    async fn run(&self, fleet: Fleet, stop: CancellationToken) -> Result<(), BoxError> {
        let clusters = std::mem::take(&mut *self.clusters.lock());
        for (name, reach) in clusters {
            let client = match reach {
                Reach::Client(client) => client,
                Reach::Kubeconfig(kubeconfig) => {
                    self.options
                        .client_from_kubeconfig(&name, *kubeconfig)
                        .await?
                }
            };
            match fleet.engage(&name, client) {
                Ok(_) => {}
                // Logged by the fleet; the others go on.
                Err(FleetError::Filtered(_)) => {}
                Err(error) => return Err(ProviderError::from(error).into()),
            }
        }
        stop.cancelled().await;
        Ok(())
    }
}
