//! The manager against envtest: leader election between two managers,
//! graceful shutdown, the health and metrics endpoints, the cache reader.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use controller_runtime::cache::{CacheError, ListOptions};
use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::reconcile::{CallInfo, Reconciler};
use controller_runtime::{Action, Request};
use envtest::{FailureRule, TestEnv};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::PostParams;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::fixture::{spawn_manager, stop_manager};
use crate::widget::{
    Journal, NS, Widget, WidgetError, WidgetReconciler, add_widget_controller, cm_data, configmaps,
    env_with_crd, fixture_with, wait_until, widget, widgets,
};

// A retry far shorter than the lease, so that the takeover bounds below
// have margins over 5x (see `leader_election_hands_over`).
const LEASE: Duration = Duration::from_secs(4);
const RENEW: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_millis(200);
const LONG: Duration = Duration::from_secs(20);
const LEASE_NAME: &str = "widget-operator";

fn election(id: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(NS, LEASE_NAME, id)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
}

async fn lease_holder(env: &TestEnv) -> Option<String> {
    let lease = Api::<Lease>::namespaced(env.client(), NS)
        .get_opt(LEASE_NAME)
        .await
        .unwrap()?;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_string(),
    )
}

/// The value of the sample line `series` in a Prometheus text body.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// Which replicas are reconciling right now, across managers.
#[derive(Default)]
struct Cluster {
    active: Mutex<HashMap<&'static str, usize>>,
    both_at_once: AtomicBool,
    reconciles: Mutex<HashMap<&'static str, usize>>,
}

/// The widget reconciler, tagged with its replica, watching for two
/// replicas reconciling at the same instant.
struct Replica {
    id: &'static str,
    cluster: Arc<Cluster>,
    inner: WidgetReconciler,
}

struct Active<'a>(&'a Cluster, &'static str);
impl Drop for Active<'_> {
    fn drop(&mut self) {
        *self.0.active.lock().entry(self.1).or_default() -= 1;
    }
}

impl Reconciler for Replica {
    type Error = WidgetError;
    async fn reconcile(&self, req: Request, ctx: CallInfo) -> Result<Action, WidgetError> {
        let _active = {
            let mut active = self.cluster.active.lock();
            *active.entry(self.id).or_default() += 1;
            if active.iter().any(|(id, n)| *id != self.id && *n > 0) {
                self.cluster.both_at_once.store(true, Ordering::SeqCst);
            }
            *self.cluster.reconciles.lock().entry(self.id).or_default() += 1;
            Active(&self.cluster, self.id)
        };
        self.inner.reconcile(req, ctx).await
    }
}

async fn replica(
    env: &TestEnv,
    id: &'static str,
    cluster: &Arc<Cluster>,
    release: bool,
) -> Manager {
    let mgr = Manager::builder(env.client())
        .leader_election(election(id).release_on_cancel(release))
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap();
    let mut inner = WidgetReconciler::new(&mgr, Arc::new(Journal::default()));
    inner.work = Duration::from_millis(10);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .max_concurrent_reconciles(2)
        .complete(Replica {
            id,
            cluster: Arc::clone(cluster),
            inner,
        })
        .unwrap();
    mgr
}

fn reconciles_of(cluster: &Cluster, id: &str) -> usize {
    cluster.reconciles.lock().get(id).copied().unwrap_or(0)
}

/// Touches every widget every 50 ms so both replicas have work on offer.
fn churn(env: &TestEnv, names: Vec<String>) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let api = widgets(&env.client());
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut round = 0u32;
            while !stop.is_cancelled() {
                round += 1;
                for name in &names {
                    if let Ok(mut w) = api.get(name).await {
                        w.spec.data = BTreeMap::from([("round".into(), round.to_string())]);
                        let _ = api.replace(name, &PostParams::default(), &w).await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    });
    (stop, task)
}

