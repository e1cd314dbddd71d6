//! RBAC for a manager confined to two namespaces, enforced on a real
//! server: a controller that reconciles ConfigMaps, owns Secrets and also
//! watches Namespaces (cluster-scoped) runs under exactly what
//! `rbac_for_namespaces` generates — a Role in each namespace and a
//! ClusterRole for the Namespaces — without a single 403, and never acts in
//! a third namespace.

use std::time::Duration;

use controller_runtime::prelude::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};

use crate::{config_map, eventually};

const LIMIT: Duration = Duration::from_secs(15);
const ACCOUNT: &str = "tiered-copier";

/// Keeps a Secret `<name>-copy` of each ConfigMap, with the `tier` label of
/// its Namespace (read from the cache's cluster-wide Namespace informer).
#[derive(Controller)]
#[controller(
    for = ConfigMap,
    owns(Secret),
    watches(Namespace, map = Self::namespace_to_config_map),
    name = "tiered-copier"
)]
struct TieredCopier;

impl TieredCopier {
    fn namespace_to_config_map(ns: &Namespace) -> Vec<Request> {
        vec![Request::new(Some(ns.name_any()), "web")]
    }
}

fn tier(ns: Option<&Namespace>) -> String {
    ns.and_then(|n| n.labels().get("tier").cloned())
        .unwrap_or_default()
}

impl ObjectReconciler<ConfigMap> for TieredCopier {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let namespace = cm.namespace().unwrap_or_default();
        let ns = ctx
            .cache()
            .get::<Namespace>(None, &namespace)
            .await
            .ok()
            .flatten();
        let mut s = Secret::default();
        s.metadata.name = Some(format!("{}-copy", cm.name_any()));
        s.metadata.owner_references = cm.controller_owner_ref(&()).map(|o| vec![o]);
        s.data = Some(
            [(
                "tier".to_owned(),
                k8s_openapi::ByteString(tier(ns.as_deref()).into_bytes()),
            )]
            .into(),
        );
        let secrets = ctx.api_for::<Secret>();
        let name = s.name_any();
        if secrets.get_opt(&name).await?.is_none() {
            secrets.create(&PostParams::default(), &s).await?;
        } else {
            secrets
                .patch(&name, &PatchParams::default(), &Patch::Merge(&s))
                .await?;
        }
        Ok(Action::done())
    }
}

async fn namespace(env: &envtest::TestEnv, name: &str) {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

fn forbidden_requests(env: &envtest::TestEnv) -> Vec<String> {
    env.request_log()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
        .collect()
}

/// The tier the copy of `web` in `ns` carries, once there is one.
async fn copied_tier(env: &envtest::TestEnv, ns: &str) -> Option<String> {
    let secret = Api::<Secret>::namespaced(env.client(), ns)
        .get_opt("web-copy")
        .await
        .unwrap()?;
    let data = secret.data.unwrap_or_default();
    let tier = data.get("tier")?;
    Some(String::from_utf8_lossy(&tier.0).into_owned())
}

#[tokio::test]
async fn a_manager_of_two_namespaces_runs_under_the_generated_roles_and_cluster_role() {
    let env = envtest::TestEnv::start().await.unwrap();
    for ns in ["team-a", "team-b", "team-c"] {
        namespace(&env, ns).await;
    }
    let rbac = TieredCopier::rbac_for_namespaces(["team-a", "team-b"]);
    assert_eq!(rbac.roles.len(), 2);
    let cluster = rbac
        .cluster_role
        .clone()
        .expect("Namespaces are cluster-scoped");
    // Exactly the generated objects, bound to one service account.
    let mut client = env
        .client_with_cluster_role("default", ACCOUNT, &cluster)
        .await
        .unwrap();
    for role in &rbac.roles {
        client = env
            .client_with_role("default", ACCOUNT, role)
            .await
            .unwrap();
    }
    let mgr = Manager::builder(client)
        .namespaces(["team-a", "team-b"])
        .build()
        .await
        .unwrap();
    TieredCopier.setup(&mgr).unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    for ns in ["team-c", "team-a", "team-b"] {
        Api::<ConfigMap>::namespaced(env.client(), ns)
            .create(&PostParams::default(), &config_map(ns, "web"))
            .await
            .unwrap();
    }
    for ns in ["team-a", "team-b"] {
        eventually(LIMIT, &format!("the copy in {ns}"), || async {
            copied_tier(&env, ns).await
        })
        .await;
    }
    // The cluster-wide Namespace watch works: a label on team-b's
    // Namespace reaches the copy in team-b.
    let label = serde_json::json!({ "metadata": { "labels": { "tier": "gold" } } });
    Api::<Namespace>::all(env.client())
        .patch("team-b", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    eventually(LIMIT, "team-b's tier in its copy", || async {
        (copied_tier(&env, "team-b").await.as_deref() == Some("gold")).then_some(())
    })
    .await;
    assert_eq!(
        copied_tier(&env, "team-c").await,
        None,
        "team-c is not watched"
    );

    let forbidden = forbidden_requests(&env);
    assert!(
        forbidden.is_empty(),
        "requests outside the generated RBAC: {forbidden:?}"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_namespace_roles_alone_are_not_enough_for_a_cluster_scoped_watch() {
    // The generated Roles hold no rule on Namespaces (a Role cannot grant
    // one): without the ClusterRole, listing them is forbidden.
    let env = envtest::TestEnv::start().await.unwrap();
    namespace(&env, "team-a").await;
    let role = TieredCopier::rbac_role("team-a");
    let client = env
        .client_with_role("default", ACCOUNT, &role)
        .await
        .unwrap();
    let err = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube_client::Error::Api(s) if s.code == 403),
        "{err:?}"
    );
    let rules = role.rules.unwrap_or_default();
    assert!(
        rules
            .iter()
            .flat_map(|r| r.resources.iter().flatten())
            .all(|r| r != "namespaces"),
        "{rules:?}"
    );
}
