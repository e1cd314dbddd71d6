//! Shard membership on a real (in-process) server: replicas join a ring,
//! the sharder moves it from epoch to epoch, a replica that leaves is gone
//! at once, one that dies is dropped after its Lease expires, and a replica
//! whose Lease writes fail fences itself before anyone takes its keys.
//! And what operators see of a sharded controller over HTTP: objects per
//! shard and the time to reassign a dead replica's objects on `/metrics`,
//! each shard's readiness on `/readyz`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use controller_runtime::sharding::config::ShardingConfig;
use controller_runtime::sharding::membership::RingView;
use controller_runtime::sharding::membership::{Membership, MembershipError};
use envtest::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use kube_client::api::Api;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::chaos::gate::{GateLayer, GateState};
use crate::eventually;

pub const LEASE: Duration = Duration::from_secs(1);
pub const RENEW: Duration = Duration::from_millis(600);
pub const RETRY: Duration = Duration::from_millis(200);

/// A ring config with short timings, for tests that time a Lease's expiry
/// with one or two replicas. A replica fences itself (and its manager
/// stops) when it goes [`RENEW`] without a renewal: on a loaded machine a
/// ring of several replicas and their API server in one process can
/// stall that long, so tests that only need a ring to run use
/// [`steady_ring_config`].
pub fn ring_config(ring: &str, id: &str) -> ShardingConfig {
    ShardingConfig::new("default", ring)
        .identity(id)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
}

/// The lease of [`steady_ring_config`] (leader election's tests use the
/// same timings): a killed replica is dropped after it.
pub const STEADY_LEASE: Duration = Duration::from_secs(4);
/// The renew deadline of [`steady_ring_config`]. A renewal is due every
/// [`RETRY`]; on a loaded 2-core machine, with three replicas, their
/// controllers and the API server in one debug-built process, renewals
/// were seen up to ~0.5 s apart (and [`RENEW`]'s 0.6 s was overrun, fencing
/// replicas at random). 3 s leaves 2.8 s of stall, over 5x that.
pub const STEADY_RENEW: Duration = Duration::from_secs(3);

/// How long a killed replica's objects may take to be reconciled elsewhere
/// on [`steady_ring_config`]'s ring: expected after [`STEADY_LEASE`] and
/// about 0.5 s more (the sharder's look, the relabelling and a reconcile;
/// seen 0.1 to 0.45 s past the lease), bounded at 5x that.
pub const HANDOVER_LIMIT: Duration = STEADY_LEASE
    .saturating_add(Duration::from_millis(500))
    .saturating_mul(5);

/// A ring config whose replicas do not fence themselves when a loaded
/// machine stalls the process for a while: [`STEADY_LEASE`],
/// [`STEADY_RENEW`], [`RETRY`].
pub fn steady_ring_config(ring: &str, id: &str) -> ShardingConfig {
    ring_config(ring, id)
        .lease_duration(STEADY_LEASE)
        .renew_deadline(STEADY_RENEW)
}

struct Member {
    membership: Membership,
    gate: Arc<GateState>,
    stop: CancellationToken,
    run: JoinHandle<Result<(), MembershipError>>,
}

fn join(env: &TestEnv, ring: &str, id: &str) -> Member {
    join_with(env, ring_config(ring, id))
}

/// Joins the ring of `config` in the env's namespace (a namespace of the
/// test's own on an existing cluster, so that no two tests' Leases meet).
fn join_with(env: &TestEnv, mut config: ShardingConfig) -> Member {
    config.namespace = env.namespace().to_owned();
    let gate = Arc::new(GateState::default());
    let client = kube_client::client::ClientBuilder::try_from(env.client_config())
        .unwrap()
        .with_layer(&GateLayer(Arc::clone(&gate)))
        .build();
    let membership = Membership::new(client, config).unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (m, stop) = (membership.clone(), stop.clone());
        async move { m.run(stop).await }
    });
    Member {
        membership,
        gate,
        stop,
        run,
    }
}

fn settled_with(view: &RingView, members: &[&str]) -> bool {
    view.settled() && view.members() == members
}

