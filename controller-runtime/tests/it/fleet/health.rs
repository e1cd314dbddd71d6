//! A member is `Ready` only when it answers, its informers have synced and
//! they may list: one whose lists fail (500s from its API server) answers
//! `/version` all along yet stays `Pending`, is reported `Failing` once the
//! manager's cache-sync timeout passes, and is `Ready` once its lists go
//! through.

use std::time::Duration;

use controller_runtime::cluster::ClusterHealth;
use controller_runtime::manager::Manager;
use controller_runtime::prelude::*;
use envtest::{FailureRule, TestEnv};
use k8s_openapi::api::core::v1::ConfigMap;

use super::{LONG, fast_backoff, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

struct Nothing;

impl ObjectReconciler<ConfigMap> for Nothing {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        _: std::sync::Arc<ConfigMap>,
        _: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

fn version_looks(member: &TestEnv) -> usize {
    member
        .request_log()
        .iter()
        .filter(|r| r.path.starts_with("/version"))
        .count()
}

/// Runs a manager whose fleet controller watches ConfigMaps in a member
/// whose ConfigMap lists and watches fail, with the cache-sync timeout `sync_timeout`;
/// checks the member is never `Ready` over ten looks, then lets the lists
/// through and sees it `Ready`. Returns the health seen last before that.
async fn unsynced_member(sync_timeout: Duration) -> ClusterHealth {
    let own = TestEnv::start().await.unwrap();
    let member = TestEnv::start().await.unwrap();
    // Lists and watches alike (a streaming list is a watch).
    member
        .faults()
        .fail_next(FailureRule::new(1_000_000, 500).path_contains("configmaps"));
    let mgr = Manager::builder(own.client())
        .fleet_backoff(fast_backoff())
        .cache_sync_timeout(sync_timeout)
        .build()
        .await
        .unwrap();
    mgr.fleet_controller::<ConfigMap>()
        .named("nothing")
        .complete(Nothing)
        .unwrap();
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
