//! The provider of clusters whose kubeconfigs are Secrets of the manager's
//! own cluster: a labelled Secret added engages a cluster, one deleted
//! disengages it, one whose kubeconfig changed re-engages it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::handler::ResourceEventHandler;
use informer_core::key::ObjectOrTombstone;
use k8s_openapi::api::core::v1::Secret;
use kube_client::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fleet::{Fleet, FleetError};
use super::hooks::ClusterInfo;
use super::member_client::{MemberClientOptions, ProviderError};
use super::provider::Provider;
use crate::error::BoxError;
use crate::rbac::Permissions;

/// The default key of a cluster Secret's kubeconfig (`data.kubeconfig`);
/// see [`SecretProvider::data_key`].
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// Names the cluster of a Secret (`None`: the Secret is skipped).
type ClusterName = Arc<dyn Fn(&Secret) -> Option<String> + Send + Sync>;

/// Engages a cluster for each Secret in one namespace of the manager's own
/// cluster that carries a label selector's labels: the cluster is named as
/// the Secret (or as [`cluster_name`](Self::cluster_name) says), reached
/// through the kubeconfig in its `data.kubeconfig` ([`KUBECONFIG_KEY`], or
/// [`data_key`](Self::data_key)), current context. The Secrets are
/// watched: a Secret added engages its cluster, a Secret deleted (or
/// unlabelled) disengages it and stops its informers, a changed kubeconfig
/// re-engages it. A Secret without a usable kubeconfig is logged (its name
/// and what is wrong, never any of its content) and skipped; the others
/// are unaffected. Each cluster is engaged with the Secret's labels
/// ([`ClusterInfo`]), so the fleet's [filter](Fleet::filter) can decide on
/// them; one it keeps out is logged and skipped (and engaged if a later
/// change to the Secret lets it in). Needs `get`, `list` and `watch` on Secrets in the
/// namespace.
///
/// **Trust.** Whoever can create a labelled Secret in the namespace
/// chooses a kubeconfig the manager uses, so only inline credentials are
/// accepted: a kubeconfig with `exec`, `auth-provider`, `tokenFile`, or
/// certificate, key or certificate-authority file paths is refused and
/// logged, unless [`client_options`](Self::client_options) allows external
/// credentials (see [`MemberClientOptions`], and why that is dangerous).
/// The clients made have kube-client's retry off and connect and read
/// timeouts (see [`MemberClientOptions`]).
///
/// ```no_run
/// # async fn demo(client: kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use controller_runtime::cluster::SecretProvider;
/// use controller_runtime::manager::Manager;
/// let mgr = Manager::builder(client.clone())
///     .provider(SecretProvider::new(client, "fleet-system", "fleet.example.com/cluster=true"))
///     .build()
///     .await?;
/// # let _ = mgr;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SecretProvider {
    client: Client,
    namespace: String,
    selector: String,
    data_key: String,
    cluster_name: ClusterName,
    options: MemberClientOptions,
}

impl std::fmt::Debug for SecretProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretProvider")
            .field("namespace", &self.namespace)
            .field("selector", &self.selector)
            .field("data_key", &self.data_key)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl SecretProvider {
    /// Watches the Secrets in `namespace` that match the label selector
    /// `selector` (`key=value,...`), through `client` (the manager's own).
    pub fn new(client: Client, namespace: impl Into<String>, selector: impl Into<String>) -> Self {
        SecretProvider {
            client,
            namespace: namespace.into(),
            selector: selector.into(),
            data_key: KUBECONFIG_KEY.to_string(),
            cluster_name: Arc::new(|secret: &Secret| secret.metadata.name.clone()),
            options: MemberClientOptions::new(),
        }
    }

    /// Reads the kubeconfig from `data.<key>` (default
    /// [`KUBECONFIG_KEY`]). Cluster API writes it under `value`, in a
    /// Secret named `<cluster>-kubeconfig` labelled
    /// `cluster.x-k8s.io/cluster-name=<cluster>`:
    ///
    /// ```no_run
    /// # fn demo(client: kube_client::Client) {
    /// use controller_runtime::cluster::SecretProvider;
    /// const LABEL: &str = "cluster.x-k8s.io/cluster-name";
    /// let capi = SecretProvider::new(client, "clusters", LABEL)
    ///     .data_key("value")
    ///     .cluster_name(|secret| {
    ///         let cluster = secret.metadata.labels.as_ref()?.get(LABEL)?;
    ///         let name = secret.metadata.name.as_deref()?;
    ///         (name == format!("{cluster}-kubeconfig")).then(|| cluster.clone())
    ///     });
    /// # let _ = capi;
    /// # }
    /// ```
    #[must_use]
    pub fn data_key(mut self, key: impl Into<String>) -> Self {
        self.data_key = key.into();
        self
    }

    /// Names each Secret's cluster (default: the Secret's name); a Secret
    /// for which `name` returns `None` is logged and skipped. Two Secrets
    /// naming the same cluster: the second is skipped while the first is
    /// engaged.
    #[must_use]
    pub fn cluster_name(
        mut self,
        name: impl Fn(&Secret) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.cluster_name = Arc::new(name);
        self
    }

    /// How the clusters' clients are made from their kubeconfigs (default
    /// [`MemberClientOptions::new`]: inline credentials only).
    #[must_use]
    pub fn client_options(mut self, options: MemberClientOptions) -> Self {
        self.options = options;
        self
    }

    /// What the provider needs in the manager's own cluster: `get`, `list`
    /// and `watch` on Secrets (render it as a `Role` in the Secrets'
    /// namespace). The member clusters' own rules are the fleet
    /// controllers' (the derive's `fleet_member_rbac()`).
    ///
    /// ```
    /// use controller_runtime::cluster::SecretProvider;
    /// let role = SecretProvider::permissions().role("fleet-hub", "fleet-system");
    /// assert_eq!(role.metadata.namespace.as_deref(), Some("fleet-system"));
    /// assert!(SecretProvider::permissions().allows("", "secrets", "watch"));
    /// ```
    pub fn permissions() -> Permissions {
        Permissions::new().rule("", "secrets", ["get", "list", "watch"])
    }
}

