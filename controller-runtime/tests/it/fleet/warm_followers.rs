//! Members' informers run on every replica, not only the leader's: two
//! managers share a hub Lease and a member; the follower's member caches
//! (the fleet controller's own kinds, the kind it is for and the one it
//! owns by metadata, and a fleet-wide index's kind) are synced while it
//! does not lead, and when the leader stops, the new leader reconciles the
//! member without listing any of those kinds again.

use std::time::Duration;

use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::Manager;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};

use super::LONG;
use super::fixture::{Seen, create, fleet_manager_builder, hub_and_member};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// A manager on `hub`, leading or not, with the fleet controller `warm`
/// noting what it reconciled in `seen` as `<id>:<name>`.
async fn replica(hub: &TestEnv, member: &TestEnv, id: &'static str, seen: &Seen) -> Manager {
    let election = LeaderElectionConfig::new(hub.namespace(), "fleet-warm", id)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(200));
    let mgr = fleet_manager_builder(hub)
        .leader_election(election)
        .build()
        .await
        .unwrap();
    // Registered on the fleet: its informer is requested in every member
    // as it is engaged, on every replica.
    mgr.fleet()
        .index_field::<Secret>("metadata.name", |s| {
            s.metadata.name.clone().into_iter().collect()
        })
        .unwrap();
    // The controller's own kinds are warmed on every replica as it is
    // built, whether it leads or not.
    mgr.fleet_controller::<ConfigMap>()
        .named("warm")
        .owns_metadata::<ServiceAccount>()
        .complete(seen.as_replica(&format!("{id}:")))
        .unwrap();
    mgr.fleet().engage("member", member.client()).unwrap();
    mgr
}

/// The kinds whose lists are counted: the controller's For kind, the
/// kind it owns by metadata, the fleet-wide index's kind.
const KINDS: [&str; 3] = ["configmaps", "serviceaccounts", "secrets"];

/// The requests that list the member's objects of each of [`KINDS`]: a
/// LIST, or a watch that starts with the initial state (a streaming list).
fn lists(member: &TestEnv) -> Vec<(&'static str, usize)> {
    let log = member.request_log();
    KINDS
        .iter()
        .map(|kind| {
            let n = log
                .iter()
                .filter(|r| r.method.as_str() == "GET" && r.path.ends_with(kind))
                .filter(|r| !r.is_watch() || r.query.contains("sendInitialEvents=true"))
                .count();
            (*kind, n)
        })
        .collect()
}

#[tokio::test]
async fn a_new_leader_finds_its_members_caches_warm() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (hub, member) = hub_and_member().await;
    let seen = Seen::default();
    let a = replica(&hub, &member, "a", &seen).await;
    let (stop_a, run_a) = spawn_manager(&a);
    eventually(LONG, "a leads", || async { a.is_leader().then_some(()) }).await;
    let b = replica(&hub, &member, "b", &seen).await;
    let (stop_b, run_b) = spawn_manager(&b);

    create(&member, "before").await;
    eventually(LONG, "the leader reconciles", || async {
        seen.has("a:before").then_some(())
    })
    .await;
    // The follower's member caches hold the object, synced, while it does
    // not lead (and reconciles nothing): its informers of every kind were
    // listed once each.
    // (Read through the factory: asking the cache for an informer would
    // request it.)
    eventually(LONG, "the follower's member caches warm", || async {
        let cluster = b.fleet().get("member")?;
        let started = cluster.informer_factory().synced();
        let warm = [
            "ConfigMap ",
            "PartialObjectMeta<ServiceAccount> ",
            "Secret ",
        ]
        .iter()
        .all(|kind| {
            started
                .iter()
                .any(|(k, synced)| k.starts_with(kind) && *synced)
        });
        let informer = cluster.cache().informer::<ConfigMap>();
        (warm && informer.get(Some("default"), "before").is_some()).then_some(())
    })
    .await;
    assert!(!b.is_leader());
    assert_eq!(seen.count("b:"), 0, "the follower reconciles nothing");
    let before = lists(&member);
    assert!(
        before.iter().all(|(_, n)| *n >= 2),
        "each replica listed each kind: {before:?}"
    );

    stop_manager(stop_a, run_a).await;
    eventually(LONG, "b leads", || async { b.is_leader().then_some(()) }).await;
    create(&member, "after").await;
    eventually(LONG, "the new leader reconciles", || async {
        (seen.has("b:before") && seen.has("b:after")).then_some(())
    })
    .await;
    assert_eq!(
        lists(&member),
        before,
        "the new leader listed the member's objects again"
    );
    stop_manager(stop_b, run_b).await;
}