async fn leader_election_hands_over(release: bool) {
    let env = env_with_crd().await;
    let client = env.client();
    let cluster = Arc::new(Cluster::default());
    let a = replica(&env, "replica-a", &cluster, release).await;
    let b = replica(&env, "replica-b", &cluster, release).await;
    let (stop_a, run_a) = spawn_manager(&a);
    wait_until(LONG, "replica-a leads", || async { a.is_leader() }).await;
    let (stop_b, run_b) = spawn_manager(&b);

    let names: Vec<String> = (0..4).map(|i| format!("le{i}")).collect();
    for name in &names {
        widgets(&client)
            .create(&PostParams::default(), &widget(name, &[("round", "0")]))
            .await
            .unwrap();
    }
    wait_until(LONG, "the leader reconciles", || async {
        cm_data(&client, "le3").await.is_some()
    })
    .await;
    let a_before = reconciles_of(&cluster, "replica-a");
    let (stop_churn, churn_task) = churn(&env, names);
    // The follower had every chance to reconcile: its own cache has seen
    // several rounds of changes while the leader reconciled them.
    wait_until(
        LONG,
        "the follower sees the churn the leader reconciles",
        || async {
            let round = b
                .cache()
                .get::<Widget>(Some(NS), "le0")
                .await
                .ok()
                .flatten()
                .and_then(|w| w.spec.data.get("round").and_then(|r| r.parse::<u32>().ok()))
                .unwrap_or(0);
            round >= 3 && reconciles_of(&cluster, "replica-a") >= a_before + 8
        },
    )
    .await;
    assert_eq!(
        cluster.reconciles.lock().get("replica-b"),
        None,
        "the follower never reconciles"
    );
    assert!(!b.is_leader());
    assert_eq!(lease_holder(&env).await.as_deref(), Some("replica-a"));

    // The leader stops; the follower must take over within the lease duration.
    let stopped = Instant::now();
    stop_manager(stop_a, run_a).await;
    if release {
        // Released: no holder, or already the follower (its next attempt
        // may come before this read on a loaded machine). That it was
        // released, not left to expire, the takeover time below shows.
        let holder = lease_holder(&env).await;
        assert!(
            matches!(holder.as_deref(), None | Some("replica-b")),
            "a stopped leader releases the lease: held by {holder:?}"
        );
    }
    wait_until(LONG, "replica-b takes over", || async { b.is_leader() }).await;
    let takeover = stopped.elapsed();
    // A released lease is free at once: the follower takes it at its next
    // attempt. An unreleased one expires a lease duration after the follower
    // last saw it change (up to one retry after the last renewal), and the
    // follower notices at its next attempt (up to one retry, plus jitter).
    // The bounds leave over 5x that (240 ms after a release, 440 ms past
    // the lease otherwise) for a loaded machine; a released lease is still
    // taken well before it could have expired.
    let limit = if release { LEASE / 2 } else { LEASE * 2 };
    assert!(
        takeover < limit,
        "takeover took {takeover:?}, limit {limit:?}"
    );
    wait_until(LONG, "replica-b reconciles", || async {
        reconciles_of(&cluster, "replica-b") > 0
    })
    .await;
    assert_eq!(lease_holder(&env).await.as_deref(), Some("replica-b"));
    stop_churn.cancel();
    churn_task.await.unwrap();
    stop_manager(stop_b, run_b).await;
    assert!(
        !cluster.both_at_once.load(Ordering::SeqCst),
        "two replicas reconciled at the same instant"
    );
}

#[tokio::test]
async fn leader_election_one_reconciles_and_a_released_lease_is_taken_over() {
    leader_election_hands_over(true).await;
}

#[tokio::test]
async fn leader_election_takeover_after_a_leader_stops_without_releasing() {
    leader_election_hands_over(false).await;
}

