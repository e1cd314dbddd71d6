//! RBAC enforcement for service-account clients: what a role grants passes,
//! anything else is 403 Forbidden with a real server's Status, and a rule
//! removed from a stored role takes effect on the next request.

use crate::{cm, namespace, status};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube_client::api::{Api, ListParams, PostParams, WatchParams};

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..PolicyRule::default()
    }
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    let mut r = ClusterRole::default();
    r.metadata.name = Some(name.into());
    r.rules = Some(rules);
    r
}

#[tokio::test]
async fn granted_requests_pass_and_others_are_forbidden() {
    let env = envtest::TestEnv::start().await.unwrap();
    let role = cluster_role(
        "cm-editor",
        vec![rule(
            "",
            &["configmaps"],
            &["get", "list", "watch", "create"],
        )],
    );
    let client = env
        .client_with_cluster_role("default", "ctl", &role)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    assert_eq!(
        cms.get("a").await.unwrap().metadata.name.as_deref(),
        Some("a")
    );
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let _events = cms.watch(&WatchParams::default(), "0").await.unwrap();

    // Not granted: delete on configmaps, anything on secrets.
    let s = status(cms.delete("a", &Default::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "configmaps \"a\" is forbidden: User \"system:serviceaccount:default:ctl\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let details = s.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("a", "configmaps")
    );
    let secrets: Api<Secret> = Api::all(client.clone());
    let s = status(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(s.code, 403);
    assert!(
        s.message
            .ends_with("cannot list resource \"secrets\" in API group \"\" at the cluster scope"),
        "{}",
        s.message
    );

    // The admin client is not restricted.
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    admin.delete("a", &Default::default()).await.unwrap();
}

#[tokio::test]
async fn a_rule_removed_from_the_role_is_forbidden_on_the_next_request() {
    let env = envtest::TestEnv::start().await.unwrap();
    let full = cluster_role(
        "cm-rw",
        vec![rule(
            "",
            &["configmaps"],
            &["get", "list", "create", "update"],
        )],
    );
    let client = env
        .client_with_cluster_role("default", "ctl", &full)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    cms.replace("a", &PostParams::default(), &created)
        .await
        .unwrap();

    let reduced = cluster_role(
        "cm-rw",
        vec![rule("", &["configmaps"], &["get", "list", "create"])],
    );
    env.client_with_cluster_role("default", "ctl", &reduced)
        .await
        .unwrap();
    let latest = cms.get("a").await.unwrap();
    let s = status(
        cms.replace("a", &PostParams::default(), &latest)
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert!(
        s.message.contains("cannot update resource \"configmaps\""),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn a_role_grants_only_in_its_namespace() {
    let env = envtest::TestEnv::start().await.unwrap();
    namespace(&env.client(), "team-a").await;
    namespace(&env.client(), "team-b").await;
    let mut role = Role::default();
    role.metadata.name = Some("cm-reader".into());
    role.rules = Some(vec![rule("", &["configmaps"], &["list"])]);
    let client = env.client_with_role("team-a", "ctl", &role).await.unwrap();
    let a: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    a.list(&ListParams::default()).await.unwrap();
    let b: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    let s = status(b.list(&ListParams::default()).await.unwrap_err());
    assert!(
        s.message.ends_with("in the namespace \"team-b\""),
        "{}",
        s.message
    );
    let all: Api<ConfigMap> = Api::all(client);
    assert_eq!(
        status(all.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );
}

#[tokio::test]
async fn an_unbound_account_may_only_read_discovery() {
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env.service_account_client("default", "nobody").unwrap();
    client.apiserver_version().await.unwrap();
    let (code, body) = crate::raw(&client, "GET", "/apis", None, Vec::new()).await;
    assert_eq!(code, 200, "{body}");
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let s = status(cms.get("x").await.unwrap_err());
    assert_eq!(
        s.code, 403,
        "a forbidden get answers 403 even for a missing object"
    );
}
