//! Graceful shutdown: a leader whose lease is lost while it drains, the
//! overall bound on a stop whatever hangs, and a fenced sharded replica.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use controller_runtime::healthz::check_fn;
use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::{ManagerError, SHUTDOWN_CLEANUP_TIMEOUT, runnable_fn};
use envtest::FailureRule;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::PostParams;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::fixture::spawn_manager;
use crate::widget::{NS, WidgetReconciler, cm_data, fixture_with, wait_until, widget, widgets};

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(1500);
const RETRY: Duration = Duration::from_millis(400);
const LONG: Duration = Duration::from_secs(20);
/// How long the in-flight reconcile of the drain test would take.
const WORK: Duration = Duration::from_secs(60);

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
    reconciler.work = WORK;
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
    // Stopped within a renew deadline (+ one attempt) of the last renewal
    // (1.9 s), long before the reconcile would have ended: both margins
    // are wider than 5x, so load cannot turn the verdict.
    assert!(
        took < WORK / 5,
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

/// Every step of a stop hangs at once: a runnable ignores its stop, the API
/// server holds the lease release, a probe is stuck in a health check.
/// Each step used to get its own 5 s (release, informers, each server), so
/// such a stop took the graceful timeout plus 10 s and more; `run` must
/// return within the graceful timeout plus one shared cleanup allowance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_where_everything_hangs_ends_within_its_overall_bound() {
    const GRACE: Duration = Duration::from_secs(1);
    // The lease must outlive the whole stop with room to spare: the test
    // is about the bound, and a lease that expired during the stop used to
    // turn its verdict (1 s of grace against a renew deadline 1.1 to 1.5 s
    // after the pause). 40 s is more than 5x the stop's bound.
    const STOP_RENEW: Duration = Duration::from_secs(40);
    let config = LeaderElectionConfig::new(NS, "stop-bound", "stopper")
        .lease_duration(Duration::from_secs(60))
        .renew_deadline(STOP_RENEW)
        .retry_period(Duration::from_secs(2));
    let (env, _client, mgr, _journal) = fixture_with(|b| {
        b.leader_election(config)
            .health_addr("127.0.0.1:0".parse().unwrap())
            .graceful_shutdown_timeout(GRACE)
    })
    .await;
    mgr.add_runnable(runnable_fn("stubborn", false, |_stop| {
        std::future::pending::<Result<(), controller_runtime::BoxError>>()
    }));
    // A check that blocks its thread (as one doing blocking I/O would)
    // while `stuck` is set.
    let stuck = Arc::new(AtomicBool::new(false));
    let probing = Arc::new(AtomicBool::new(false));
    mgr.add_healthz_check(
        "blocking",
        check_fn({
            let (stuck, probing) = (Arc::clone(&stuck), Arc::clone(&probing));
            move || {
                if stuck.load(Ordering::SeqCst) {
                    probing.store(true, Ordering::SeqCst);
                }
                // Bounded, so that a failing test cannot hang its runtime.
                let since = std::time::Instant::now();
                while stuck.load(Ordering::SeqCst) && since.elapsed() < LONG {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(())
            }
        }),
    )
    .unwrap();
    let health = mgr.health_addr().unwrap();
    let (stop, run) = spawn_manager(&mgr);
    wait_until(LONG, "leading", || async { mgr.is_leader() }).await;

    stuck.store(true, Ordering::SeqCst);
    // Unblocks the check however this test ends.
    struct Unstick(Arc<AtomicBool>);
    impl Drop for Unstick {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    let unstick = Unstick(Arc::clone(&stuck));
    let probe = tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(health).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .await
            .unwrap();
        // Keep the connection open until aborted.
        std::future::pending::<()>().await;
    });
    wait_until(LONG, "a probe is in the health check", || async {
        probing.load(Ordering::SeqCst)
    })
    .await;
    env.faults().pause();
    let cut = Instant::now();
    stop.cancel();
    let ended = tokio::time::timeout(LONG, run).await;
    let took = cut.elapsed();
    env.faults().resume();
    drop(unstick);
    probe.abort();
    let err = ended
        .expect("run ends")
        .unwrap()
        .expect_err("a runnable was aborted");
    assert!(
        matches!(&err, ManagerError::ShutdownTimeout { unfinished, .. } if unfinished == &["stubborn".to_string()]),
        "{err}"
    );
    let bound = GRACE + SHUTDOWN_CLEANUP_TIMEOUT;
    assert!(bound * 5 <= STOP_RENEW, "the lease outlives the stop");
    assert!(
        took < bound + Duration::from_secs(2),
        "the stop took {took:?}; bound {bound:?}"
    );
    assert!(
        took >= GRACE,
        "the stubborn runnable had {GRACE:?}: {took:?}"
    );
}

/// The sharded fault suite's fence: a replica whose Lease writes fail
/// fences itself mid-reconcile, with the API server slow; its manager must
/// end promptly (the fence aborts the reconciles in flight: 2 ms seen),
/// not after its graceful timeout (60 s here) nor its reconciles (60 s):
/// the bound, 10 s, is 6x below the slow outcome and far above the prompt
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_replica_stops_promptly_mid_reconcile_with_a_slow_server() {
    use crate::sharding_fleet::{NS as FLEET_NS, Setup, Timeline, start_replica_with, write_all};
    let env = envtest::TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), FLEET_NS);
    let names: Vec<String> = (0..4).map(|i| format!("f{i}")).collect();
    write_all(&api, &names, "1").await;
    let timeline = Arc::new(Timeline::default());
    // Each reconcile would take a minute.
    let setup = Setup {
        graceful: Some(Duration::from_secs(60)),
        ..Setup::default()
    };
    let r = start_replica_with(
        &env,
        "fence",
        "solo",
        &timeline,
        2,
        Duration::from_secs(60),
        setup,
    )
    .await;
    wait_until(LONG, "a reconcile is in flight", || async {
        timeline.spans.lock().iter().any(|s| s.end.is_none())
    })
    .await;
    env.faults().set_latency(Duration::from_millis(300));
    r.gate.freeze_lease_writes.store(true, Ordering::SeqCst);
    let fence = r.membership.fence();
    tokio::time::timeout(LONG, fence.cancelled())
        .await
        .expect("fenced");
    let fenced = Instant::now();
    let err = tokio::time::timeout(2 * LONG, r.run)
        .await
        .expect("run ends")
        .unwrap()
        .expect_err("a fenced replica's run fails");
    let took = fenced.elapsed();
    env.faults().set_latency(Duration::ZERO);
    assert!(err.to_string().contains("lost its shard lease"), "{err}");
    eprintln!("a fenced replica stopped {took:?} after the fence");
    assert!(
        took < Duration::from_secs(10),
        "stopped {took:?} after the fence"
    );
    assert!(
        timeline.spans.lock().iter().all(|s| s.end.is_some()),
        "the in-flight reconciles were dropped"
    );
}
