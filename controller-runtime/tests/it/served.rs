//! The manager's start-up check that every watched resource is served: a
//! controller for a kind whose CRD is not installed stops the start within
//! seconds with an error naming the CRD (long before the cache-sync
//! timeout), and `wait_for_crds` waits for a CRD created later.

use std::sync::Arc;
use std::time::Duration;

use controller_runtime::manager::ManagerError;
use controller_runtime::manager::{Manager, UnservedResource};
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::{Action, Request};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, PostParams};
use tokio::time::Instant;

use crate::fixture::stop_manager;
use crate::widget::{
    Journal, Widget, WidgetReconciler, cm_data, wait_until, widget, widget_crd, widgets,
};

/// Far longer than the check may take: a start that fails only at the
/// cache-sync timeout shows as a failure to stop within the bound.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// The widget controller: for Widgets, owning ConfigMaps (served).
fn setup_widgets(mgr: &Manager) {
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(WidgetReconciler::new(mgr, Arc::new(Journal::default())))
        .unwrap();
}

struct Noop;
impl Reconciler for Noop {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_controller_for_a_kind_without_its_crd_stops_the_start_naming_the_crd() {
    let env = TestEnv::start().await.unwrap();
    let mgr = Manager::builder(env.client())
        .cache_sync_timeout(CACHE_SYNC_TIMEOUT)
        .build()
        .await
        .unwrap();
    setup_widgets(&mgr);
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        mgr.run(controller_runtime::CancellationToken::new()),
    )
    .await
    .expect("the start stops within 10 s, long before the cache-sync timeout");
    let err = result.expect_err("the start fails");
    assert!(started.elapsed() < CACHE_SYNC_TIMEOUT);
    let ManagerError::NotServed { unserved, waited } = &err else {
        panic!("expected NotServed, got {err}");
    };
    assert_eq!(*waited, None);
    assert_eq!(
        unserved,
        &[UnservedResource {
            controller: "widget".into(),
            group: "example.com".into(),
            version: "v1".into(),
            resource: "widgets".into(),
            kind: "Widget".into(),
            crd: Some("widgets.example.com".into()),
        }],
        "only the Widget, not the ConfigMaps it owns"
    );
    let text = err.to_string();
    assert!(text.contains("widgets.example.com"), "{text}");
    assert!(text.contains("wait_for_crds"), "{text}");
    // No informer was started: nothing listed or watched widgets.
    assert!(
        !env.request_log()
            .iter()
            .any(|r| r.path.contains("/widgets")),
        "no request for widgets before the check: {:?}",
        env.request_log()
    );
}

#[tokio::test]
async fn wait_for_crds_starts_once_the_crd_is_created() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let mgr = Manager::builder(client.clone())
        .cache_sync_timeout(CACHE_SYNC_TIMEOUT)
        .wait_for_crds(Duration::from_secs(30))
        .build()
        .await
        .unwrap();
    setup_widgets(&mgr);
    let stop = controller_runtime::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    // The manager waits (it has not failed) while the CRD is missing.
    wait_until(Duration::from_secs(10), "discovery asked twice", || async {
        env.request_log()
            .iter()
            .filter(|r| r.path == "/apis/example.com/v1")
            .count()
            >= 2
    })
    .await;
    assert!(!run.is_finished(), "the manager waits for the CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    wait_until(Duration::from_secs(10), "the CRD served", || async {
        widgets(&client).list(&Default::default()).await.is_ok()
    })
    .await;
    widgets(&client)
        .create(&PostParams::default(), &widget("late", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), "the widget reconciled", || async {
        cm_data(&client, "late").await.is_some()
    })
    .await;
    stop_manager(stop, run).await;
}

#[tokio::test]
async fn wait_for_crds_fails_the_same_way_when_the_crd_never_comes() {
    let env = TestEnv::start().await.unwrap();
    let mgr = Manager::builder(env.client())
        .cache_sync_timeout(CACHE_SYNC_TIMEOUT)
        .wait_for_crds(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    // A served kind next to the one that is not: only the Widget is named.
    mgr.controller::<ConfigMap>().complete(Noop).unwrap();
    setup_widgets(&mgr);
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        mgr.run(controller_runtime::CancellationToken::new()),
    )
    .await
    .expect("the start stops soon after the wait")
    .expect_err("the start fails");
    let ManagerError::NotServed { unserved, waited } = &err else {
        panic!("expected NotServed, got {err}");
    };
    assert_eq!(*waited, Some(Duration::from_secs(1)));
    assert_eq!(unserved.len(), 1, "{unserved:?}");
    assert_eq!(unserved[0].crd.as_deref(), Some("widgets.example.com"));
}
