//! The manager runs the webhook server: configured on the builder,
//! registered one line per kind, certificates self-managed before it
//! serves, part of `/readyz`, its series in the manager's registry, and
//! envtest's admission calling it.

use std::time::Duration;

use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::webhook::WebhookOptions;
use envtest::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{Api, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::eventually;
use crate::webhook::{ModeDefaults, rules};
use crate::webhook_certs::{create_namespace, mutating_config, validating_config};

#[tokio::test]
async fn the_manager_serves_registered_webhooks_with_self_managed_certificates() {
    // The port first: envtest's service map needs it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let env = TestEnv::builder()
        .webhook_service("system/webhook-service", addr.to_string())
        .start()
        .await
        .unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": "team-a", "labels": {"webhooks": "on"}}}),
    )
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(
            &PostParams::default(),
            &validating_config("cm-validating", "/validate--v1-configmap"),
        )
        .await
        .unwrap();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(
            &PostParams::default(),
            &mutating_config("cm-mutating", "/mutate--v1-configmap"),
        )
        .await
        .unwrap();

    let mgr = Manager::builder(client.clone())
        .webhook_server(
            WebhookOptions::self_managed("system", "webhook-service")
                .listener(listener)
                .validating_webhook("cm-validating")
                .mutating_webhook("cm-mutating"),
        )
        .build()
        .await
        .unwrap();
    assert_eq!(mgr.webhook_addr(), Some(addr));
    let (validator, _) = rules();
    mgr.webhook::<ConfigMap>()
        .defaulter(ModeDefaults)
        .unwrap()
        .validator(validator)
        .unwrap();
    // The same path twice is refused, and the server keeps what it had.
    let (again, _) = rules();
    assert!(matches!(
        mgr.webhook::<ConfigMap>().validator(again),
        Err(ManagerError::Webhook(_))
    ));
    assert!(
        !mgr.readyz_checks().run(&[], false).healthy(),
        "not ready before it serves"
    );

    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    eventually(
        Duration::from_secs(20),
        "the manager ready, webhook included",
        || {
            let report = mgr.readyz_checks().run(&[], true);
            async move { report.healthy().then_some(()) }
        },
    )
    .await;

    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let cm = |name: &str, data: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
    };
    maps.create(&PostParams::default(), &cm("plain", json!({})))
        .await
        .unwrap();
    assert_eq!(
        maps.get("plain").await.unwrap().data.unwrap()["mode"],
        "fast"
    );
    let err = maps
        .create(&PostParams::default(), &cm("bad", json!({"mode": "turbo"})))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("mode \"turbo\" is not supported"),
        "{err}"
    );

    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_webhook_requests_total{code="200",webhook="/validate--v1-configmap"}"#),
        "{text}"
    );
    // Registering once running is refused.
    assert!(mgr.webhook::<ConfigMap>().defaulter(ModeDefaults).is_err());

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
