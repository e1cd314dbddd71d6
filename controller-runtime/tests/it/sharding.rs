//! Shard membership on a real (in-process) server: replicas join a ring,
//! the sharder moves it from epoch to epoch, a replica that leaves is gone
//! at once, one that dies is dropped after its Lease expires, and a replica
//! whose Lease writes fail fences itself before anyone takes its keys.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use controller_runtime::sharding::config::ShardingConfig;
use controller_runtime::sharding::membership::{Membership, MembershipError};
use controller_runtime::sharding::view::RingView;
use envtest::TestEnv;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::chaos::gate::{GateLayer, GateState};
use crate::eventually;

pub const LEASE: Duration = Duration::from_secs(1);
pub const RENEW: Duration = Duration::from_millis(600);
pub const RETRY: Duration = Duration::from_millis(200);

/// A ring config with short timings, for tests.
pub fn ring_config(ring: &str, id: &str) -> ShardingConfig {
    ShardingConfig::new("default", ring)
        .identity(id)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
}

struct Member {
    membership: Membership,
    gate: Arc<GateState>,
    stop: CancellationToken,
    run: JoinHandle<Result<(), MembershipError>>,
}

fn join(env: &TestEnv, ring: &str, id: &str) -> Member {
    let gate = Arc::new(GateState::default());
    let client = kube_client::client::ClientBuilder::try_from(env.client_config())
        .unwrap()
        .with_layer(&GateLayer(Arc::clone(&gate)))
        .build();
    let membership = Membership::new(client, ring_config(ring, id)).unwrap();
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
    view.settled() && view.ring.members() == members
}

async fn all_see(members: &[&Member], expect: &[&str], within: Duration, what: &str) -> u64 {
    eventually(within, what, || async {
        let views: Vec<RingView> = members.iter().map(|m| m.membership.view()).collect();
        let epoch = views[0].epoch;
        views
            .iter()
            .all(|v| v.epoch == epoch && settled_with(v, expect))
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

    // A graceful leave deletes the Lease: gone well within a lease duration.
    let left = Instant::now();
    c.stop.cancel();
    c.run.await.unwrap().unwrap();
    let second = all_see(&[&a, &b], &["a", "b"], Duration::from_secs(5), "c left").await;
    assert!(second > first);
    let leave_took = left.elapsed();
    assert!(leave_took < LEASE, "leaving took {leave_took:?}");

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_cannot_renew_fences_itself_before_its_lease_expires() {
    let env = TestEnv::start().await.unwrap();
    let a = join(&env, "it-fence", "a");
    let b = join(&env, "it-fence", "b");
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
    let ended = tokio::time::timeout(Duration::from_secs(5), b.run)
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
    assert!(fenced_after < LEASE, "fenced after {fenced_after:?}");
    all_see(&[&a], &["a"], Duration::from_secs(5), "b dropped").await;
    assert!(frozen.elapsed() >= LEASE - RETRY);
    a.stop.cancel();
    a.run.await.unwrap().unwrap();
}

/// Two replicas under a role with only `Permissions::sharded_leases()`
/// form a ring; with leader election's lease verbs alone they cannot
/// (no list or watch of the ring's Leases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_lease_rules_are_enough_and_needed() {
    use controller_runtime::rbac::Permissions;
    let env = TestEnv::start().await.unwrap();
    let start = |client: kube_client::Client, ring: &str, id: &str| {
        let membership = Membership::new(client, ring_config(ring, id)).unwrap();
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
