//! Protobuf lists and watches against envtest over real HTTP: informers of
//! built-in kinds sync in protobuf (the answers' `Content-Type` in the
//! server's request log says so), watch events arrive, a 410 relists in
//! protobuf, and against a JSON-only server every informer still syncs and
//! counts its fallback once.

use std::sync::Arc;
use std::time::Duration;

use envtest::{FailureRule, TestEnv};
use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::api::PostParams;
use kube_client::{Api, Client};

use crate::common::*;

const NS: &str = "proto";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("nginx:1.27".into()),
                args: Some(vec!["--port=8080".into()]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

async fn seed(client: &Client) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    create_many(&cms, "cm", 12).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(&format!("p{i}")))
            .await
            .unwrap();
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            ..ObjectMeta::default()
        },
        string_data: Some([("k".to_string(), "v".to_string())].into()),
        ..Secret::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// The `Content-Type`s of the successful answers to requests whose path
/// ends with `resource` (lists and watches), in order.
fn answer_types(env: &TestEnv, resource: &str, watch: bool) -> Vec<String> {
    env.request_log()
        .into_iter()
        .filter(|r| r.method == http::Method::GET && r.path.ends_with(resource))
        .filter(|r| r.is_watch() == watch && r.status == 200)
        .map(|r| r.content_type)
        .collect()
}

fn all_protobuf(types: &[String]) -> bool {
    !types.is_empty() && types.iter().all(|t| t.starts_with(PROTOBUF))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_kinds_sync_watch_and_relist_over_protobuf() {
    let (env, client) = env_with(&[NS]).await;
    seed(&client).await;
    let metrics = Counting::new();
    // ConfigMaps by LIST (pages), Pods by a streaming list.
    let cms = SharedIndexInformer::builder(
        ApiListerWatcher::new(
            Api::<ConfigMap>::namespaced(client.clone(), NS),
            ListWatchOptions::default(),
        )
        .protobuf(true)
        .metrics(Arc::clone(&metrics) as _),
    )
    .metrics(Arc::clone(&metrics) as _)
    .streaming_list(false)
    .build()
    .unwrap();
    let pods_lw = ApiListerWatcher::new(
        Api::<Pod>::namespaced(client.clone(), NS),
        ListWatchOptions::default().labels("app=web"),
    )
    .protobuf(true)
    .metrics(Arc::clone(&metrics) as _);
    assert!(pods_lw.uses_protobuf());
    let pods = SharedIndexInformer::new(pods_lw, Duration::ZERO);
    let stop = run_synced(&cms).await;
    let pods_stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn({
        let (pods, t) = (pods.clone(), pods_stop.clone());
        async move { pods.run(t).await }
    });
    pods.wait_for_cache_sync(LIMIT).await.unwrap();

    assert_eq!(cms.indexer().len(), 12);
    assert_eq!(pods.indexer().len(), 3);
    let cached = pods.indexer().get_by_key(&format!("{NS}/p1")).unwrap();
    let stored = Api::<Pod>::namespaced(client.clone(), NS)
        .get("p1")
        .await
        .unwrap();
    assert_eq!(
        *cached, stored,
        "the protobuf path caches what the API holds"
    );
    assert!(all_protobuf(&answer_types(&env, "/configmaps", false)));
    assert!(all_protobuf(&answer_types(&env, "/pods", true)));

    // Watch events arrive over protobuf frames.
    set_value(&client, NS, "cm-00003", "changed").await;
    eventually("a watch event arrives", || {
        cms.indexer()
            .get_by_key(&format!("{NS}/cm-00003"))
            .and_then(|c| c.data.as_ref().and_then(|d| d.get("v").cloned()))
            .as_deref()
            == Some("changed")
    })
    .await;
    assert!(all_protobuf(&answer_types(&env, "/configmaps", true)));

    // Disconnected while an object is created and history is compacted:
    // the resumed watch gets 410 and the informer relists, in protobuf.
    let lists = metrics.count("list");
    env.faults()
        .fail_next(FailureRule::new(usize::MAX, 429).watch(true).retry_after(0));
    env.faults().drop_watches();
    eventually("the watch is refused", || {
        metrics.count("watch_restart:too_many_requests") > 0
    })
    .await;
    create(&client, NS, "late", &[]).await;
    env.faults().compact();
    env.faults().clear_failures();
    eventually("the 410 relisted", || {
        metrics.count("relist:expired") > 0 && metrics.count("list") > lists
    })
    .await;
    eventually("the relist has the new object", || {
        cms.indexer().get_by_key(&format!("{NS}/late")).is_some()
    })
    .await;
    assert!(all_protobuf(&answer_types(&env, "/configmaps", false)));
    assert_eq!(metrics.count("protobuf_fallback"), 0);
    stop.cancel();
    pods_stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_only_server_syncs_every_informer_and_counts_each_fallback_once() {
    let env = TestEnv::builder().json_only().start().await.unwrap();
    let client = env.client();
    create_namespace(&client, NS).await;
    seed(&client).await;
    let metrics = Counting::new();
    let factory = SharedInformerFactory::builder(client.clone())
        .protobuf(true)
        .metrics(Arc::clone(&metrics) as _)
        .build();
    let cms = factory.namespaced_informer::<ConfigMap>(NS);
    let pods = factory.namespaced_informer::<Pod>(NS);
    let secrets = factory.metadata_informer::<Secret>(InformerOptions::new());
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(cms.indexer().len(), 12);
    assert_eq!(pods.indexer().len(), 3);
    assert!(secrets.indexer().get_by_key(&format!("{NS}/s")).is_some());
    // Every later request is JSON: the watch still delivers.
    set_value(&client, NS, "cm-00001", "json").await;
    eventually("a watch event arrives in JSON", || {
        cms.indexer()
            .get_by_key(&format!("{NS}/cm-00001"))
            .and_then(|c| c.data.as_ref().and_then(|d| d.get("v").cloned()))
            .as_deref()
            == Some("json")
    })
    .await;
    // One fallback per informer, each counted once.
    assert_eq!(metrics.count("protobuf_fallback"), 3);
    assert_eq!(metrics.count("protobuf_fallback:json_answer"), 3);
    assert!(
        env.request_log()
            .iter()
            .all(|r| !r.content_type.starts_with(PROTOBUF))
    );
    factory.shutdown().await;
}

#[tokio::test]
async fn a_json_only_server_refuses_protobuf_alone_with_406() {
    let env = TestEnv::builder().json_only().start().await.unwrap();
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .header(http::header::ACCEPT, PROTOBUF)
        .body(Vec::new())
        .unwrap();
    let err = env.client().request_text(req).await.unwrap_err();
    assert!(err.to_string().contains("406"), "{err}");
}