async fn all_see(members: &[&Member], expect: &[&str], within: Duration, what: &str) -> u64 {
    eventually(within, what, || async {
        let views: Vec<RingView> = members.iter().map(|m| m.membership.view()).collect();
        let epoch = views[0].epoch();
        views
            .iter()
            .all(|v| v.epoch() == epoch && settled_with(v, expect))
            .then_some(epoch)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_join_leave_and_die() {
    let env = TestEnv::start().await.unwrap();
    let a = join(&env, "it-ring", "a");
    let b = join(&env, "it-ring", "b");
    let c = join(&env, "it-ring", "c");
    let first = all_see(
        &[&a, &b, &c],
        &["a", "b", "c"],
        Duration::from_secs(10),
        "a ring of three",
    )
    .await;
    let sharders = [&a, &b, &c]
        .iter()
        .filter(|m| m.membership.is_sharder())
        .count();
    assert_eq!(sharders, 1, "exactly one sharder");

    // A graceful leave deletes the Lease before `run` returns, so the
    // others see it gone without waiting for an expiry (checked on the
    // server, not by racing the leave against the lease duration).
    let left = Instant::now();
    c.stop.cancel();
    c.run.await.unwrap().unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), env.namespace());
    assert!(
        leases.get_opt("c").await.unwrap().is_none(),
        "c's shard Lease is still there after it left"
    );
    let second = all_see(&[&a, &b], &["a", "b"], Duration::from_secs(5), "c left").await;
    assert!(second > first);
    let leave_took = left.elapsed();

    // A replica that dies (its task dropped, its connection cut) keeps its
    // Lease until it expires; then the sharder drops it.
    let died = Instant::now();
    b.gate.partitioned.store(true, Ordering::SeqCst);
    b.run.abort();
    all_see(
        &[&a],
        &["a"],
        Duration::from_secs(5),
        "b dropped after expiry",
    )
    .await;
    let death_took = died.elapsed();
    // Its last renewal may have been seen up to a retry period before it died.
    assert!(
        death_took >= LEASE - RETRY,
        "a dead member was dropped after {death_took:?}, before its lease expired"
    );
    eprintln!("sharding membership: leave {leave_took:?}, death noticed in {death_took:?}");
    a.stop.cancel();
    a.run.await.unwrap().unwrap();
}

/// The fence test's lease and renew deadline: the fence comes at about
/// the renew deadline plus a retry (1.2 s), the expiry at the lease (6 s),
/// 5x later, so the two timers cannot swap on a busy machine.
const FENCE_LEASE: Duration = Duration::from_secs(6);
const FENCE_RENEW: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_renew_fences_itself_before_its_lease_expires() {
    let env = TestEnv::start().await.unwrap();
    let config = |id: &str| {
        ring_config("it-fence", id)
            .lease_duration(FENCE_LEASE)
            .renew_deadline(FENCE_RENEW)
    };
    let a = join_with(&env, config("a"));
    let b = join_with(&env, config("b"));
    all_see(
        &[&a, &b],
        &["a", "b"],
        Duration::from_secs(10),
        "a ring of two",
    )
    .await;
    let fence = b.membership.fence();
    b.gate.freeze_lease_writes.store(true, Ordering::SeqCst);
    let frozen = Instant::now();
    let ended = tokio::time::timeout(5 * FENCE_LEASE, b.run)
        .await
        .unwrap()
        .unwrap();
    let fenced_after = frozen.elapsed();
    assert!(
        matches!(ended, Err(MembershipError::LostLease { .. })),
        "{ended:?}"
    );
    assert!(fence.is_cancelled());
    // Fenced within the renew deadline (plus a retry), before the lease
    // could expire for anyone else.
    assert!(fenced_after < FENCE_LEASE, "fenced after {fenced_after:?}");
    // b's last successful renewal, as written (b writes no more): nobody
    // may drop b before a lease duration after it.
    let leases: Api<Lease> = Api::namespaced(env.client(), env.namespace());
    let renewed = leases
        .get("b")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.renew_time)
        .map(|t| std::time::SystemTime::from(t.0))
        .unwrap();
    all_see(&[&a], &["a"], 5 * FENCE_LEASE, "b dropped").await;
    let since = std::time::SystemTime::now()
        .duration_since(renewed)
        .unwrap_or_default();
    assert!(
        since >= FENCE_LEASE - RETRY,
        "b dropped {since:?} after its last renewal"
    );
    eprintln!(
        "sharding fence: fenced after {fenced_after:?}, dropped {since:?} after the last renewal"
    );
    a.stop.cancel();
    a.run.await.unwrap().unwrap();
}

