//! `Impersonate-User`, as a real API server reads it: the admin acting as a
//! service account gets that account's RBAC (how `TestEnv` mints
//! RBAC-enforced clients on an existing cluster), a service account may not
//! impersonate, and impersonation does not stand in for the bearer token.

use crate::status;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube_client::api::{Api, ListParams};

fn reader() -> ClusterRole {
    let mut role = ClusterRole::default();
    role.metadata.name = Some("cm-reader".into());
    role.rules = Some(vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: vec!["list".into()],
        ..PolicyRule::default()
    }]);
    role
}

/// The admin's client configuration, impersonating `user`.
fn impersonating(env: &envtest::TestEnv, user: &str) -> kube_client::Client {
    let mut config = env.client_config();
    config.auth_info.impersonate = Some(user.into());
    kube_client::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn the_admin_impersonating_a_service_account_gets_its_rbac() {
    let env = envtest::TestEnv::start().await.unwrap();
    let user = "system:serviceaccount:default:ctl";
    let client = impersonating(&env, user);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let s = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert!(
        s.message.contains(&format!("User \"{user}\"")),
        "{}",
        s.message
    );
    // Bound: the list passes, anything else stays forbidden.
    env.client_with_cluster_role("default", "ctl", &reader())
        .await
        .unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let s = status(secrets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(s.code, 403);
}

#[tokio::test]
async fn a_service_account_may_not_impersonate() {
    let env = envtest::TestEnv::start().await.unwrap();
    let token = env.service_account_token("default", "ctl");
    let mut config = env.client_config();
    config.auth_info = serde_json::from_value(serde_json::json!({
        "token": token, "as": "system:serviceaccount:kube-system:admin"
    }))
    .unwrap();
    let cms: Api<ConfigMap> =
        Api::namespaced(kube_client::Client::try_from(config).unwrap(), "default");
    let s = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "users \"system:serviceaccount:kube-system:admin\" is forbidden: User \
         \"system:serviceaccount:default:ctl\" cannot impersonate resource \"users\" in API \
         group \"\" at the cluster scope"
    );
}

#[tokio::test]
async fn impersonation_does_not_replace_the_bearer_token() {
    let env = envtest::TestEnv::builder()
        .bearer_token("s3cret")
        .start()
        .await
        .unwrap();
    let mut config = env.client_config();
    config.auth_info = serde_json::from_value(serde_json::json!({
        "as": "system:serviceaccount:default:ctl"
    }))
    .unwrap();
    let cms: Api<ConfigMap> =
        Api::namespaced(kube_client::Client::try_from(config).unwrap(), "default");
    let s = status(cms.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(s.code, 401);
}