#[tokio::test]
async fn a_replica_that_loses_the_lease_stops_reconciling_at_once() {
    let (env, client, mgr, journal) = fixture_with(|b| b.leader_election(election("solo"))).await;
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_secs(60);
    let work = reconciler.work;
    mgr.controller::<Widget>().complete(reconciler).unwrap();
    let (_stop, run) = spawn_manager(&mgr);
    wait_until(LONG, "leading", || async { mgr.is_leader() }).await;
    widgets(&client)
        .create(&PostParams::default(), &widget("slow", &[]))
        .await
        .unwrap();
    wait_until(LONG, "a reconcile is in flight", || async {
        !journal.in_flight.lock().is_empty()
    })
    .await;
    // Every lease write fails from now on: the leader cannot renew.
    let mut rule = FailureRule::new(1000, 500);
    rule.path_contains = Some("/leases/".into());
    rule.method = Some(http::Method::PUT);
    env.faults().fail_next(rule);
    let cut = Instant::now();
    let err = tokio::time::timeout(LONG, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ManagerError::LeadershipLost(_)), "{err}");
    // Expected within RENEW + RETRY (1.9 s); the bound is over 5x that and
    // a fifth of the reconcile, so load cannot turn the verdict.
    assert!(
        cut.elapsed() < work / 5,
        "stopped {:?} after renewals began failing",
        cut.elapsed()
    );
    assert!(
        journal.in_flight.lock().is_empty(),
        "the in-flight reconcile was dropped"
    );
    assert_eq!(
        journal.completed.load(Ordering::SeqCst),
        0,
        "it did not run to the end"
    );
}

#[tokio::test]
async fn shutdown_drains_in_flight_work_and_releases_the_lease() {
    let (env, client, mgr, journal) = fixture_with(|b| {
        b.leader_election(election("drainer"))
            .graceful_shutdown_timeout(Duration::from_secs(10))
    })
    .await;
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_millis(800);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .complete(reconciler)
        .unwrap();
    let (stop, run) = spawn_manager(&mgr);
    widgets(&client)
        .create(&PostParams::default(), &widget("inflight", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "a reconcile is in flight", || async {
        !journal.in_flight.lock().is_empty()
    })
    .await;
    assert_eq!(lease_holder(&env).await.as_deref(), Some("drainer"));
    stop.cancel();
    // Work that arrives during shutdown is not taken.
    widgets(&client)
        .create(&PostParams::default(), &widget("late", &[("k", "v")]))
        .await
        .unwrap();
    tokio::time::timeout(LONG, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        journal.completed.load(Ordering::SeqCst),
        1,
        "the in-flight reconcile finished"
    );
    assert!(cm_data(&client, "inflight").await.is_some());
    assert_eq!(
        journal.count("default/late"),
        0,
        "no new work after shutdown began"
    );
    assert_eq!(lease_holder(&env).await, None, "the lease was released");
}

#[tokio::test]
async fn shutdown_gives_up_after_the_grace_period_but_still_releases_the_lease() {
    let (env, client, mgr, journal) = fixture_with(|b| {
        b.leader_election(election("stuck"))
            .graceful_shutdown_timeout(Duration::from_millis(300))
    })
    .await;
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_secs(60);
    mgr.controller::<Widget>().complete(reconciler).unwrap();
    let (stop, run) = spawn_manager(&mgr);
    widgets(&client)
        .create(&PostParams::default(), &widget("forever", &[]))
        .await
        .unwrap();
    wait_until(LONG, "a reconcile is in flight", || async {
        !journal.in_flight.lock().is_empty()
    })
    .await;
    stop.cancel();
    let err = tokio::time::timeout(LONG, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ManagerError::ShutdownTimeout { .. }), "{err}");
    assert!(err.to_string().contains("controller widget"), "{err}");
    assert_eq!(lease_holder(&env).await, None, "the lease was released");
}