/// Two replicas under a role with only `Permissions::sharded_leases()`
/// form a ring; with leader election's lease verbs alone they cannot
/// (no list or watch of the ring's Leases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_taken_by_another_ring_in_the_namespace_is_refused() {
    let env = TestEnv::start().await.unwrap();
    let first = join(&env, "it-one", "same");
    all_see(&[&first], &["same"], Duration::from_secs(10), "ring one").await;
    // A second ring in the same namespace, the same identity: its shard
    // Lease would be the first ring's.
    let second = join(&env, "it-two", "same");
    let ended = tokio::time::timeout(Duration::from_secs(10), second.run)
        .await
        .expect("the second membership stops")
        .unwrap();
    match ended {
        Err(MembershipError::IdentityTaken {
            lease, other_ring, ..
        }) => assert_eq!((lease.as_str(), other_ring.as_str()), ("same", "it-one")),
        other => panic!("expected IdentityTaken, got {other:?}"),
    }
    // The first ring still has its member.
    all_see(
        &[&first],
        &["same"],
        Duration::from_secs(10),
        "ring one kept",
    )
    .await;
    first.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_lease_rules_are_enough_and_needed() {
    use controller_runtime::rbac::Permissions;
    let env = TestEnv::start().await.unwrap();
    let start = |client: kube_client::Client, ring: &str, id: &str| {
        let mut config = ring_config(ring, id);
        config.namespace = env.namespace().to_owned();
        let membership = Membership::new(client, config).unwrap();
        let stop = CancellationToken::new();
        tokio::spawn({
            let (m, stop) = (membership.clone(), stop.clone());
            async move { m.run(stop).await }
        });
        (membership, stop)
    };
    let role = Permissions::new().sharded_leases().cluster_role("sharded");
    let client = env
        .client_with_cluster_role("default", "sharded", &role)
        .await
        .unwrap();
    let a = start(client.clone(), "it-rbac", "a");
    let b = start(client, "it-rbac", "b");
    eventually(
        Duration::from_secs(10),
        "a ring under the generated role",
        || async {
            (settled_with(&a.0.view(), &["a", "b"]) && settled_with(&b.0.view(), &["a", "b"]))
                .then_some(())
        },
    )
    .await;
    a.1.cancel();
    b.1.cancel();

    let narrow = Permissions::new().leases().cluster_role("leader-only");
    let client = env
        .client_with_cluster_role("default", "leader-only", &narrow)
        .await
        .unwrap();
    let c = start(client, "it-rbac-narrow", "c");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!c.0.view().settled(), "{:?}", c.0.view());
    c.1.cancel();
}

/// A GET over plain HTTP/1.1: the status and the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

/// The value of the sample of `name` carrying every label of `labels` in
/// a Prometheus text body.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.split_once("} ")?;
        labels
            .iter()
            .all(|(k, v)| set.split(',').any(|pair| pair == format!("{k}=\"{v}\"")))
            .then(|| value.trim().parse().ok())?
    })
}

async fn scrape(r: &crate::sharding_fleet::Replica) -> String {
    let (status, text) = http_get(r.mgr.metrics_addr().unwrap(), "/metrics").await;
    assert_eq!(status, 200, "{text}");
    text
}

