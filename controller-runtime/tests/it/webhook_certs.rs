//! Self-managed webhook certificates against envtest: a fresh replica
//! creates the Secret and writes the CA into every `caBundle`, a second
//! replica (or one racing the first) serves the same pair, and a rotation
//! swaps the serving certificate while a client keeps succeeding.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use controller_runtime::webhook::{CertResolver, Clock, SecretCerts, validate_path};
use envtest::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use parking_lot::Mutex;
use serde_json::json;

use crate::eventually;
use crate::webhook_client::start_with;

/// A wall clock the test moves by hand.
#[derive(Clone)]
pub struct ManualClock(Arc<Mutex<SystemTime>>);

impl ManualClock {
    pub fn new() -> Self {
        ManualClock(Arc::new(Mutex::new(SystemTime::now())))
    }
    pub fn advance(&self, by: Duration) {
        *self.0.lock() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.0.lock()
    }
}

pub async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// A webhook `clientConfig` naming the Service `system/webhook-service`.
fn client_config(path: &str) -> serde_json::Value {
    json!({"service": {"namespace": "system", "name": "webhook-service", "path": path, "port": 443}})
}

pub fn validating_config(name: &str, path: &str) -> ValidatingWebhookConfiguration {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "vconfigmap.example.com",
            "clientConfig": client_config(path),
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap()
}

pub fn mutating_config(name: &str, path: &str) -> MutatingWebhookConfiguration {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "webhooks": [{
            "name": "mconfigmap.example.com",
            "clientConfig": client_config(path),
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .unwrap()
}

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

fn certs(client: &Client, resolver: &CertResolver) -> SecretCerts {
    SecretCerts::new(
        client.clone(),
        "system",
        "webhook-service",
        resolver.clone(),
    )
    .extra_name("localhost")
    .validating_webhook("gizmo-validating")
    .mutating_webhook("gizmo-mutating")
    .crd("gizmos.convert.example.com")
}

#[tokio::test]
async fn a_fresh_replica_creates_the_secret_and_fills_every_ca_bundle_a_second_reuses_it() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    let path = validate_path::<ConfigMap>();
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(
            &PostParams::default(),
            &validating_config("gizmo-validating", &path),
        )
        .await
        .unwrap();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(
            &PostParams::default(),
            &mutating_config("gizmo-mutating", "/mutate--v1-configmap"),
        )
        .await
        .unwrap();

    let first = CertResolver::new();
    let pair = certs(&client, &first).ensure().await.unwrap();
    assert!(first.is_loaded());

    let secret = Api::<Secret>::namespaced(client.clone(), "system")
        .get("webhook-service-cert")
        .await
        .unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.unwrap();
    assert_eq!(data["ca.crt"].0, pair.ca_pem().as_bytes());
    assert_eq!(data["tls.crt"].0, pair.cert_pem().as_bytes());
    let ca = Some(k8s_openapi::ByteString(pair.ca_pem().as_bytes().to_vec()));
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get("gizmo-validating")
        .await
        .unwrap();
    assert_eq!(v.webhooks.unwrap()[0].client_config.ca_bundle, ca);
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get("gizmo-mutating")
        .await
        .unwrap();
    assert_eq!(m.webhooks.unwrap()[0].client_config.ca_bundle, ca);

    // A second replica serves the same pair and writes nothing.
    let rv = secret.metadata.resource_version;
    let second = CertResolver::new();
    let again = certs(&client, &second).ensure().await.unwrap();
    assert_eq!(again.cert_pem(), pair.cert_pem());
    assert_eq!(second.current_leaf(), first.current_leaf());
    let secret = Api::<Secret>::namespaced(client.clone(), "system")
        .get("webhook-service-cert")
        .await
        .unwrap();
    assert_eq!(secret.metadata.resource_version, rv);
}

/// The CRD on its own: envtest refuses (409, every time) updates of a CRD
/// while admission webhook configurations exist, which a cluster does not.
#[tokio::test]
async fn the_ca_is_written_into_the_conversion_webhook_of_a_crd() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.create(&PostParams::default(), &converted_crd())
        .await
        .unwrap();
    let pair = certs(&client, &CertResolver::new()).ensure().await.unwrap();
    let crd = crds.get("gizmos.convert.example.com").await.unwrap();
    let bundle = crd
        .spec
        .conversion
        .unwrap()
        .webhook
        .unwrap()
        .client_config
        .unwrap()
        .ca_bundle;
    assert_eq!(bundle.unwrap().0, pair.ca_pem().as_bytes());
}

