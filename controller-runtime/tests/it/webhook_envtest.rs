//! End to end through envtest's admission: envtest calls the webhook
//! server over TLS at the Service named in the webhook configurations,
//! trusting the `caBundle` the self-managed certificates wrote. A denied
//! create and update show the validator's message and causes through
//! kube-client, defaults are visible on read, `dryRun` reaches the handler;
//! an object written as v1alpha1 reads as v1 and back (get and list) through
//! the conversion webhook.

use controller_runtime::tls::{CertResolver, SecretCerts};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::fixture::{
    WEBHOOK_SERVICE, converted_crd, create_mutating_config, create_validating_config,
    create_webhook_namespace, webhook_env,
};
use crate::webhook::{ModeDefaults, rules};
use crate::webhook_client::serve_loopback;

fn config_map(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "team-a"}, "data": data}))
        .unwrap()
}

#[tokio::test]
async fn envtest_calls_the_webhooks_with_the_self_managed_certificates() {
    // The server first: its port goes into envtest's service map.
    let (validator, seen) = rules();
    let resolver = CertResolver::new();
    let stop = CancellationToken::new();
    let (addr, served) = serve_loopback(resolver.clone(), &stop, |s| {
        s.validator::<ConfigMap, _>(validator)
            .unwrap()
            .defaulter::<ConfigMap, _>(ModeDefaults)
            .unwrap()
    })
    .await;

    let env = webhook_env(WEBHOOK_SERVICE, addr).await;
    let client = env.client();
    create_webhook_namespace(&client, "team-a").await;
    create_validating_config(&client, "gizmo-validating").await;
    create_mutating_config(&client, "gizmo-mutating").await;
    SecretCerts::new(client.clone(), "system", "webhook-service", resolver)
        .validating_webhook("gizmo-validating")
        .mutating_webhook("gizmo-mutating")
        .ensure()
        .await
        .unwrap();

    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    // Defaults visible on read.
    maps.create(&PostParams::default(), &config_map("plain", json!({})))
        .await
        .unwrap();
    let read = maps.get("plain").await.unwrap();
    assert_eq!(read.data.unwrap()["mode"], "fast");
    assert_eq!(read.metadata.labels.unwrap()["defaulted"], "true");

    // A denied create: the validator's message and cause reach the client.
    let err = maps
        .create(
            &PostParams::default(),
            &config_map("bad", json!({"mode": "turbo"})),
        )
        .await
        .unwrap_err();
    let kube_client::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert!(
        status.message.contains("mode \"turbo\" is not supported"),
        "{status:?}"
    );
    assert_eq!(status.code, 422);

    // A denied update.
    let mut fast = maps.get("plain").await.unwrap();
    fast.data
        .get_or_insert_default()
        .insert("mode".into(), "slow".into());
    let err = maps
        .replace("plain", &PostParams::default(), &fast)
        .await
        .unwrap_err();
    let kube_client::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert!(
        status.message.contains("cannot slow down a fast map"),
        "{status:?}"
    );

    // dryRun reaches the handler (and nothing is stored).
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    maps.create(&dry, &config_map("dry", json!({"mode": "slow"})))
        .await
        .unwrap();
    assert!(maps.get_opt("dry").await.unwrap().is_none());
    let flags: Vec<bool> = seen.lock().iter().map(|(_, dry)| *dry).collect();
    assert!(flags.contains(&true) && flags.contains(&false), "{flags:?}");

    stop.cancel();
    served.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_object_written_as_v1alpha1_reads_as_v1_and_back_through_envtest() {
    use crate::webhook_conversion::{conversion, v1, v1alpha1};
    let resolver = CertResolver::new();
    let stop = CancellationToken::new();
    let (addr, served) = serve_loopback(resolver.clone(), &stop, |s| {
        s.conversion(conversion()).unwrap()
    })
    .await;
    let env = webhook_env(WEBHOOK_SERVICE, addr).await;
    let client = env.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &converted_crd())
        .await
        .unwrap();
    SecretCerts::new(client.clone(), "system", "webhook-service", resolver)
        .crd("gizmos.convert.example.com")
        .ensure()
        .await
        .unwrap();

    let old: Api<v1alpha1::Gizmo> = Api::namespaced(client.clone(), "default");
    let new: Api<v1::Gizmo> = Api::namespaced(client.clone(), "default");
    let spec = v1alpha1::GizmoSpec {
        deployment_name: "web".into(),
        replicas: Some(2),
        tags: vec!["a".into()],
    };
    old.create(
        &PostParams::default(),
        &v1alpha1::Gizmo::new("g", spec.clone()),
    )
    .await
    .unwrap();
    // Stored as v1 (the storage version), read as v1 through the hub.
    let as_v1 = new.get("g").await.unwrap();
    assert_eq!(as_v1.spec.deployment.name, "web");
    assert_eq!(as_v1.spec.labels, ["a"]);
    let listed = new.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items[0].spec.replicas, Some(2));
    // And back to v1alpha1.
    assert_eq!(old.get("g").await.unwrap().spec, spec);
    assert_eq!(
        old.list(&Default::default()).await.unwrap().items[0].spec,
        spec
    );

    stop.cancel();
    served.await.unwrap().unwrap();
}
