//! A field index registered once on the fleet applies to every member's
//! cache (members engaged before the manager runs, after, and one
//! registered when members are attached already), so `matching_field`
//! lists by it in any member.

use std::collections::BTreeMap;

use controller_runtime::cache::{CacheError, ListOptions};
use controller_runtime::manager::Manager;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::PostParams;

use super::fixture::{fleet_manager, servers};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

async fn create(env: &TestEnv, name: &str, team: &str, color: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some(BTreeMap::from([
        ("team".into(), team.into()),
        ("color".into(), color.into()),
    ]));
    api.create(&PostParams::default(), &cm).await.unwrap();
}

fn data_of(key: &'static str) -> impl Fn(&ConfigMap) -> Vec<String> + Send + Sync + 'static {
    move |cm| {
        cm.data
            .as_ref()
            .and_then(|d| d.get(key).cloned())
            .into_iter()
            .collect()
    }
}

/// The names in member `cluster` whose indexed `field` is `value`.
async fn matching(mgr: &Manager, cluster: &str, field: &str, value: &str) -> Option<Vec<String>> {
    let member = mgr.fleet().get(cluster)?;
    let options = ListOptions::new().matching_field(field, value);
    let found = member.cache().list::<ConfigMap>(&options).await.ok()?;
    let mut names: Vec<String> = found
        .iter()
        .filter_map(|cm| cm.metadata.name.clone())
        .collect();
    names.sort();
    Some(names)
}

#[tokio::test]
async fn a_fleet_wide_field_index_lists_by_field_in_every_member() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let [own, early, late] = servers().await;
    for (env, prefix) in [(&early, "e"), (&late, "l")] {
        create(env, &format!("{prefix}-a1"), "a", "red").await;
        create(env, &format!("{prefix}-a2"), "a", "blue").await;
        create(env, &format!("{prefix}-b1"), "b", "red").await;
    }
    let mgr = fleet_manager(&own).await;
    mgr.fleet()
        .index_field::<ConfigMap>("data.team", data_of("team"))
        .unwrap();
    assert!(
        matches!(
            mgr.fleet()
                .index_field::<ConfigMap>("data.team", data_of("team")),
            Err(CacheError::Index { .. })
        ),
        "one index of a name per kind"
    );
    mgr.fleet().engage("early", early.client()).unwrap();
    let (stop, task) = spawn_manager(&mgr);
    mgr.fleet().engage("late", late.client()).unwrap();

    for (cluster, prefix) in [("early", "e"), ("late", "l")] {
        let want = vec![format!("{prefix}-a1"), format!("{prefix}-a2")];
        let found = eventually(LONG, "the members listed by team", || async {
            matching(&mgr, cluster, "data.team", "a")
                .await
                .filter(|names| *names == want)
        })
        .await;
        assert_eq!(found, want, "{cluster}");
    }
    eventually(LONG, "both members ready", || async {
        (ready(&mgr, "early") && ready(&mgr, "late")).then_some(())
    })
    .await;

    // Registered while both members run: added to their caches as they are.
    mgr.fleet()
        .index_field::<ConfigMap>("data.color", data_of("color"))
        .unwrap();
    for (cluster, prefix) in [("early", "e"), ("late", "l")] {
        let found = matching(&mgr, cluster, "data.color", "red").await;
        assert_eq!(
            found,
            Some(vec![format!("{prefix}-a1"), format!("{prefix}-b1")]),
            "{cluster}"
        );
    }
    stop_manager(stop, task).await;
}
