//! Self-managed webhook certificates against envtest: a fresh replica
//! creates the Secret and writes the CA into every `caBundle`, a second
//! replica (or one racing the first) serves the same pair, a renewal swaps
//! the serving certificate while a client keeps succeeding, and a CA
//! rotation (`webhook_ca_rotation`) keeps every review succeeding.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use controller_runtime::tls::{CertResolver, Clock, SecretCerts};
use controller_runtime::webhook::validate_path;
use envtest::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use parking_lot::Mutex;
use serde_json::json;

use rustls::pki_types::pem::PemObject;

use crate::eventually;
use crate::fixture::{
    WEBHOOK_SERVICE, converted_crd, create_mutating_config, create_namespace,
    create_validating_config, create_webhook_namespace, webhook_env,
};
use crate::webhook_client::{TlsClient, serve_loopback, start_with};

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

/// Certificates for the test Service, also valid for `localhost`, their CA
/// written into `gizmo-validating`.
fn validating_certs(client: &Client, resolver: &CertResolver) -> SecretCerts {
    SecretCerts::new(client.clone(), "system", WEBHOOK_SERVICE, resolver.clone())
        .extra_name("localhost")
        .validating_webhook("gizmo-validating")
}

/// [`validating_certs`] whose CA also goes into `gizmo-mutating` and the
/// Gizmo CRD.
fn certs(client: &Client, resolver: &CertResolver) -> SecretCerts {
    validating_certs(client, resolver)
        .mutating_webhook("gizmo-mutating")
        .crd("gizmos.convert.example.com")
}

#[tokio::test]
async fn a_fresh_replica_creates_the_secret_and_fills_every_ca_bundle_a_second_reuses_it() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    create_validating_config(&client, "gizmo-validating").await;
    create_mutating_config(&client, "gizmo-mutating").await;

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

/// Removing the documented `ca-not-after` annotation forces a CA rotation
/// at the next check, also on a Secret that the previous release wrote
/// (its annotations twice, the second time under `webhook.informer-rs.dev/`):
/// the old domain's keys are neither read nor written any more.
#[tokio::test]
async fn removing_the_ca_expiry_annotation_forces_a_ca_rotation() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    create_validating_config(&client, "gizmo-validating").await;
    let certs = validating_certs(&client, &CertResolver::new());
    let pair = certs.ensure().await.unwrap();
    let secrets = Api::<Secret>::namespaced(client.clone(), "system");
    let secret = secrets.get("webhook-service-cert").await.unwrap();
    let annotations = secret.metadata.annotations.unwrap_or_default();
    // What the previous release wrote beside the documented keys.
    let legacy: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| (k.replace(".io/", ".dev/"), json!(v)))
        .collect();
    let mut patch = json!({ "metadata": { "annotations": legacy } });
    patch["metadata"]["annotations"]["webhook.informer-rs.io/ca-not-after"] = json!(null);
    secrets
        .patch(
            "webhook-service-cert",
            &kube_client::api::PatchParams::default(),
            &kube_client::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();

    let after = certs.ensure().await.unwrap();
    let secret = secrets.get("webhook-service-cert").await.unwrap();
    let data = secret.data.unwrap_or_default();
    assert!(
        data.contains_key("ca-next.crt"),
        "no next CA published: {:?}",
        data.keys()
    );
    let annotations = secret.metadata.annotations.unwrap_or_default();
    let rotation = annotations.get("webhook.informer-rs.io/ca-rotation");
    assert!(
        rotation.is_some_and(|r| r.starts_with("published:")),
        "{annotations:?}"
    );
    assert!(
        annotations.keys().all(|k| !k.contains("informer-rs.dev/")),
        "{annotations:?}"
    );
    // The serving certificate stays until the next CA has been published
    // for the overlap.
    assert_eq!(after.cert_pem(), pair.cert_pem());
}

/// With the admission webhook configurations there too: the merge patch of
/// the CRD is written at once, no retry needed.
#[tokio::test]
async fn the_ca_is_written_into_the_conversion_webhook_of_a_crd() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "system").await;
    create_validating_config(&client, "gizmo-validating").await;
    create_mutating_config(&client, "gizmo-mutating").await;
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
    let patches = env
        .request_log()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("customresourcedefinitions"))
        .map(|r| r.status)
        .collect::<Vec<_>>();
    assert_eq!(patches, [200], "one patch, accepted");
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

/// The `caBundle` of the test's ValidatingWebhookConfiguration, PEM.
async fn published_bundle(client: &Client) -> String {
    let config = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get("gizmo-validating")
        .await
        .unwrap();
    let bundle = config.webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap();
    String::from_utf8(bundle.0).unwrap()
}

/// A webhook server on a free loopback port serving `resolver`'s pair.
async fn serve(
    resolver: CertResolver,
    stop: &tokio_util::sync::CancellationToken,
) -> std::net::SocketAddr {
    let (validator, _) = crate::webhook::rules();
    let (addr, _) = serve_loopback(resolver, stop, |s| {
        s.validator::<ConfigMap, _>(validator).unwrap()
    })
    .await;
    addr
}

