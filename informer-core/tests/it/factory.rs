//! SharedInformerFactory against envtest: sharing (one informer, one watch),
//! distinct informers per namespace and selector, resync configuration,
//! start/wait/shutdown.

use std::sync::Arc;
use std::time::Duration;

use envtest::TestEnv;
use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::list_watch::ReadLimits;
use informer_core::selector::LabelSelector;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::common::*;

/// Watch requests for ConfigMaps in the envtest request log.
fn configmap_watches(env: &TestEnv) -> usize {
    env.request_log()
        .iter()
        .filter(|r| r.path.contains("configmaps") && r.is_watch())
        .count()
}

#[tokio::test]
async fn two_requests_share_one_informer_and_one_watch() {
    let (env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let first = factory.informer::<ConfigMap>();
    let second = factory.informer::<ConfigMap>();
    assert_eq!(factory.len(), 1);
    let r1 = Arc::new(Recorder::default());
    let r2 = Arc::new(Recorder::default());
    first.add_event_handler(r1.clone()).unwrap();
    second.add_event_handler(r2.clone()).unwrap();
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert!(first.has_synced() && second.has_synced());

    create(&client, "ns1", "b", &[]).await;
    eventually("both handlers of the shared informer see both adds", || {
        r1.len() == 2 && r2.len() == 2
    })
    .await;
    // The object is cached once: both informers hand out the same Arc.
    let x = first.indexer().get_by_key("ns1/b").unwrap();
    let y = second.indexer().get_by_key("ns1/b").unwrap();
    assert!(Arc::ptr_eq(&x, &y));
    eventually("a watch is open", || configmap_watches(&env) >= 1).await;
    assert_eq!(configmap_watches(&env), 1, "{:#?}", env.request_log());
    factory.shutdown().await;
}

#[tokio::test]
async fn namespaces_and_selectors_get_their_own_informers() {
    let (_env, client) = env_with(&["ns1", "ns2"]).await;
    create(&client, "ns1", "web", &[("app", "web")]).await;
    create(&client, "ns1", "db", &[("app", "db")]).await;
    create(&client, "ns2", "web", &[("app", "web")]).await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let all = factory.informer::<ConfigMap>();
    let ns1 = factory.namespaced_informer::<ConfigMap>("ns1");
    let web = factory.informer_with::<ConfigMap>(InformerOptions::new().label_selector("app=web"));
    let web_again =
        factory.informer_with::<ConfigMap>(InformerOptions::new().label_selector("app=web"));
    let secrets = factory.informer::<Secret>();
    assert_eq!(factory.len(), 4);
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(factory.synced().len(), 4);

    assert_eq!(all.indexer().len(), 3);
    assert_eq!(ns1.indexer().len(), 2);
    assert_eq!(web.indexer().len(), 2);
    assert_eq!(web_again.indexer().len(), 2);
    assert_eq!(secrets.indexer().len(), 0);
    let everything = LabelSelector::everything();
    assert_eq!(ns1.lister().namespace("ns2").list(&everything).len(), 0);
    factory.shutdown().await;
    assert!(all.is_stopped() && ns1.is_stopped());
}

#[tokio::test]
async fn resync_comes_from_options_then_type_then_default() {
    let env = TestEnv::start().await.unwrap();
    let factory = SharedInformerFactory::builder(env.client())
        .default_resync(Duration::from_secs(300))
        .resync_for::<Secret>(Duration::from_secs(60))
        .build();
    let cms = factory.informer::<ConfigMap>();
    let secrets = factory.informer::<Secret>();
    let fast = factory.informer_with::<ConfigMap>(
        InformerOptions::new()
            .field_selector("metadata.name=x")
            .resync(Duration::from_secs(5)),
    );
    // A handler added with the informer's default period sets its check period.
    for registration in [
        cms.add_event_handler(Recorder::default()).map(|_| ()),
        secrets
            .add_event_handler(informer_core::shared_informer::handler_fn())
            .map(|_| ()),
        fast.add_event_handler(Recorder::default()).map(|_| ()),
    ] {
        registration.unwrap();
    }
    assert_eq!(cms.resync_check_period(), Some(Duration::from_secs(300)));
    assert_eq!(secrets.resync_check_period(), Some(Duration::from_secs(60)));
    assert_eq!(fast.resync_check_period(), Some(Duration::from_secs(5)));
}

#[tokio::test]
async fn informers_requested_after_start_need_another_start() {
    let env = TestEnv::start().await.unwrap();
    let factory = SharedInformerFactory::new(env.client(), Duration::ZERO);
    let cms = factory.informer::<ConfigMap>();
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    let secrets = factory.informer::<Secret>();
    assert!(cms.is_running());
    assert!(!secrets.is_running());
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    assert!(secrets.has_synced());
    factory.shutdown().await;
    assert!(secrets.is_stopped());
    // Nothing starts after shutdown.
    factory.start();
    assert!(factory.synced().is_empty());
}

#[tokio::test]
async fn dynamic_objects_get_their_own_shared_informer() {
    use kube_client::Api;
    use kube_core::{ApiResource, DynamicObject};

    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let ar = ApiResource::erase::<ConfigMap>(&());
    let dynamic = factory.informer_for_api(
        Api::<DynamicObject>::all_with(client.clone(), &ar),
        InformerOptions::new(),
    );
    let dynamic_again = factory.informer_for_api(
        Api::<DynamicObject>::all_with(client.clone(), &ar),
        InformerOptions::new(),
    );
    let typed = factory.informer::<ConfigMap>();
    // Same path, different Rust types: two informers; same type: shared.
    assert_eq!(factory.len(), 2);
    factory.start();
    factory.wait_for_cache_sync(LIMIT).await.unwrap();
    let obj = dynamic.indexer().get_by_key("ns1/a").unwrap();
    assert_eq!(obj.metadata.name.as_deref(), Some("a"));
    assert!(Arc::ptr_eq(
        &obj,
        &dynamic_again.indexer().get_by_key("ns1/a").unwrap()
    ));
    assert_eq!(typed.indexer().len(), 1);
    factory.shutdown().await;
}

#[tokio::test]
async fn strip_managed_fields_applies_to_every_informer_of_the_factory() {
    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let plain = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let stripping = SharedInformerFactory::builder(client.clone())
        .strip_managed_fields(true)
        .build();
    assert!(!plain.strips_managed_fields() && stripping.strips_managed_fields());
    let kept = plain.informer::<ConfigMap>();
    let all = stripping.informer::<ConfigMap>();
    let namespaced = stripping.namespaced_informer::<ConfigMap>("ns1");
    for factory in [&plain, &stripping] {
        factory.start();
        factory.wait_for_cache_sync(LIMIT).await.unwrap();
    }
    let managed = |informer: &informer_core::shared_informer::SharedIndexInformer<ConfigMap>| {
        informer
            .indexer()
            .get_by_key("ns1/a")
            .unwrap()
            .metadata
            .managed_fields
            .clone()
    };
    // The server records managedFields; only the stripping factory drops them.
    assert!(managed(&kept).is_some_and(|m| !m.is_empty()));
    assert_eq!(managed(&all), None);
    assert_eq!(managed(&namespaced), None);
    // Objects arriving by watch are stripped too.
    create(&client, "ns1", "b", &[]).await;
    eventually("the watched object is cached", || {
        all.indexer().get_by_key("ns1/b").is_some() && kept.indexer().get_by_key("ns1/b").is_some()
    })
    .await;
    let b = all.indexer().get_by_key("ns1/b").unwrap();
    assert_eq!(b.metadata.managed_fields, None);
    plain.shutdown().await;
    stripping.shutdown().await;
}

#[tokio::test]
async fn the_factory_read_limits_reach_its_informers() {
    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    let metrics = Counting::new();
    // Smaller than any answer: every list (and streamed event) goes over.
    let limits = ReadLimits::default().max_event_bytes(64).max_page_bytes(64);
    let factory = SharedInformerFactory::builder(client)
        .read_limits(limits)
        .metrics(Arc::clone(&metrics) as _)
        .build();
    assert_eq!(factory.read_limits(), limits);
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    eventually("a LIST answer goes over the factory's cap", || {
        metrics.count("oversized:list_page") >= 1
    })
    .await;
    assert!(!informer.has_synced());
    factory.shutdown().await;
}
