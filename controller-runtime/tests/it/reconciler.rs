//! `#[derive(Controller)]` end to end: the generated setup, finalizer flow
//! and RBAC role, with the controller running as a service account bound to
//! exactly that role (RBAC enforced by envtest).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_runtime::prelude::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::fixture::{assert_nothing_forbidden, copy_into_secret, spawn_manager};
use crate::{config_map, eventually};

const FINALIZER: &str = "test.example.com/cleanup";

/// Keeps a Secret `<name>-copy` with each ConfigMap's data, owned by it.
#[derive(Controller)]
#[controller(for = ConfigMap, owns(Secret), finalizer = "test.example.com/cleanup", max_concurrent = 2, name = "cm-to-secret")]
struct Copier {
    cleanups: Arc<AtomicUsize>,
}

impl ObjectReconciler<ConfigMap> for Copier {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        copy_into_secret(&cm, ctx).await
    }
}

impl Cleanup<ConfigMap> for Copier {
    async fn cleanup(
        &self,
        _cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.cleanups.fetch_add(1, Ordering::SeqCst);
        Ok(Action::done())
    }
}

#[tokio::test]
async fn the_derived_controller_runs_under_its_generated_role() {
    let env = envtest::TestEnv::start().await.unwrap();
    let role = Copier::rbac();
    assert_eq!(role.metadata.name.as_deref(), Some("cm-to-secret"));
    let client = env
        .client_with_cluster_role("default", "copier", &role)
        .await
        .unwrap();
    let mgr = Manager::builder(client).build().await.unwrap();
    let cleanups = Arc::new(AtomicUsize::new(0));
    Copier {
        cleanups: cleanups.clone(),
    }
    .setup(&mgr)
    .unwrap();
    let (stop, run) = spawn_manager(&mgr);

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    cms.create(&PostParams::default(), &config_map("default", "web"))
        .await
        .unwrap();
    let limit = Duration::from_secs(10);
    eventually(limit, "the owned secret", || async {
        secrets.get_opt("web-copy").await.unwrap()
    })
    .await;
    let cm = cms.get("web").await.unwrap();
    assert_eq!(
        cm.metadata.finalizers.as_deref(),
        Some(&[FINALIZER.to_string()][..])
    );

    cms.delete("web", &DeleteParams::default()).await.unwrap();
    eventually(limit, "the ConfigMap gone after cleanup", || async {
        cms.get_opt("web").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(cleanups.load(Ordering::SeqCst), 1);
    assert_nothing_forbidden(&env, "the generated role");
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn without_the_owned_kind_rule_the_controller_is_forbidden() {
    let env = envtest::TestEnv::start().await.unwrap();
    let mut role = Copier::rbac();
    role.rules
        .as_mut()
        .unwrap()
        .retain(|r| !r.resources.iter().flatten().any(|x| x == "secrets"));
    let client = env
        .client_with_cluster_role("default", "copier", &role)
        .await
        .unwrap();
    let mgr = Manager::builder(client).build().await.unwrap();
    Copier {
        cleanups: Arc::default(),
    }
    .setup(&mgr)
    .unwrap();
    let (stop, run) = spawn_manager(&mgr);
    eventually(
        Duration::from_secs(10),
        "a 403 on the secrets watch",
        || async {
            env.request_log()
                .into_iter()
                .find(|r| r.status == 403 && r.path.ends_with("/secrets"))
        },
    )
    .await;
    stop.cancel();
    let _ = run.await;
}