enum Change {
    Upsert(Arc<Secret>),
    Delete(String),
}

struct Forward(mpsc::UnboundedSender<Change>);

impl ResourceEventHandler<Secret> for Forward {
    fn on_add(&self, obj: Arc<Secret>, _: bool) {
        let _ = self.0.send(Change::Upsert(obj));
    }

    fn on_update(&self, _: Arc<Secret>, new: Arc<Secret>) {
        let _ = self.0.send(Change::Upsert(new));
    }

    fn on_delete(&self, obj: ObjectOrTombstone<Secret>) {
        if let Some(name) = obj.object().metadata.name.clone() {
            let _ = self.0.send(Change::Delete(name));
        }
    }
}

impl Provider for SecretProvider {
    fn name(&self) -> String {
        format!("secrets {}/{{{}}}", self.namespace, self.selector)
    }

    async fn run(&self, fleet: Fleet, stop: CancellationToken) -> Result<(), BoxError> {
        let factory = SharedInformerFactory::builder(self.client.clone()).build();
        let informer = factory.namespaced_informer_with::<Secret>(
            &self.namespace,
            InformerOptions::new().label_selector(self.selector.clone()),
        );
        let (tx, mut rx) = mpsc::unbounded_channel();
        let registration = informer.add_event_handler(Forward(tx))?;
        factory.start();
        // By Secret: the cluster engaged and the kubeconfig it was
        // engaged with.
        let mut engaged: HashMap<String, Engaged> = HashMap::new();
        loop {
            let change = tokio::select! {
                () = stop.cancelled() => break,
                change = rx.recv() => match change {
                    Some(change) => change,
                    None => break,
                },
            };
            match change {
                Change::Upsert(secret) => self.apply(&fleet, &mut engaged, &secret).await,
                Change::Delete(name) => {
                    if let Some(gone) = engaged.remove(&name) {
                        fleet.disengage(&gone.cluster).await;
                    }
                }
            }
        }
        drop(registration);
        if tokio::time::timeout(Duration::from_secs(5), factory.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("the cluster Secrets' informer did not stop in time");
        }
        Ok(())
    }
}

/// The cluster a Secret engaged, and with which kubeconfig.
struct Engaged {
    cluster: String,
    kubeconfig: Vec<u8>,
}

impl SecretProvider {
    /// Engages, re-engages or disengages the cluster of `secret` as its
    /// kubeconfig says. Logs name the Secret, the cluster and what is
    /// wrong, never any of the Secret's data.
    async fn apply(&self, fleet: &Fleet, engaged: &mut HashMap<String, Engaged>, secret: &Secret) {
        let Some(name) = secret.metadata.name.clone() else {
            return;
        };
        let wanted = (self.cluster_name)(secret).map(|cluster| {
            let kubeconfig = secret
                .data
                .as_ref()
                .and_then(|d| d.get(&self.data_key))
                .map(|b| b.0.clone());
            (cluster, kubeconfig)
        });
        if let (Some((cluster, Some(kubeconfig))), Some(current)) = (&wanted, engaged.get(&name))
            && current.cluster == *cluster
            && current.kubeconfig == *kubeconfig
        {
            return;
        }
        if let Some(old) = engaged.remove(&name) {
            fleet.disengage(&old.cluster).await;
        }
        let Some((cluster, kubeconfig)) = wanted else {
            tracing::warn!(secret = %name, "cluster Secret names no cluster; skipped");
            return;
        };
        let Some(kubeconfig) = kubeconfig else {
            tracing::warn!(secret = %name, key = %self.data_key, "cluster Secret has no kubeconfig; skipped");
            return;
        };
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        let info = ClusterInfo::new(cluster.clone()).with_labels(labels);
        match self.engage(fleet, info, &kubeconfig).await {
            Ok(()) => {
                engaged.insert(
                    name,
                    Engaged {
                        cluster,
                        kubeconfig,
                    },
                );
            }
            Err(ProviderError::Fleet(FleetError::Filtered(_))) => {
                tracing::info!(secret = %name, %cluster, "cluster Secret skipped: the fleet's filter keeps it out");
            }
            Err(error) => {
                tracing::warn!(secret = %name, %cluster, %error, "cluster Secret skipped");
            }
        }
    }

    async fn engage(
        &self,
        fleet: &Fleet,
        info: ClusterInfo,
        kubeconfig: &[u8],
    ) -> Result<(), ProviderError> {
        let client = self
            .options
            .client_from_yaml(info.name(), kubeconfig)
            .await?;
        fleet.engage_with(info, client)?;
        Ok(())
    }
}
