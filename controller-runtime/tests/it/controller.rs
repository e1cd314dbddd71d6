//! Controllers against envtest: a `Widget` CRD whose controller owns
//! ConfigMaps (fixtures in `widget.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_runtime::manager::Manager;
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::workqueue::ItemExponentialFailureRateLimiter;
use controller_runtime::{Action, Request};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::fixture::{spawn_manager, stop_manager};
use crate::widget::{
    Journal, Widget, WidgetReconciler, add_widget_controller, cm_data, cm_name, configmaps,
    env_with_crd, fixture, wait_until, widget, widgets,
};

const LONG: Duration = Duration::from_secs(20);

#[tokio::test]
async fn reconciles_create_update_delete_and_owned_changes() {
    let (_env, client, mgr, journal) = fixture().await;
    add_widget_controller(&mgr, &journal);
    let (stop, task) = spawn_manager(&mgr);

    let api = widgets(&client);
    api.create(&PostParams::default(), &widget("w1", &[("color", "red")]))
        .await
        .unwrap();
    wait_until(LONG, "the ConfigMap is created", || async {
        cm_data(&client, "w1").await == Some(BTreeMap::from([("color".into(), "red".into())]))
    })
    .await;
    let cm = configmaps(&client).get(&cm_name("w1")).await.unwrap();
    let owner = &cm.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Widget", "w1", Some(true))
    );

    // Update.
    let mut w = api.get("w1").await.unwrap();
    w.spec.data = BTreeMap::from([("color".into(), "blue".into())]);
    api.replace("w1", &PostParams::default(), &w).await.unwrap();
    wait_until(LONG, "the ConfigMap follows the update", || async {
        cm_data(&client, "w1").await == Some(BTreeMap::from([("color".into(), "blue".into())]))
    })
    .await;

    // A change to the owned ConfigMap re-triggers the owner, which repairs it.
    let before = journal.count("default/w1");
    let mut cm = configmaps(&client).get(&cm_name("w1")).await.unwrap();
    cm.data = Some(BTreeMap::from([("color".into(), "tampered".into())]));
    configmaps(&client)
        .replace(&cm_name("w1"), &PostParams::default(), &cm)
        .await
        .unwrap();
    wait_until(LONG, "the owner repairs its ConfigMap", || async {
        cm_data(&client, "w1").await == Some(BTreeMap::from([("color".into(), "blue".into())]))
    })
    .await;
    assert!(
        journal.count("default/w1") > before,
        "owned change reconciled the owner"
    );

    // Delete.
    api.delete("w1", &DeleteParams::default()).await.unwrap();
    wait_until(LONG, "the ConfigMap is deleted", || async {
        cm_data(&client, "w1").await.is_none()
    })
    .await;
    assert!(journal.overlap.lock().is_none());

    let text = mgr.metrics().encode().unwrap();
    assert!(
        !text.contains(
            r#"controller_runtime_reconcile_total{controller="widget",result="success"} 0"#
        ),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn failures_back_off_per_key_with_growing_delays() {
    let (_env, client, mgr, journal) = fixture().await;
    let base = Duration::from_millis(100);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            base,
            Duration::from_secs(30),
        ))
        .max_concurrent_reconciles(2)
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);

    let api = widgets(&client);
    let mut flaky = widget("flaky", &[("k", "v")]);
    flaky.spec.fail_times = 4;
    api.create(&PostParams::default(), &flaky).await.unwrap();
    // Wait for the first failure, then create a healthy widget: it is not
    // held back by the other key's backoff.
    wait_until(LONG, "first attempt", || async {
        journal.count("default/flaky") >= 1
    })
    .await;
    api.create(&PostParams::default(), &widget("healthy", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "flaky finally succeeds", || async {
        cm_data(&client, "flaky").await.is_some()
    })
    .await;
    let attempts = journal.attempts("default/flaky");
    assert!(attempts.len() >= 5, "{} attempts", attempts.len());
    let gaps: Vec<Duration> = attempts.windows(2).take(4).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let expected = base * 2u32.pow(i as u32);
        assert!(
            *gap >= expected.mul_f64(0.9),
            "gap {i} is {gap:?}, expected about {expected:?}: {gaps:?}"
        );
    }
    // The lower bounds above double from gap to gap; the last gap must also
    // really be longer than the first (a loaded machine only adds delay).
    assert!(gaps[3] > gaps[0] * 2, "delays grow: {gaps:?}");
    let healthy_first = journal.attempts("default/healthy")[0];
    assert!(
        healthy_first < *attempts.last().unwrap(),
        "the healthy key was reconciled while the flaky one backed off"
    );
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_reconcile_errors_total{controller="widget"} 4"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_retries_total{controller="widget",name="widget"} 4"#),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn panics_are_recovered_counted_and_retried() {
    let (_env, client, mgr, journal) = fixture().await;
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(10),
            Duration::from_secs(1),
        ))
        .complete(WidgetReconciler::new(&mgr, Arc::clone(&journal)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let api = widgets(&client);
    let mut bomb = widget("bomb", &[("k", "v")]);
    bomb.spec.panic_times = 2;
    api.create(&PostParams::default(), &bomb).await.unwrap();
    wait_until(
        LONG,
        "the panicking widget is reconciled after retries",
        || async { cm_data(&client, "bomb").await.is_some() },
    )
    .await;
    // The single worker survived the panics and serves other keys.
    api.create(&PostParams::default(), &widget("after", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "a later widget is reconciled", || async {
        cm_data(&client, "after").await.is_some()
    })
    .await;
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_reconcile_panics_total{controller="widget"} 2"#),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn a_key_is_never_reconciled_concurrently_and_workers_are_bounded() {
    let (_env, client, mgr, journal) = fixture().await;
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_millis(30);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .max_concurrent_reconciles(3)
        .complete(reconciler)
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let api = widgets(&client);
    for i in 0..8 {
        api.create(
            &PostParams::default(),
            &widget(&format!("c{i}"), &[("v", "0")]),
        )
        .await
        .unwrap();
    }
    // Hammer each widget with updates while they are being reconciled.
    for round in 1..4 {
        for i in 0..8 {
            let name = format!("c{i}");
            let mut w = api.get(&name).await.unwrap();
            w.spec.data = BTreeMap::from([("v".into(), round.to_string())]);
            api.replace(&name, &PostParams::default(), &w)
                .await
                .unwrap();
        }
    }
    wait_until(LONG, "every widget converges", || async {
        for i in 0..8 {
            if cm_data(&client, &format!("c{i}")).await
                != Some(BTreeMap::from([("v".into(), "3".into())]))
            {
                return false;
            }
        }
        true
    })
    .await;
    assert_eq!(
        *journal.overlap.lock(),
        None,
        "no key was reconciled concurrently"
    );
    let max = journal.max_concurrent.load(Ordering::SeqCst);
    assert!((2..=3).contains(&max), "max concurrent reconciles {max}");
    let text = mgr.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="widget"} 3"#),
        "{text}"
    );
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn workers_wait_for_caches_and_name_the_unsynced_informer() {
    // Every list and watch of widgets fails: the Widget informer never syncs. (A
    // missing CRD would stop the manager's start instead: see `served`.)
    let env = env_with_crd().await;
    env.faults()
        .fail_next(envtest::FailureRule::new(100_000, 500).path_contains("/widgets"));
    let mgr = Manager::builder(env.client())
        .cache_sync_timeout(Duration::from_millis(1500))
        .build()
        .await
        .unwrap();
    let journal = Arc::new(Journal::default());
    add_widget_controller(&mgr, &journal);
    let err = tokio::time::timeout(LONG, mgr.run(CancellationToken::new()))
        .await
        .unwrap()
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("caches did not sync within 1.5s"),
        "{message}"
    );
    assert!(message.contains("Widget (example.com/v1)"), "{message}");
    assert!(
        !message.contains("ConfigMap"),
        "the ConfigMap informer synced: {message}"
    );
}

