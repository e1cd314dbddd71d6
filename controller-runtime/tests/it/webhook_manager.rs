//! The manager runs the webhook server: configured on the builder,
//! registered one line per kind, certificates self-managed before it
//! serves, part of `/readyz`, its series in the manager's registry, and
//! envtest's admission calling it; a declared webhook without a handler
//! stops it at start; a certificate renewal, forced or by the check on an
//! injected clock, is served by every replica within seconds.

use std::net::SocketAddr;
use std::time::Duration;

use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::webhook::{
    WebhookDeclaration, WebhookError, WebhookManifests, WebhookOptions,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_client::api::{Api, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::eventually;
use crate::fixture::{
    WEBHOOK_SERVICE, create_mutating_config, create_validating_config, create_webhook_namespace,
    spawn_manager, stop_manager, webhook_env,
};
use crate::webhook::{ModeDefaults, rules};
use crate::webhook_certs::ManualClock;
use crate::webhook_client::TlsClient;
use crate::webhook_conversion::v1::Gizmo;

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

#[tokio::test]
async fn a_declared_webhook_without_a_handler_stops_the_manager_at_start_naming_its_path() {
    let env = envtest::TestEnv::start().await.unwrap();
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let hooks = WebhookManifests::for_kind::<ConfigMap>(
        "system",
        WebhookDeclaration::new().validating().defaulting(),
    )
    .merge(WebhookManifests::for_kind::<Gizmo>(
        "system",
        WebhookDeclaration::new().conversion(),
    ))
    .unwrap();
    let mgr = Manager::builder(env.client())
        .webhook_server(hooks.options().bind(loopback))
        .build()
        .await
        .unwrap();
    // The validator only: no defaulter, no conversion.
    let (validator, _) = rules();
    mgr.webhook::<ConfigMap>().validator(validator).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(20), mgr.run(CancellationToken::new()))
        .await
        .expect("refused at once")
        .unwrap_err();
    let ManagerError::Webhook(WebhookError::MissingHandlers(missing)) = err else {
        panic!("{err:?}")
    };
    let message = missing.join("; ");
    assert!(
        message.contains(
            "/mutate--v1-configmap (the defaulter of v1 ConfigMap) is declared but has no handler"
        ),
        "{message}"
    );
    assert!(
        message.contains("/convert for convert.example.com/Gizmo"),
        "{message}"
    );
    assert!(!message.contains("/validate-"), "{message}");
}

/// A replica with self-managed certificates for `localhost`, its checks
/// every `interval` on `clock`, serving on a free loopback port.
async fn replica(
    client: &kube_client::Client,
    interval: Duration,
    clock: ManualClock,
) -> (Manager, SocketAddr) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mgr = Manager::builder(client.clone())
        .webhook_server(
            WebhookOptions::self_managed("system", WEBHOOK_SERVICE)
                .extra_name("localhost")
                .listener(listener)
                .validity(Duration::from_secs(3600))
                .check_interval(interval)
                .clock(clock),
        )
        .build()
        .await
        .unwrap();
    (mgr, addr)
}

/// The certificate Secret's CA and serving certificate (DER).
async fn secret_pair(client: &kube_client::Client) -> Option<(String, Vec<u8>)> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let secret = Api::<Secret>::namespaced(client.clone(), "system")
        .get_opt(&format!("{WEBHOOK_SERVICE}-cert"))
        .await
        .ok()??;
    let data = secret.data?;
    let ca = String::from_utf8(data.get("ca.crt")?.0.clone()).ok()?;
    let leaf = CertificateDer::from_pem_slice(&data.get("tls.crt")?.0).ok()?;
    Some((ca, leaf.to_vec()))
}

/// Waits until the replica at `addr` serves the Secret's certificate,
/// which must not be `old`; returns it.
async fn serves_the_secret(client: &kube_client::Client, addr: SocketAddr, old: &[u8]) -> Vec<u8> {
    // Seconds, not the hour of the interval check.
    eventually(
        Duration::from_secs(10),
        "the replica serving the Secret's pair",
        || async {
            let (ca, leaf) = secret_pair(client).await?;
            let served = TlsClient::new(addr, &ca).peer_leaf().await.ok()?;
            (served == leaf && leaf != old).then_some(leaf)
        },
    )
    .await
}

#[tokio::test]
async fn certificate_rotation_is_reachable_on_running_replicas_and_seen_by_the_other_in_seconds() {
    let env = envtest::TestEnv::start().await.unwrap();
    let client = env.client();
    crate::fixture::create_namespace(&client, "system").await;
    let hour = Duration::from_secs(3600);
    let clock = ManualClock::new();
    // `a` checks often on a clock the test moves; `b` hourly.
    let (a, a_addr) = replica(&client, Duration::from_millis(200), clock.clone()).await;
    let (b, b_addr) = replica(&client, hour, ManualClock::new()).await;
    let (stop_a, run_a) = spawn_manager(&a);
    let first = serves_the_secret(&client, a_addr, &[]).await;
    let (stop_b, run_b) = spawn_manager(&b);
    assert_eq!(serves_the_secret(&client, b_addr, &[]).await, first);

    // A forced renewal on `a`: `b` serves the new pair within seconds.
    a.renew_webhook_certificate().await.unwrap();
    let forced = serves_the_secret(&client, b_addr, &first).await;
    assert_eq!(serves_the_secret(&client, a_addr, &first).await, forced);

    // `a`'s clock 45 minutes on, less than a third of the hour left: its
    // next check renews, and `b` follows by the watch.
    clock.advance(Duration::from_secs(45 * 60));
    let renewed = serves_the_secret(&client, b_addr, &forced).await;
    assert_eq!(serves_the_secret(&client, a_addr, &forced).await, renewed);

    stop_manager(stop_a, run_a).await;
    stop_manager(stop_b, run_b).await;
}
