//! Factory informers against envtest: streaming lists by default (and the
//! counted fallback to LIST where refused), metadata-only informers that
//! cache no `data`, and a custom transform that keeps managedFields
//! stripped.

use std::sync::Arc;
use std::time::Duration;

use envtest::FailureRule;
use informer_core::factory::{InformerOptions, SharedInformerFactory};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_core::ObjectMeta;

use crate::common::*;

/// Requests to `/configmaps` collections: (LISTs, streaming-list watches).
fn configmap_requests(env: &envtest::TestEnv) -> (usize, usize) {
    let log = env.request_log();
    let relevant = log
        .iter()
        .filter(|r| r.method == http::Method::GET && r.path.ends_with("/configmaps"));
    let (mut lists, mut streams) = (0, 0);
    for r in relevant {
        if !r.is_watch() {
            lists += 1;
        } else if query_of(r).get("sendInitialEvents").map(String::as_str) == Some("true") {
            streams += 1;
        }
    }
    (lists, streams)
}

#[tokio::test]
async fn factory_informers_sync_from_a_streaming_list_by_default() {
    let (env, client) = env_with(&["ns1"]).await;
    for i in 0..5 {
        create(&client, "ns1", &format!("c{i}"), &[]).await;
    }
    let metrics = Counting::new();
    let factory = SharedInformerFactory::builder(client.clone())
        .metrics(metrics.clone())
        .build();
    let informer = factory.informer::<ConfigMap>();
    assert!(informer.uses_streaming_list());
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(informer.indexer().len(), 5);
    assert_eq!(
        configmap_requests(&env),
        (0, 1),
        "one streaming list, no LIST"
    );
    assert_eq!(metrics.count("streaming_fallback"), 0);
    // The stream goes on as the watch.
    create(&client, "ns1", "later", &[]).await;
    eventually("the watched object is cached", || {
        informer.indexer().get_by_key("ns1/later").is_some()
    })
    .await;
    factory.shutdown().await;
}

#[tokio::test]
async fn a_refused_streaming_list_falls_back_to_list_and_is_counted() {
    let (env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    // The first watch (the streaming list) is refused as an old server
    // refuses `sendInitialEvents`.
    env.faults().fail_next(
        FailureRule::new(1, 400)
            .path_contains("configmaps")
            .watch(true),
    );
    let metrics = Counting::new();
    let factory = SharedInformerFactory::builder(client.clone())
        .metrics(metrics.clone())
        .build();
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(informer.indexer().len(), 1);
    assert_eq!(metrics.count("streaming_fallback"), 1);
    assert_eq!(configmap_requests(&env).0, 1, "fell back to one LIST");
    factory.shutdown().await;
}

#[tokio::test]
async fn streaming_lists_can_be_turned_off() {
    let (env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let factory = SharedInformerFactory::builder(client.clone())
        .streaming_list(false)
        .build();
    let informer = factory.informer::<ConfigMap>();
    assert!(!informer.uses_streaming_list());
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(informer.indexer().len(), 1);
    assert_eq!(configmap_requests(&env), (1, 0));
    factory.shutdown().await;
}

fn secret(name: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("key".to_owned(), ByteString(vec![7; 4096]))].into()),
        ..Secret::default()
    }
}

#[tokio::test]
async fn a_metadata_informer_caches_metadata_and_no_data() {
    let (_env, client) = env_with(&["ns1"]).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "ns1");
    secrets
        .create(&PostParams::default(), &secret("s1"))
        .await
        .unwrap();
    let factory = SharedInformerFactory::builder(client.clone())
        .strip_managed_fields(true)
        .build();
    let meta = factory.metadata_informer::<Secret>(InformerOptions::new());
    let full = factory.informer::<Secret>();
    assert_eq!(factory.len(), 2, "metadata and full informers are apart");
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();

    let cached = meta.indexer().get_by_key("ns1/s1").unwrap();
    assert_eq!(cached.metadata.labels.as_ref().unwrap()["app"], "web");
    assert_eq!(cached.metadata.managed_fields, None);
    let json = serde_json::to_value(cached.as_ref()).unwrap();
    assert!(json.get("data").is_none(), "{json}");
    assert!(full.indexer().get_by_key("ns1/s1").unwrap().data.is_some());

    // Changes arrive by watch, as metadata.
    let patch = serde_json::json!({"metadata": {"labels": {"app": "api"}}});
    secrets
        .patch("s1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("the label change is cached", || {
        meta.indexer()
            .get_by_key("ns1/s1")
            .is_some_and(|s| s.metadata.labels.as_ref().unwrap()["app"] == "api")
    })
    .await;
    factory.shutdown().await;
}

#[tokio::test]
async fn a_custom_transform_keeps_managed_fields_stripped() {
    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let factory = SharedInformerFactory::builder(client.clone())
        .strip_managed_fields(true)
        .build();
    let informer = factory.informer::<ConfigMap>();
    informer
        .set_transform(Arc::new(|mut cm: ConfigMap| {
            cm.data = None;
            cm
        }))
        .unwrap();
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    let cached = informer.indexer().get_by_key("ns1/a").unwrap();
    assert_eq!(cached.data, None, "the custom transform ran");
    assert_eq!(
        cached.metadata.managed_fields, None,
        "and stripping still did"
    );
    factory.shutdown().await;
}

#[tokio::test]
async fn informers_of_one_path_and_different_types_sync_apart() {
    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let _full = factory.informer::<ConfigMap>();
    let _meta = factory.metadata_informer::<ConfigMap>(InformerOptions::new());
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    let synced = factory.synced();
    assert_eq!(synced.len(), 2, "{synced:?}");
    assert!(
        synced.keys().any(|k| k.starts_with("ConfigMap ")),
        "{synced:?}"
    );
    assert!(
        synced
            .keys()
            .any(|k| k.starts_with("PartialObjectMeta<ConfigMap> ")),
        "{synced:?}"
    );
    factory.shutdown().await;
}
