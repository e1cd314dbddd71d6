//! Fields of the selected Kubernetes version that k8s-pb's messages lack
//! (k8s-pb 0.9 is generated from Kubernetes 1.35): an informer's cache keeps
//! them, read in JSON or decoded, over real HTTP against envtest. Built with
//! `v1_36` or `v1_37` only (the fields do not exist before); CI runs it with
//! `v1_36`:
//! `cargo test -p informer-core --test it --no-default-features --features v1_36 -- version_skew::`.

use informer_core::factory::SharedInformerFactory;
use k8s_openapi::api::core::v1::{Container, Pod, PodSchedulingGroup, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::Api;
use kube_client::api::PostParams;

use crate::common::*;

const NS: &str = "skew";

fn grouped_pod(name: &str, group: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("nginx:1.27".into()),
                ..Container::default()
            }],
            scheduling_group: Some(PodSchedulingGroup {
                pod_group_name: Some(group.into()),
            }),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn group_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .scheduling_group
        .as_ref()?
        .pod_group_name
        .as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_scheduling_group_stays_in_the_cache_from_the_list_and_from_a_watch() {
    let (_env, client) = env_with(&[NS]).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &grouped_pod("listed", "group-a"))
        .await
        .unwrap();
    // envtest stores and serves the field (in JSON, as a client reads it).
    let stored = pods.get("listed").await.unwrap();
    assert_eq!(group_of(&stored), Some("group-a"), "envtest kept the field");

    // The informer a user gets: the factory's defaults (protobuf on).
    let factory = SharedInformerFactory::builder(client.clone()).build();
    let informer = factory.namespaced_informer::<Pod>(NS);
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    let cached = informer
        .indexer()
        .get_by_key(&format!("{NS}/listed"))
        .unwrap();
    assert_eq!(group_of(&cached), Some("group-a"), "from the list");
    assert_eq!(*cached, stored, "the cache holds what the API server holds");

    pods.create(&PostParams::default(), &grouped_pod("watched", "group-b"))
        .await
        .unwrap();
    eventually("the created Pod arrives by watch", || {
        informer
            .indexer()
            .get_by_key(&format!("{NS}/watched"))
            .is_some()
    })
    .await;
    let cached = informer
        .indexer()
        .get_by_key(&format!("{NS}/watched"))
        .unwrap();
    assert_eq!(group_of(&cached), Some("group-b"), "from a watch event");
    factory.shutdown().await;
}