/// The CA is rotated in three steps (publish the next CA, let it sign,
/// drop the old one), each a day apart by default, here a minute of the
/// injected wall clock. Throughout, envtest keeps creating ConfigMaps
/// through the webhook, trusting whatever `caBundle` is published at each
/// call; and at every step a replica that has not reloaded yet (serving the
/// previous pair) is trusted by the new bundle, while the new pair is
/// trusted by the previous bundle (an API server that has not seen the new
/// `caBundle` yet).
#[tokio::test]
async fn the_ca_rotates_in_steps_while_envtest_keeps_calling_the_webhook() {
    let stop = tokio_util::sync::CancellationToken::new();
    let resolver = CertResolver::new();
    let live = serve(resolver.clone(), &stop).await;
    let env = webhook_env(WEBHOOK_SERVICE, live).await;
    let client = env.client();
    create_webhook_namespace(&client, "team-a").await;
    create_validating_config(&client, "gizmo-validating").await;

    // Certificates are checked by TLS clients against the real time, so
    // the injected clock moves by minutes: a CA valid 30 minutes (rotated
    // with 10 left), serving certificates valid 15, steps a minute apart.
    let clock = ManualClock::new();
    let keeper = validating_certs(&client, &resolver)
        .validity(Duration::from_secs(15 * 60))
        .ca_validity(Duration::from_secs(30 * 60))
        .ca_overlap(Duration::from_secs(60))
        .check_interval(Duration::from_millis(50))
        .clock(clock.clone());
    let first = keeper.ensure().await.unwrap();
    tokio::spawn(keeper.run(stop.clone()));

    // envtest creating ConfigMaps through the webhook, one after another.
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(Vec::<String>::new()));
    // The hammer has its own token: it stops, and its last review ends,
    // before the servers stop (a review sent to a server shutting down is
    // refused, which is not what this test is about).
    let hammer_stop = tokio_util::sync::CancellationToken::new();
    let hammer = {
        let (ok, failed, stop) = (ok.clone(), failed.clone(), hammer_stop.clone());
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.is_cancelled() {
                n += 1;
                match maps
                    .create(
                        &PostParams::default(),
                        &crate::config_map("team-a", &format!("cm-{n}")),
                    )
                    .await
                {
                    Ok(_) => drop(ok.fetch_add(1, Ordering::SeqCst)),
                    Err(e) => failed.lock().push(e.to_string()),
                }
            }
        })
    };
    let more_reviews = |what: &'static str| {
        let ok = ok.clone();
        let from = ok.load(Ordering::SeqCst);
        eventually(Duration::from_secs(10), what, move || {
            let n = ok.load(Ordering::SeqCst);
            async move { (n >= from + 5).then_some(()) }
        })
    };
    more_reviews("reviews before the rotation").await;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "system");
    let rotation = |secret: &Secret| {
        secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| {
                a.get(controller_runtime::tls::CA_ROTATION_ANNOTATION)
                    .cloned()
            })
            .unwrap_or_default()
    };
    let mut previous_pem = first.cert_pem().to_owned();
    let mut previous_key = first.key_pem().to_owned();
    let mut previous_bundle = published_bundle(&client).await;
    // (minutes the clock moves, the step reached, CAs in the bundle after)
    for (minutes, step, cas) in [(21, "published:", 2), (2, "switched:", 2), (2, "", 1)] {
        clock.advance(Duration::from_secs(minutes * 60));
        let secret = eventually(Duration::from_secs(10), step, || {
            let secrets = secrets.clone();
            async move {
                let s = secrets.get("webhook-service-cert").await.ok()?;
                let r = rotation(&s);
                let reached = if step.is_empty() {
                    r.is_empty()
                } else {
                    r.starts_with(step)
                };
                reached.then_some(s)
            }
        })
        .await;
        let data = secret.data.clone().unwrap();
        let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        // The bundle is published before the pair it vouches for is served.
        let bundle = eventually(Duration::from_secs(10), "the bundle published", || {
            let (c, want) = (client.clone(), text("ca.crt"));
            async move { (published_bundle(&c).await == want).then_some(want) }
        })
        .await;
        assert_eq!(bundle.matches("BEGIN CERTIFICATE").count(), cas, "{step}");
        more_reviews("reviews after a step").await;

        // The live server, now serving this step's pair, is trusted by the
        // bundle of the step before; a lagging replica, still serving the
        // previous pair, by the bundle of this one.
        let lagging = CertResolver::new();
        lagging
            .load_pem(previous_pem.as_bytes(), previous_key.as_bytes())
            .unwrap();
        let lag = serve(lagging, &stop).await;
        let live_leaf = eventually(Duration::from_secs(10), "the new pair served", || {
            let (r, want) = (resolver.clone(), text("tls.crt"));
            async move {
                let leaf = r.current_leaf()?;
                let want =
                    rustls::pki_types::CertificateDer::from_pem_slice(want.as_bytes()).ok()?;
                (leaf == want).then_some(leaf)
            }
        })
        .await;
        let seen = TlsClient::new(live, &previous_bundle).peer_leaf().await;
        assert_eq!(
            seen.as_deref(),
            Ok(&live_leaf[..]),
            "{step}: new pair, old bundle"
        );
        let seen = TlsClient::new(lag, &bundle).peer_leaf().await;
        assert!(seen.is_ok(), "{step}: old pair, new bundle: {seen:?}");

        previous_pem = text("tls.crt");
        previous_key = text("tls.key");
        previous_bundle = bundle;
    }
    hammer_stop.cancel();
    hammer.await.unwrap();
    stop.cancel();
    assert_eq!(
        failed.lock().clone(),
        Vec::<String>::new(),
        "no review may fail"
    );
    assert!(
        !previous_bundle.contains(first.ca_pem()),
        "the old CA is gone"
    );
}
