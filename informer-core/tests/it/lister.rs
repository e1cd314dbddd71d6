//! Listers over a running informer against envtest: label selectors,
//! namespaces, custom indexes, and reads that follow live changes.

use std::sync::Arc;
use std::time::Duration;

use informer_core::lister::ListerError;
use informer_core::selector::LabelSelector;
use informer_core::store::IndexFn;
use k8s_openapi::api::core::v1::ConfigMap;

use crate::common::*;

#[tokio::test]
async fn a_lister_reads_the_informer_cache() {
    let (_env, client) = env_with(&["ns1", "ns2"]).await;
    create(&client, "ns1", "web", &[("app", "web"), ("tier", "front")]).await;
    create(&client, "ns1", "db", &[("app", "db")]).await;
    create(&client, "ns2", "web", &[("app", "web")]).await;
    let informer = informer(&client, Duration::ZERO);
    let by_app: IndexFn<ConfigMap> = Arc::new(|cm: &ConfigMap| {
        Ok(cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect())
    });
    informer
        .add_indexers([("by-app".to_string(), by_app)])
        .unwrap();
    let stop = run_synced(&informer).await;

    let lister = informer.lister();
    let web: LabelSelector = "app=web".parse().unwrap();
    let everything = LabelSelector::everything();
    assert_eq!(lister.list(&everything).len(), 3);
    assert_eq!(lister.list(&web).len(), 2);
    assert_eq!(lister.namespace("ns1").list(&web).len(), 1);
    assert_eq!(
        lister
            .namespace("ns1")
            .list(&"app,!tier".parse().unwrap())
            .len(),
        1
    );
    assert!(lister.namespace("ns2").get("web").is_some());
    assert!(lister.namespace("ns2").get("db").is_none());
    assert_eq!(lister.by_index("by-app", "web").unwrap().len(), 2);
    assert_eq!(
        lister
            .namespace("ns2")
            .by_index("by-app", "web")
            .unwrap()
            .len(),
        1
    );
    assert!(matches!(
        lister.by_index("nope", "web"),
        Err(ListerError::Index(_))
    ));

    delete_cm(&client, "ns2", "web").await;
    eventually("lister follows the delete", || {
        lister.namespace("ns2").get("web").is_none()
    })
    .await;
    assert_eq!(lister.by_index("by-app", "web").unwrap().len(), 1);
    stop.cancel();
}
