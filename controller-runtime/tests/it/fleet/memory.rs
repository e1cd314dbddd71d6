//! A member's informers report `informer_*{cluster}` series, removed when
//! it is disengaged. A disengaged cluster's memory is returned: once the
//! fleet lets it go,
//! nothing (the fleet, a fleet controller's member list, its handlers, the
//! informers' tasks) holds its cache, so the objects its store held are
//! freed. Observed through a `Weak` to a cached object, not a timing.

use std::sync::Arc;

use controller_runtime::prelude::*;
use k8s_openapi::api::core::v1::ConfigMap;

use super::fixture::{Nothing, configmap_controller, hub_member_manager};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

#[tokio::test]
async fn a_disengaged_clusters_series_go_and_its_cached_objects_are_freed() {
    let Some((_own, member, mgr)) = hub_member_manager().await else {
        return;
    };
    configmap_controller(&mgr, "nothing", Nothing);
    let (stop, task) = spawn_manager(&mgr);
    Api::<ConfigMap>::namespaced(member.client(), member.namespace())
        .create(
            &PostParams::default(),
            &crate::config_map(member.namespace(), "held"),
        )
        .await
        .unwrap();
    mgr.fleet().engage("m", member.client()).unwrap();
    eventually(LONG, "m answers", || async {
        ready(&mgr, "m").then_some(())
    })
    .await;
    let cached = {
        let cluster = mgr.fleet().get("m").unwrap();
        eventually(LONG, "the object in m's cache", || async {
            cluster
                .cache()
                .get::<ConfigMap>(Some(member.namespace()), "held")
                .await
                .ok()
                .flatten()
        })
        .await
    };
    let weak = Arc::downgrade(&cached);
    drop(cached);
    assert!(weak.upgrade().is_some(), "m's store holds it while engaged");
    // m's informers report under its name; the hub's under "".
    let metrics = mgr.metrics().encode().unwrap();
    assert!(
        metrics.contains("informer_lists_total{cluster=\"m\",informer="),
        "{metrics}"
    );

    assert!(mgr.fleet().disengage("m").await);
    let metrics = mgr.metrics().encode().unwrap();
    assert!(
        !metrics.contains("cluster=\"m\""),
        "m's series removed: {metrics}"
    );
    // The controller lets go of the cluster when it sees it leave.
    eventually(LONG, "m's store dropped", || async {
        weak.upgrade().is_none().then_some(())
    })
    .await;
    assert!(!task.is_finished());
    stop_manager(stop, task).await;
}
