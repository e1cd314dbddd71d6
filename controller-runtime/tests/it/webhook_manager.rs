//! The manager runs the webhook server: configured on the builder,
//! registered one line per kind, certificates self-managed before it
//! serves, part of `/readyz`, its series in the manager's registry, and
//! envtest's admission calling it.

use std::time::Duration;

use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::webhook::WebhookOptions;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, PostParams};
use serde_json::json;

use crate::eventually;
use crate::fixture::{
    WEBHOOK_SERVICE, create_mutating_config, create_validating_config, create_webhook_namespace,
    spawn_manager, webhook_env,
};
use crate::webhook::{ModeDefaults, rules};

#[tokio::test]
async fn the_manager_serves_registered_webhooks_with_self_managed_certificates() {
    // The port first: envtest's service map needs it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let env = webhook_env(WEBHOOK_SERVICE, addr).await;
    let client = env.client();
    create_webhook_namespace(&client, "team-a").await;
    create_validating_config(&client, "cm-validating").await;
    create_mutating_config(&client, "cm-mutating").await;

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
        Err(ManagerError::Webhook(controller_runtime::webhook::WebhookError::Duplicate(path)))
            if path == "/validate--v1-configmap"
    ));
    assert!(
        !mgr.readyz_checks().run(&[], false).healthy(),
        "not ready before it serves"
    );

    let (stop, running) = spawn_manager(&mgr);
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
