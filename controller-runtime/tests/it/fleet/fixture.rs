//! Set-up shared by the fleet tests: a hub and a member envtest server, a
//! manager on the hub with the fleet's [`fast_backoff`], a fleet controller
//! of ConfigMaps, the reconcilers several tests run (one that does
//! nothing, one that notes what it reconciled), and what they read of a
//! member (ConfigMaps made in it, its `/version` looks).

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_runtime::controller::FleetController;
use controller_runtime::manager::{Manager, ManagerBuilder};
use controller_runtime::prelude::*;
use controller_runtime::reconcile::IntoReconciler;
use envtest::TestEnv;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_client::api::PostParams;
use parking_lot::Mutex;

use super::fast_backoff;

/// `N` API servers, each in this process (the first is usually the
/// hub, the others members).
pub async fn servers<const N: usize>() -> [TestEnv; N] {
    let mut envs = Vec::with_capacity(N);
    for _ in 0..N {
        envs.push(TestEnv::start().await.unwrap());
    }
    match envs.try_into() {
        Ok(envs) => envs,
        Err(_) => unreachable!("{N} servers started"),
    }
}

/// A hub and a member API server, each in this process.
pub async fn hub_and_member() -> (TestEnv, TestEnv) {
    let [own, member] = servers().await;
    (own, member)
}

/// A hub, a member and a manager on the hub whose fleet retries and looks
/// fast; `None` on an existing cluster (the test is skipped: it needs
/// several in-process API servers).
pub async fn hub_member_manager() -> Option<(TestEnv, TestEnv, Manager)> {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return None;
    }
    let (own, member) = hub_and_member().await;
    let mgr = fleet_manager(&own).await;
    Some((own, member, mgr))
}

/// A manager builder on `own` whose fleet retries and looks fast.
pub fn fleet_manager_builder(own: &TestEnv) -> ManagerBuilder {
    Manager::builder(own.client()).fleet_backoff(fast_backoff())
}

/// A manager on `own` whose fleet retries and looks fast.
pub async fn fleet_manager(own: &TestEnv) -> Manager {
    fleet_manager_builder(own).build().await.unwrap()
}

/// Registers the fleet controller `name` of ConfigMaps, reconciled by
/// `reconciler`.
pub fn configmap_controller<R, M>(mgr: &Manager, name: &str, reconciler: R) -> FleetController
where
    R: Send + Sync + 'static,
    Arc<R>: IntoReconciler<ConfigMap, M>,
    M: 'static,
{
    mgr.fleet_controller::<ConfigMap>()
        .named(name)
        .complete(reconciler)
        .unwrap()
}

/// Reconciles nothing.
pub struct Nothing;

impl ObjectReconciler<ConfigMap> for Nothing {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        _: Arc<ConfigMap>,
        _: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

/// Notes what it reconciled: each ConfigMap's name, after `prefix` (a
/// replica's, say).
#[derive(Default)]
pub struct Seen {
    prefix: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Seen {
    /// A reconciler noting `prefix` and the name into the same list as
    /// this one.
    pub fn as_replica(&self, prefix: &str) -> Seen {
        Seen {
            prefix: prefix.to_string(),
            seen: Arc::clone(&self.seen),
        }
    }

    /// Whether `name` (after its prefix, if any) was reconciled.
    pub fn has(&self, name: &str) -> bool {
        self.seen.lock().iter().any(|n| n == name)
    }

    /// How many reconciles were noted under names starting with `prefix`.
    pub fn count(&self, prefix: &str) -> usize {
        self.seen
            .lock()
            .iter()
            .filter(|n| n.starts_with(prefix))
            .count()
    }
}

impl ObjectReconciler<ConfigMap> for Seen {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let name = format!("{}{}", self.prefix, cm.name_any());
        self.seen.lock().push(name);
        Ok(Action::done())
    }
}

/// Creates the ConfigMap `name` in `env`'s `default` namespace.
pub async fn create(env: &TestEnv, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &crate::config_map("default", name))
        .await
        .unwrap();
}

/// The Secret `name` labelled `labels` holding `kubeconfig` under `key`,
/// as a `SecretProvider` reads it.
pub fn kubeconfig_secret(
    name: &str,
    labels: &[(&str, &str)],
    key: &str,
    kubeconfig: &str,
) -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.into());
    secret.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    secret.data = Some(BTreeMap::from([(
        key.into(),
        ByteString(kubeconfig.as_bytes().to_vec()),
    )]));
    secret
}

/// How often the fleet asked `member` for its version (its looks).
pub fn version_looks(member: &TestEnv) -> usize {
    member
        .request_log()
        .iter()
        .filter(|r| r.path.starts_with("/version"))
        .count()
}