#[tokio::test]
async fn two_controllers_share_one_watch_per_kind() {
    let (env, client, mgr, journal) = fixture().await;
    add_widget_controller(&mgr, &journal);
    struct CountCms(Arc<AtomicUsize>);
    impl Reconciler for CountCms {
        type Error = std::convert::Infallible;
        async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Action::done())
        }
    }
    let seen = Arc::new(AtomicUsize::new(0));
    mgr.controller::<ConfigMap>()
        .complete(CountCms(Arc::clone(&seen)))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    widgets(&client)
        .create(&PostParams::default(), &widget("shared", &[("a", "b")]))
        .await
        .unwrap();
    wait_until(
        LONG,
        "the ConfigMap controller sees the widget's ConfigMap",
        || async { cm_data(&client, "shared").await.is_some() && seen.load(Ordering::SeqCst) >= 1 },
    )
    .await;
    let watches = env
        .request_log()
        .iter()
        .filter(|r| r.path.ends_with("/configmaps") && r.query.contains("watch=true"))
        .count();
    assert_eq!(watches, 1, "one ConfigMap watch for both controllers");
    stop_manager(stop, task).await;
}

#[tokio::test]
async fn a_reconcile_that_outlives_its_timeout_is_dropped_and_retried() {
    let (_env, client, mgr, journal) = fixture().await;
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_secs(30);
    mgr.controller::<Widget>()
        .reconcile_timeout(Duration::from_millis(100))
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(10),
            Duration::from_secs(1),
        ))
        .complete(reconciler)
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    widgets(&client)
        .create(&PostParams::default(), &widget("sluggish", &[]))
        .await
        .unwrap();
    wait_until(LONG, "three timed-out attempts", || async {
        journal.count("default/sluggish") >= 3
    })
    .await;
    assert_eq!(journal.completed.load(Ordering::SeqCst), 0);
    assert!(
        journal.in_flight.lock().len() <= 1,
        "timed-out calls were dropped"
    );
    let text = mgr.metrics().encode().unwrap();
    let errors = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"controller_runtime_reconcile_errors_total{controller="widget"} "#)
        })
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap();
    assert!(errors >= 2, "{text}");
    stop_manager(stop, task).await;
}
