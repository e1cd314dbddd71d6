//! Graceful shutdown of a leader whose lease is lost while it drains.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::ManagerError;
use envtest::FailureRule;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::PostParams;
use tokio::time::Instant;

use crate::fixture::spawn_manager;
use crate::widget::{NS, WidgetReconciler, cm_data, fixture_with, wait_until, widget, widgets};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(1500);
const RETRY: Duration = Duration::from_millis(400);
const LONG: Duration = Duration::from_secs(20);

/// The drain after shutdown lasts up to 30 s, longer than the 2 s lease: a
/// lease lost during it must abort the in-flight reconcile at once (it must
/// not write its ConfigMap as a replica that no longer leads) and `run`
/// must report the loss instead of success.
#[tokio::test]
async fn a_lease_lost_while_draining_aborts_in_flight_work_and_is_reported() {
    let config = LeaderElectionConfig::new(NS, "drain-loss", "drainer")
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY);
    let (env, client, mgr, journal) = fixture_with(|b| {
        b.leader_election(config)
            .graceful_shutdown_timeout(Duration::from_secs(30))
    })
    .await;
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_secs(6);
    mgr.controller::<crate::widget::Widget>()
        .owns::<ConfigMap>()
        .complete(reconciler)
        .unwrap();
    let (stop, run) = spawn_manager(&mgr);
    wait_until(LONG, "leading", || async { mgr.is_leader() }).await;
    widgets(&client)
        .create(&PostParams::default(), &widget("slow", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "a reconcile is in flight", || async {
        !journal.in_flight.lock().is_empty()
    })
    .await;
    // Shut down, then make every lease write fail: the drain outlives the
    // renew deadline.
    stop.cancel();
    let mut rule = FailureRule::new(100_000, 500);
    rule.path_contains = Some("/leases/".into());
    rule.method = Some(http::Method::PUT);
    env.faults().fail_next(rule);
    let cut = Instant::now();
    let err = tokio::time::timeout(LONG, run)
        .await
        .expect("run ends")
        .unwrap()
        .expect_err("a lease lost while draining is not a clean stop");
    let took = cut.elapsed();
    assert!(matches!(err, ManagerError::LeadershipLost(_)), "{err}");
    assert!(err.to_string().contains("draining"), "{err}");
    // Stopped within a renew deadline (+ one attempt) of the last renewal,
    // long before the 6 s reconcile would have ended.
    assert!(
        took < RENEW + RETRY + Duration::from_secs(1),
        "stopped {took:?} after renewals began failing"
    );
    assert!(!mgr.is_leader());
    assert!(
        journal.in_flight.lock().is_empty(),
        "the reconcile was dropped"
    );
    assert_eq!(journal.completed.load(Ordering::SeqCst), 0);
    env.faults().clear_failures();
    assert_eq!(
        cm_data(&client, "slow").await,
        None,
        "no write from a replica that stopped leading"
    );
}
