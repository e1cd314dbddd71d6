//! The provider of clusters whose kubeconfigs are Secrets of the manager's
//! own cluster: a labelled Secret added engages a cluster, one deleted
//! disengages it, one whose kubeconfig changed re-engages it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::handler::ResourceEventHandler;
use informer_core::key::ObjectOrTombstone;
use k8s_openapi::api::core::v1::Secret;
use kube_client::Client;
use kube_client::config::{Kubeconfig, KubeconfigError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fleet::Fleet;
use super::provider::{Provider, ProviderError, client_from_kubeconfig};
use crate::error::BoxError;
use crate::rbac::Permissions;

/// The key of a cluster Secret's kubeconfig (`data.kubeconfig`).
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// Engages a cluster for each Secret in one namespace of the manager's own
/// cluster that carries a label selector's labels: the cluster is named as
/// the Secret, reached through the kubeconfig in its `data.kubeconfig`
/// ([`KUBECONFIG_KEY`], current context). The Secrets are watched: a
/// Secret added engages its cluster, a Secret deleted (or unlabelled)
/// disengages it and stops its informers, a changed kubeconfig re-engages
/// it. A Secret without a usable kubeconfig is logged and skipped; the
/// others are unaffected. Needs `get`, `list` and `watch` on Secrets in the
/// namespace.
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
}

impl std::fmt::Debug for SecretProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretProvider")
            .field("namespace", &self.namespace)
            .field("selector", &self.selector)
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
        }
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

    fn run(
        self: Arc<Self>,
        fleet: Fleet,
        stop: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            let factory = SharedInformerFactory::builder(self.client.clone()).build();
            let informer = factory.namespaced_informer_with::<Secret>(
                &self.namespace,
                InformerOptions::new().label_selector(self.selector.clone()),
            );
            let (tx, mut rx) = mpsc::unbounded_channel();
            let registration = informer.add_event_handler(Forward(tx))?;
            factory.start();
            // The kubeconfig each engaged cluster was engaged with.
            let mut engaged: HashMap<String, Vec<u8>> = HashMap::new();
            loop {
                let change = tokio::select! {
                    () = stop.cancelled() => break,
                    change = rx.recv() => match change {
                        Some(change) => change,
                        None => break,
                    },
                };
                match change {
                    Change::Upsert(secret) => apply(&fleet, &mut engaged, &secret).await,
                    Change::Delete(name) => {
                        if engaged.remove(&name).is_some() {
                            fleet.disengage(&name).await;
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
        })
    }
}

/// Engages, re-engages or disengages the cluster of `secret` as its
/// kubeconfig says.
async fn apply(fleet: &Fleet, engaged: &mut HashMap<String, Vec<u8>>, secret: &Secret) {
    let Some(name) = secret.metadata.name.clone() else {
        return;
    };
    let kubeconfig = secret
        .data
        .as_ref()
        .and_then(|d| d.get(KUBECONFIG_KEY))
        .map(|b| b.0.clone());
    if kubeconfig.is_some() && engaged.get(&name) == kubeconfig.as_ref() {
        return;
    }
    if engaged.remove(&name).is_some() {
        fleet.disengage(&name).await;
    }
    let Some(bytes) = kubeconfig else {
        tracing::warn!(secret = %name, key = KUBECONFIG_KEY, "cluster Secret has no kubeconfig; skipped");
        return;
    };
    match engage(fleet, &name, &bytes).await {
        Ok(()) => {
            engaged.insert(name, bytes);
        }
        Err(error) => tracing::warn!(secret = %name, %error, "cluster Secret skipped"),
    }
}

async fn engage(fleet: &Fleet, name: &str, kubeconfig: &[u8]) -> Result<(), ProviderError> {
    let text = String::from_utf8_lossy(kubeconfig);
    let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|source: KubeconfigError| {
        ProviderError::Kubeconfig {
            cluster: name.to_string(),
            source,
        }
    })?;
    let client = client_from_kubeconfig(name, kubeconfig).await?;
    fleet.engage(name, client)?;
    Ok(())
}