const CONTROLLER: (&str, &str) = ("controller", "sharded-cm");

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn filter_mode_serves_objects_per_shard_and_each_survivor_times_the_reassignment_once() {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_client::Api;

    use crate::sharding_fleet::{
        NS, Setup, Timeline, all_reconciled, owners, start_replica_with, write_all,
    };

    const RING: &str = "it-reassign";
    const COUNT: &str = "sharding_reassign_seconds_count";
    const SUM: &str = "sharding_reassign_seconds_sum";
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let names: Vec<String> = (0..30).map(|i| format!("m{i}")).collect();
    write_all(&api, &names, "0").await;
    let timeline = Arc::new(Timeline::default());
    let setup = Setup {
        serve: true,
        ..Setup::default()
    };
    let mut replicas = Vec::new();
    for id in ["r1", "r2", "r3"] {
        let work = Duration::from_millis(5);
        let r = start_replica_with(&env, RING, id, &timeline, 2, work, setup.clone()).await;
        replicas.push(r);
    }
    all_reconciled(&timeline, &names, "0", Duration::from_secs(15))
        .await
        .unwrap();
    let shares = |members: &[&str]| -> BTreeMap<String, f64> {
        owners(members, &names)
            .into_values()
            .fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r).or_default() += 1.0;
                m
            })
    };
    // Objects per shard: each replica's gauge is its share by the ring.
    async fn owned_now(
        replicas: &[crate::sharding_fleet::Replica],
    ) -> Option<BTreeMap<String, f64>> {
        let mut seen = BTreeMap::new();
        for r in replicas {
            let owned = sample(&scrape(r).await, "sharding_owned_objects", &[CONTROLLER])?;
            seen.insert(r.id.clone(), owned);
        }
        Some(seen)
    }
    let want = shares(&["r1", "r2", "r3"]);
    let fleet = &replicas;
    eventually(
        Duration::from_secs(10),
        "objects per shard of three",
        move || {
            let want = want.clone();
            async move { owned_now(fleet).await.filter(|o| *o == want) }
        },
    )
    .await;
    // Every shard ready: each gate settled the ring of three.
    eventually(Duration::from_secs(10), "three shards ready", || async {
        for r in &replicas {
            let health = r.mgr.health_addr().unwrap();
            if http_get(health, "/readyz").await.0 != 200 {
                return None;
            }
        }
        Some(())
    })
    .await;
    // Nobody died yet: the histogram is there, empty.
    const MOVED_IN: &str = "sharding_keys_moved_in_total";
    let mut moved_before = 0.0;
    for r in &replicas {
        let text = scrape(r).await;
        let count = sample(&text, COUNT, &[CONTROLLER, ("mode", "filter")]);
        assert_eq!(count, Some(0.0), "{}:\n{text}", r.id);
        if r.id != "r2" {
            moved_before += sample(&text, MOVED_IN, &[CONTROLLER]).unwrap_or(-1.0);
        }
    }

    let r2 = replicas.remove(1);
    r2.kill();
    let killed = Instant::now();
    let observed = eventually(
        Duration::from_secs(10),
        "each survivor observed the reassignment",
        || {
            let replicas: Vec<_> = replicas.iter().collect();
            async move {
                let mut seen = Vec::new();
                for r in replicas {
                    let text = scrape(r).await;
                    let labels = [CONTROLLER, ("mode", "filter")];
                    let count = sample(&text, COUNT, &labels)?;
                    let sum = sample(&text, SUM, &labels)?;
                    if count < 1.0 {
                        return None;
                    }
                    seen.push((r.id.clone(), count, sum));
                }
                Some(seen)
            }
        },
    )
    .await;
    let since_kill = killed.elapsed();
    // r2's last renewal was seen at most a retry period (plus a write)
    // before the kill, so its Lease expired no earlier than that plus a
    // lease duration after it; whatever was observed fits in between.
    let latest = since_kill.as_secs_f64() - (LEASE - RETRY).as_secs_f64() + 0.1;
    for (id, count, seconds) in &observed {
        assert_eq!(*count, 1.0, "{id}: one dead member, one observation");
        assert!(
            *seconds >= 0.0 && *seconds < LEASE.as_secs_f64() && *seconds <= latest,
            "{id}: reassigned {seconds} s after the expiry, {since_kill:?} after the kill"
        );
    }
    // A survivor may have seen the last renewal a little later than the
    // sharder did (clamped to 0), but the sharder, which dropped r2 by its
    // own expiry, settled after its write and the acknowledgments.
    assert!(
        observed.iter().any(|(_, _, seconds)| *seconds > 0.0),
        "{observed:?}"
    );
    // The survivors now own everything between them, and a later scrape
    // still shows one observation each.
    let want = shares(&["r1", "r3"]);
    let fleet = &replicas;
    let owned = eventually(
        Duration::from_secs(10),
        "objects per shard of two",
        move || {
            let want = want.clone();
            async move { owned_now(fleet).await.filter(|o| *o == want) }
        },
    )
    .await;
    assert_eq!(owned.values().sum::<f64>(), names.len() as f64);
    // The moves: exactly r2's keys were queued on the survivors.
    let mut moved_after = 0.0;
    for r in &replicas {
        let text = scrape(r).await;
        moved_after += sample(&text, MOVED_IN, &[CONTROLLER]).unwrap_or(-1.0);
        let count = sample(&text, COUNT, &[CONTROLLER, ("mode", "filter")]);
        assert_eq!(count, Some(1.0), "{}:\n{text}", r.id);
    }
    let r2_share = shares(&["r1", "r2", "r3"]).get("r2").copied();
    assert_eq!(Some(moved_after - moved_before), r2_share);
    eprintln!(
        "filter mode: time to reassign after a kill (lease {LEASE:?}, retry {RETRY:?}): {:?}; \
         all observed {since_kill:?} after the kill; objects per shard {owned:?}",
        observed
            .iter()
            .map(|(id, _, s)| format!("{id} {s:.3} s"))
            .collect::<Vec<_>>()
    );
    for r in replicas {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
}