#[tokio::test]
async fn replicas_racing_to_create_the_secret_end_up_serving_one_pair() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    let resolvers: Vec<CertResolver> = (0..4).map(|_| CertResolver::new()).collect();
    let all = futures::future::join_all(resolvers.iter().map(|r| {
        let c = certs(&client, r);
        async move { c.ensure().await.unwrap() }
    }))
    .await;
    for pair in &all {
        assert_eq!(pair.cert_pem(), all[0].cert_pem());
    }
    for r in &resolvers {
        assert_eq!(r.current_leaf(), resolvers[0].current_leaf());
    }
}

#[tokio::test]
async fn rotation_swaps_the_serving_certificate_while_a_client_keeps_succeeding() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    let clock = ManualClock::new();
    let resolver = CertResolver::new();
    let keeper = certs(&client, &resolver)
        .validity(Duration::from_secs(3600))
        .check_interval(Duration::from_millis(50))
        .clock(clock.clone());
    let pair = keeper.ensure().await.unwrap();
    let (v, _) = crate::webhook::rules();
    let run = start_with(resolver.clone(), pair.ca_pem(), |s| {
        s.validator::<ConfigMap, _>(v).unwrap()
    })
    .await;
    let stop = run.stop.clone();
    tokio::spawn(keeper.run(stop.clone()));

    // A client reviewing in a loop, each review on a new connection.
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(Vec::<String>::new()));
    let hammer = {
        let (client, ok, failed, stop) =
            (run.client.clone(), ok.clone(), failed.clone(), stop.clone());
        let body = crate::webhook::review(
            "CREATE",
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})),
            None,
            false,
        );
        let path = validate_path::<ConfigMap>();
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                match client
                    .post(
                        &path,
                        "application/json",
                        serde_json::to_vec(&body).unwrap(),
                    )
                    .await
                {
                    Ok((200, _)) => {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok((status, body)) => failed.lock().push(format!("{status}: {body:?}")),
                    Err(e) if stop.is_cancelled() => drop(e),
                    Err(e) => failed.lock().push(e),
                }
            }
        })
    };
    let first_leaf = resolver.current_leaf().unwrap();
    eventually(
        Duration::from_secs(10),
        "reviews before the rotation",
        || {
            let n = ok.load(Ordering::SeqCst);
            async move { (n >= 5).then_some(()) }
        },
    )
    .await;
    // 45 minutes on: less than a third of the hour is left.
    clock.advance(Duration::from_secs(45 * 60));
    eventually(
        Duration::from_secs(10),
        "the rotated certificate served",
        || {
            let (c, first) = (run.client.clone(), first_leaf.clone());
            async move {
                c.peer_leaf()
                    .await
                    .ok()
                    .filter(|leaf| leaf[..] != first[..])
                    .map(drop)
            }
        },
    )
    .await;
    let after = ok.load(Ordering::SeqCst);
    eventually(
        Duration::from_secs(10),
        "reviews after the rotation",
        || {
            let n = ok.load(Ordering::SeqCst);
            async move { (n >= after + 5).then_some(()) }
        },
    )
    .await;
    stop.cancel();
    hammer.await.unwrap();
    assert_eq!(
        failed.lock().clone(),
        Vec::<String>::new(),
        "no review may fail across the rotation"
    );
    // The CA stayed: the Secret and the old trust still agree.
    let secret = Api::<Secret>::namespaced(client, "system")
        .get("webhook-service-cert")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["ca.crt"].0, pair.ca_pem().as_bytes());
}
