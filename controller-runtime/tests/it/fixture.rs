//! Setup shared by the tests against envtest: a manager run in the
//! background, namespaces, no request refused by RBAC, the copier
//! controllers' reconcile; and the webhook side: envtest calling the test
//! Service `system/webhook-service` on a local port, the ConfigMap webhook
//! configurations naming that Service, and the Gizmo CRD converted through
//! it.

use std::net::SocketAddr;
use std::time::Duration;

use controller_runtime::prelude::*;
use controller_runtime::webhook::{mutate_path, validate_path};
use envtest::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;
use tokio::task::JoinHandle;

/// The test webhook Service in `system`, which every webhook configuration
/// here names.
pub const WEBHOOK_SERVICE: &str = "webhook-service";

/// Runs `mgr` in the background until the returned token is cancelled.
pub fn spawn_manager(mgr: &Manager) -> (CancellationToken, JoinHandle<Result<(), ManagerError>>) {
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    (stop, task)
}

/// Stops a manager from [`spawn_manager`]; it must end cleanly within 30 s.
pub async fn stop_manager(stop: CancellationToken, task: JoinHandle<Result<(), ManagerError>>) {
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("manager stopped in time")
        .unwrap()
        .unwrap();
}

/// Creates the namespace `name`.
pub async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Creates the namespace `name` labelled `webhooks: on`, which the webhook
/// configurations here select.
pub async fn create_webhook_namespace(client: &Client, name: &str) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"webhooks": "on"}}}))
            .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Asserts that envtest refused no request with 403 so far: the clients
/// stayed within `rules` (what the message calls the rules they run under).
pub fn assert_nothing_forbidden(env: &TestEnv, rules: &str) {
    let forbidden: Vec<String> = env
        .request_log()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
        .collect();
    assert!(
        forbidden.is_empty(),
        "requests outside {rules}: {forbidden:?}"
    );
}

/// The copier controllers' reconcile: keeps a Secret `<name>-copy` with the
/// ConfigMap's data, owned by it.
pub async fn copy_into_secret(
    cm: &ConfigMap,
    ctx: &ObjectContext<ConfigMap>,
) -> Result<Action, kube_client::Error> {
    let name = format!("{}-copy", cm.name_any());
    let secrets = ctx.api_for::<Secret>();
    if secrets.get_opt(&name).await?.is_none() {
        let mut s = Secret::default();
        s.metadata.name = Some(name);
        s.metadata.owner_references = cm.controller_owner_ref(&()).map(|o| vec![o]);
        s.string_data = cm.data.clone();
        secrets.create(&PostParams::default(), &s).await?;
    }
    Ok(Action::done())
}

/// A started envtest that sends what it calls at the Service
/// `system/<service>` to `addr`, with the namespace `system` created.
pub async fn webhook_env(service: &str, addr: SocketAddr) -> TestEnv {
    let env = TestEnv::builder()
        .webhook_service(format!("system/{service}"), addr.to_string())
        .start()
        .await
        .unwrap();
    create_namespace(&env.client(), "system").await;
    env
}

/// A webhook `clientConfig` naming the Service `system/webhook-service`.
fn client_config(path: &str) -> serde_json::Value {
    json!({"service": {"namespace": "system", "name": WEBHOOK_SERVICE, "path": path, "port": 443}})
}

/// One webhook `name`: ConfigMap creates and updates in the namespaces
/// labelled `webhooks: on`, sent to `path`, failing closed.
fn configmap_webhook(name: &str, path: &str) -> serde_json::Value {
    json!({
        "name": name,
        "clientConfig": client_config(path),
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
        "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

/// Creates the ValidatingWebhookConfiguration `name`, sending ConfigMaps to
/// their validator's path.
pub async fn create_validating_config(client: &Client, name: &str) {
    let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [configmap_webhook("vconfigmap.example.com", &validate_path::<ConfigMap>())],
    }))
    .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
}

/// Creates the MutatingWebhookConfiguration `name`, sending ConfigMaps to
/// their defaulter's path.
pub async fn create_mutating_config(client: &Client, name: &str) {
    let config: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [configmap_webhook("mconfigmap.example.com", &mutate_path::<ConfigMap>())],
    }))
    .unwrap();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
}

/// The Gizmo CRD (`gizmos.convert.example.com`, v1alpha1 and v1), converted
/// by the webhook at `/convert` on the test Service.
pub fn converted_crd() -> CustomResourceDefinition {
    use crate::webhook_conversion::{v1, v1alpha1};
    let mut crd = controller_runtime::crd::merge_versions(vec![
        v1alpha1::Gizmo::crd().unwrap(),
        v1::Gizmo::crd().unwrap(),
    ])
    .unwrap();
    crd.spec.conversion = Some(
        serde_json::from_value(json!({
            "strategy": "Webhook",
            "webhook": {"clientConfig": client_config("/convert"), "conversionReviewVersions": ["v1"]},
        }))
        .unwrap(),
    );
    crd
}
