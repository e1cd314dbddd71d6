//! A member is `Ready` only when it answers, its informers have synced and
//! they may list: one whose lists fail (500s from its API server) answers
//! `/version` all along yet stays `Pending`, is reported `Failing` once the
//! manager's cache-sync timeout passes, and is `Ready` once its lists go
//! through.

use std::time::Duration;

use controller_runtime::cluster::ClusterHealth;
use envtest::FailureRule;

use super::fixture::{
    Nothing, configmap_controller, fleet_manager_builder, hub_and_member, version_looks,
};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// Runs a manager whose fleet controller watches ConfigMaps in a member
/// whose ConfigMap lists and watches fail, with the cache-sync timeout `sync_timeout`;
/// checks the member is never `Ready` over ten looks, then lets the lists
/// through and sees it `Ready`. Returns the health seen last before that.
async fn unsynced_member(sync_timeout: Duration) -> ClusterHealth {
    let (own, member) = hub_and_member().await;
    // Lists and watches alike (a streaming list is a watch).
    member
        .faults()
        .fail_next(FailureRule::new(1_000_000, 500).path_contains("configmaps"));
    let mgr = fleet_manager_builder(&own)
        .cache_sync_timeout(sync_timeout)
        .build()
        .await
        .unwrap();
    configmap_controller(&mgr, "nothing", Nothing);
    mgr.fleet().readyz_threshold(0);
    let (stop, task) = spawn_manager(&mgr);
    let cluster = mgr.fleet().engage("member", member.client()).unwrap();

    eventually(LONG, "the member's informer started", || async {
        (!cluster.informer_factory().is_empty()).then_some(())
    })
    .await;
    // Ten looks (each asks for the version, answered) after the informer
    // started: never ready, since it cannot sync.
    let from = version_looks(&member);
    let last = eventually(LONG, "ten looks at the answering member", || async {
        let health = mgr.fleet().health("member").unwrap();
        assert!(!health.is_ready(), "ready while its informer cannot list");
        (version_looks(&member) >= from + 10).then_some(health)
    })
    .await;
    assert!(
        mgr.readyz_checks()
            .run_one("fleet clusters")
            .unwrap()
            .is_err()
    );

    member.faults().clear_failures();
    eventually(
        LONG,
        "the member ready once its informer synced",
        || async { ready(&mgr, "member").then_some(()) },
    )
    .await;
    assert_eq!(mgr.readyz_checks().run_one("fleet clusters"), Some(Ok(())));
    stop_manager(stop, task).await;
    last
}

#[tokio::test]
async fn a_member_whose_informers_have_not_synced_is_pending() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    assert_eq!(unsynced_member(LONG * 5).await, ClusterHealth::Pending);
}

#[tokio::test]
async fn a_member_whose_informers_do_not_sync_in_time_is_failing() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    // Ten looks at 100 ms take about a second: well past this.
    let last = unsynced_member(Duration::from_millis(200)).await;
    assert!(
        matches!(&last, ClusterHealth::Failing { error, .. } if error.contains("not synced within")),
        "{last:?}"
    );
}