#[tokio::test]
async fn health_ready_and_metrics_endpoints() {
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (_env, client, mgr, journal) = fixture_with(|b| {
        b.health_addr(local)
            .metrics_addr(local)
            .leader_election(election("probed"))
    })
    .await;
    add_widget_controller(&mgr, &journal);
    let (health, metrics) = (mgr.health_addr().unwrap(), mgr.metrics_addr().unwrap());
    let (stop, run) = spawn_manager(&mgr);
    widgets(&client)
        .create(&PostParams::default(), &widget("m1", &[("k", "v")]))
        .await
        .unwrap();
    wait_until(LONG, "reconciled", || async {
        cm_data(&client, "m1").await.is_some()
    })
    .await;

    assert_eq!(http_get(health, "/healthz").await, (200, "ok".into()));
    assert_eq!(
        http_get(health, "/healthz?verbose").await,
        (200, "[+]ping ok\nhealthz check passed\n".into())
    );
    assert_eq!(http_get(health, "/readyz").await, (200, "ok".into()));
    assert_eq!(
        http_get(health, "/readyz?verbose").await,
        (
            200,
            "[+]caches synced ok\n[+]leadership settled ok\nreadyz check passed\n".into()
        )
    );
    assert_eq!(
        http_get(health, "/readyz/caches%20synced").await,
        (200, "ok".into())
    );

    let (status, text) = http_get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    let success = sample(
        &text,
        r#"controller_runtime_reconcile_total{controller="widget",result="success"}"#,
    );
    assert!(success.is_some_and(|n| n >= 1.0), "{text}");
    for series in [
        r#"controller_runtime_reconcile_errors_total{controller="widget"}"#,
        r#"controller_runtime_terminal_reconcile_errors_total{controller="widget"}"#,
        r#"controller_runtime_reconcile_panics_total{controller="widget"}"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="widget"}"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="widget"}"#,
        r#"controller_runtime_active_workers{controller="widget"}"#,
        r#"workqueue_adds_total{controller="widget",name="widget"}"#,
        r#"workqueue_depth{controller="widget",name="widget"}"#,
    ] {
        assert!(
            sample(&text, series).is_some(),
            "{series} missing from\n{text}"
        );
    }
    // The informers of the manager's shared factory report through the same
    // registry: the Widget informer listed at least once and opened a watch.
    let informer_series = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains("informer=") && l.contains("widgets"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert!(informer_series("informer_lists_total") >= 1.0, "{text}");
    assert!(informer_series("informer_watches_total") >= 1.0, "{text}");
    assert!(
        text.contains("# TYPE workqueue_queue_duration_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE workqueue_work_duration_seconds histogram"),
        "{text}"
    );
    stop_manager(stop, run).await;
}

#[tokio::test]
async fn readyz_names_the_informer_that_has_not_synced() {
    // Every list and watch of widgets fails: the Widget informer cannot sync. (A
    // missing CRD would stop the manager's start instead: see `served`.)
    let env = env_with_crd().await;
    env.faults()
        .fail_next(envtest::FailureRule::new(100_000, 500).path_contains("/widgets"));
    let mgr = Manager::builder(env.client())
        .health_addr("127.0.0.1:0".parse().unwrap())
        .build()
        .await
        .unwrap();
    mgr.controller::<Widget>()
        .complete(WidgetReconciler::new(&mgr, Arc::new(Journal::default())))
        .unwrap();
    let health = mgr.health_addr().unwrap();
    let (stop, run) = spawn_manager(&mgr);
    // Until the start has asked discovery whether widgets are served, the
    // check says the informers are not started; then it names the one
    // that cannot sync.
    let started = || async {
        let (_, body) = http_get(health, "/readyz").await;
        !body.contains("informers not started")
    };
    wait_until(Duration::from_secs(10), "the informers started", started).await;
    let (status, body) = http_get(health, "/readyz").await;
    assert_eq!(status, 500);
    assert!(
        body.starts_with("[-]caches synced failed: not synced: "),
        "{body}"
    );
    assert!(body.contains("widgets"), "{body}");
    assert!(body.ends_with("readyz check failed\n"), "{body}");
    assert_eq!(
        http_get(health, "/healthz").await,
        (200, "ok".into()),
        "alive though not ready"
    );
    stop.cancel();
    // The controller was still waiting for its caches: stopping is clean.
    tokio::time::timeout(LONG, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn cache_reader_gets_lists_and_uses_field_indexes() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let mgr = Manager::builder(client.clone()).build().await.unwrap();
    let err = mgr
        .cache()
        .get::<ConfigMap>(Some(NS), "x")
        .await
        .unwrap_err();
    assert!(matches!(err, CacheError::NotStarted { .. }), "{err}");
    mgr.cache()
        .index_field::<ConfigMap>("data.team", |cm| {
            cm.data
                .as_ref()
                .and_then(|d| d.get("team").cloned())
                .into_iter()
                .collect()
        })
        .unwrap();
    for (ns, name, team) in [
        ("default", "a", "red"),
        ("default", "b", "blue"),
        ("kube-system", "c", "red"),
    ] {
        let mut cm = crate::config_map(ns, name);
        cm.data = Some(BTreeMap::from([("team".into(), team.into())]));
        cm.metadata.labels = Some(BTreeMap::from([("app".into(), name.into())]));
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let (stop, run) = spawn_manager(&mgr);
    let cache = mgr.cache();
    wait_until(LONG, "the manager started its informers", || async {
        cache.is_started()
    })
    .await;
    let got = cache
        .get::<ConfigMap>(Some("default"), "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("a"));
    assert!(
        cache
            .get::<ConfigMap>(Some("default"), "zzz")
            .await
            .unwrap()
            .is_none()
    );
    let names = |list: Vec<Arc<ConfigMap>>| -> HashSet<String> {
        list.iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect()
    };
    let red = cache
        .list::<ConfigMap>(&ListOptions::new().matching_field("data.team", "red"))
        .await
        .unwrap();
    assert_eq!(
        names(red),
        HashSet::from(["a".to_string(), "c".to_string()])
    );
    let red_default = cache
        .list::<ConfigMap>(
            &ListOptions::new()
                .namespace("default")
                .matching_field("data.team", "red"),
        )
        .await
        .unwrap();
    assert_eq!(names(red_default), HashSet::from(["a".to_string()]));
    let by_label = cache
        .list::<ConfigMap>(&ListOptions::new().labels("app in (b,c)".parse().unwrap()))
        .await
        .unwrap();
    assert_eq!(
        names(by_label),
        HashSet::from(["b".to_string(), "c".to_string()])
    );
    let err = cache
        .list::<ConfigMap>(&ListOptions::new().matching_field("nope", "x"))
        .await
        .unwrap_err();
    assert!(matches!(err, CacheError::UnknownField { .. }), "{err}");
    // The cache follows changes.
    configmaps(&client)
        .delete("b", &Default::default())
        .await
        .unwrap();
    wait_until(LONG, "the cache sees the delete", || async {
        cache
            .get::<ConfigMap>(Some("default"), "b")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    stop_manager(stop, run).await;
}

#[tokio::test]
async fn the_cache_strips_managed_fields_unless_told_to_keep_them() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("tracked".into());
    cm.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    assert!(
        created
            .metadata
            .managed_fields
            .is_some_and(|m| !m.is_empty()),
        "the server records managedFields"
    );
    for keep in [false, true] {
        let builder = Manager::builder(client.clone());
        let builder = if keep {
            builder.keep_managed_fields()
        } else {
            builder
        };
        let mgr = builder.build().await.unwrap();
        assert_eq!(mgr.informer_factory().strips_managed_fields(), !keep);
        let (stop, task) = spawn_manager(&mgr);
        wait_until(Duration::from_secs(10), "the cache started", || async {
            mgr.cache().is_started()
        })
        .await;
        let cached = mgr
            .cache()
            .get::<ConfigMap>(Some("default"), "tracked")
            .await
            .unwrap()
            .expect("cached");
        let has_managed_fields = cached
            .metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| !m.is_empty());
        assert_eq!(has_managed_fields, keep, "keep_managed_fields: {keep}");
        stop_manager(stop, task).await;
    }
}
