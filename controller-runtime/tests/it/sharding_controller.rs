//! A sharded controller on three, then two, then three replicas: each
//! object is reconciled by its owner only, never by two replicas at once;
//! a dead replica's objects are reconciled elsewhere within about a lease
//! duration; a replica that joins takes over about 1/N of the keys, which
//! it reconciles without any change to them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use tokio::time::Instant;

use crate::sharding::LEASE;
use crate::sharding_fleet::{
    NS, Timeline, all_reconciled, check_no_overlap, last_seen, owners, start_replica, write_all,
};

const RING: &str = "it-sharded";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_object_is_reconciled_by_its_owner_and_handed_over_when_replicas_come_and_go() {
    let env = envtest::TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let names: Vec<String> = (0..30).map(|i| format!("s{i}")).collect();
    write_all(&api, &names, "0").await;
    let timeline = Arc::new(Timeline::default());
    let work = Duration::from_millis(20);
    let mut replicas = Vec::new();
    for id in ["r1", "r2", "r3"] {
        replicas.push(start_replica(&env, RING, id, &timeline, 2, work).await);
    }
    all_reconciled(&timeline, &names, "0", Duration::from_secs(15))
        .await
        .unwrap();

    // A change to every object: each is reconciled by its owner alone.
    let mark = Instant::now();
    write_all(&api, &names, "1").await;
    all_reconciled(&timeline, &names, "1", Duration::from_secs(10))
        .await
        .unwrap();
    let expected = owners(&["r1", "r2", "r3"], &names);
    for s in timeline.spans.lock().iter().filter(|s| s.start >= mark) {
        assert_eq!(
            expected.get(&s.key),
            Some(&s.replica),
            "{} reconciled by a replica that does not own it",
            s.key
        );
    }
    let per_replica: BTreeMap<&String, usize> =
        expected.values().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r).or_default() += 1;
            m
        });
    assert_eq!(
        per_replica.len(),
        3,
        "every replica owns some: {per_replica:?}"
    );

    // r2 dies: its objects are reconciled elsewhere after its lease expires.
    let r2 = replicas.remove(1);
    let r2_keys: Vec<String> = expected
        .iter()
        .filter(|(_, r)| *r == "r2")
        .map(|(k, _)| k.trim_start_matches("default/").to_string())
        .collect();
    r2.kill();
    let died = Instant::now();
    write_all(&api, &names, "2").await;
    all_reconciled(&timeline, &r2_keys, "2", Duration::from_secs(10))
        .await
        .unwrap();
    let handover = died.elapsed();
    all_reconciled(&timeline, &names, "2", Duration::from_secs(10))
        .await
        .unwrap();
    let now_owners = owners(&["r1", "r3"], &names);
    let last = last_seen(&timeline);
    for name in &r2_keys {
        let key = format!("{NS}/{name}");
        assert_eq!(last.get(&key).map(|(r, _)| r), now_owners.get(&key));
    }

    // r4 joins: the keys that move to it are reconciled by it, unchanged.
    let joined = Instant::now();
    replicas.push(start_replica(&env, RING, "r4", &timeline, 2, work).await);
    let grown = owners(&["r1", "r3", "r4"], &names);
    let moved: BTreeSet<&String> = grown
        .iter()
        .filter(|(k, r)| now_owners.get(*k) != Some(*r))
        .map(|(k, _)| k)
        .collect();
    assert!(
        moved
            .iter()
            .all(|k| grown.get(*k).map(String::as_str) == Some("r4"))
    );
    crate::eventually(
        Duration::from_secs(10),
        "r4 reconciles the keys that moved to it",
        || async {
            let by_r4: BTreeSet<String> = timeline
                .spans
                .lock()
                .iter()
                .filter(|s| s.replica == "r4" && s.end.is_some() && s.start >= joined)
                .map(|s| s.key.clone())
                .collect();
            moved.iter().all(|k| by_r4.contains(*k)).then_some(())
        },
    )
    .await;
    let scale_up = joined.elapsed();
    let r4_foreign: Vec<String> = timeline
        .spans
        .lock()
        .iter()
        .filter(|s| s.replica == "r4" && !moved.contains(&s.key))
        .map(|s| s.key.clone())
        .collect();
    assert!(
        r4_foreign.is_empty(),
        "r4 reconciled keys it does not own: {r4_foreign:?}"
    );

    check_no_overlap(&timeline).unwrap();
    eprintln!(
        "sharded controller: {} objects; owners {per_replica:?}; after a replica died its \
         {} objects were reconciled elsewhere within {handover:?} (lease {LEASE:?}); \
         a fourth replica took {} of {} keys ({:.0} %, expected about 33 %) within {scale_up:?}",
        names.len(),
        r2_keys.len(),
        moved.len(),
        names.len(),
        100.0 * moved.len() as f64 / names.len() as f64
    );
    for r in replicas {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
}