/// A replica whose caches synced but which cannot write its shard Lease
/// (its role lacks the Lease writes) is not ready, by its
/// `shard-<controller>` check alone; granted the writes, it joins the ring
/// and becomes ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sharded_controller_is_ready_only_once_its_replica_is_in_a_settled_epoch() {
    use controller_runtime::rbac::Permissions;

    use crate::sharding_fleet::{Setup, Timeline, start_replica_with};

    let env = TestEnv::start().await.unwrap();
    let reads = || {
        Permissions::new()
            .rule("", "configmaps", ["get", "list", "watch"])
            .rule("coordination.k8s.io", "leases", ["get", "list", "watch"])
    };
    let client = env
        .client_with_cluster_role(
            "default",
            "shard-ready",
            &reads().cluster_role("shard-ready"),
        )
        .await
        .unwrap();
    let setup = Setup {
        serve: true,
        client: Some(client),
        ..Setup::default()
    };
    let timeline = Arc::new(Timeline::default());
    let work = Duration::from_millis(5);
    let r = start_replica_with(&env, "it-ready", "a", &timeline, 1, work, setup).await;
    let health = r.mgr.health_addr().unwrap();
    eventually(Duration::from_secs(10), "caches synced", || async {
        (http_get(health, "/readyz/caches%20synced").await.0 == 200).then_some(())
    })
    .await;
    // Several join attempts (one per retry period) fail meanwhile.
    let deadline = Instant::now() + 3 * RETRY;
    while Instant::now() < deadline {
        let (status, body) = http_get(health, "/readyz?verbose").await;
        assert_eq!(status, 500, "{body}");
        assert!(body.contains("[+]caches synced ok"), "{body}");
        assert!(body.contains("[-]shard-sharded-cm failed"), "{body}");
        tokio::time::sleep(RETRY / 2).await;
    }
    assert_eq!(http_get(health, "/readyz/shard-sharded-cm").await.0, 500);

    let granted = reads().sharded_leases().cluster_role("shard-ready");
    env.client_with_cluster_role("default", "shard-ready", &granted)
        .await
        .unwrap();
    let body = eventually(Duration::from_secs(10), "ready once joined", || async {
        let (status, body) = http_get(health, "/readyz?verbose").await;
        (status == 200).then_some(body)
    })
    .await;
    assert!(body.contains("[+]shard-sharded-cm ok"), "{body}");
    assert!(settled_with(&r.membership.view(), &["a"]));
    r.stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
}
