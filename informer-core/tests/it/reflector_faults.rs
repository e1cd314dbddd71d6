//! The Reflector under random writes and faults: whatever happens, once the
//! faults stop the store converges to a fresh LIST.

use std::time::Duration;

use envtest::{FailureRule, TestEnv};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};

use crate::common::*;
use crate::reflector::{run, until_mirror_equals_list};

/// Repeats `poke` (a fault such as dropping watches, which only acts on a
/// watch the server has already registered) until `cond` holds.
async fn poke_until(what: &str, poke: impl Fn(), cond: impl Fn() -> bool) {
    let attempt = async {
        loop {
            poke();
            for _ in 0..20 {
                if cond() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    if tokio::time::timeout(LIMIT, attempt).await.is_err() {
        panic!("timed out waiting until {what}");
    }
}

/// Random writes interleaved with every fault envtest offers (each fault
/// is repeated until the reflector reacted to it); once the faults stop,
/// the store converges to a fresh LIST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_random_faults_the_store_converges_to_a_list() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_millis(50))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "seed", 10).await;
    let r = run(api.clone(), |b| {
        b.backoff(informer_core::reflector::BackoffConfig {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(40),
            ..quick_backoff()
        })
    });
    r.until_synced().await;
    let m = r.metrics.clone();
    let grew = |label: &'static str, before: usize| {
        let m = m.clone();
        move || m.count(label) > before
    };
    let drop_watches = || env.faults().drop_watches();

    let seed = 0x5eed_u64;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut live: Vec<String> = (0..10).map(|i| format!("seed-{i:05}")).collect();
    let mut next = 0usize;
    for _ in 0..80 {
        let watches = m.count("watch");
        let lists = m.count("list");
        let refused = m.count("watch_restart:too_many_requests");
        let failed_lists = m.count("list_failed:InternalError");
        match rng.random_range(0..12) {
            0..=3 => {
                let name = format!("obj-{next}");
                next += 1;
                api.create(&PostParams::default(), &cm(&name, "0"))
                    .await
                    .unwrap();
                live.push(name);
            }
            4..=5 if !live.is_empty() => {
                let name = &live[rng.random_range(0..live.len())];
                let value = rng.random::<u32>().to_string();
                let patch = Patch::Merge(serde_json::json!({"data": {"v": value}}));
                api.patch(name, &PatchParams::default(), &patch)
                    .await
                    .unwrap();
            }
            6 if !live.is_empty() => {
                let name = live.swap_remove(rng.random_range(0..live.len()));
                delete(&api, &name).await;
            }
            7 => {
                poke_until(
                    "a dropped watch reopened",
                    drop_watches,
                    grew("watch", watches),
                )
                .await
            }
            8 => {
                // 429: back off and re-watch.
                env.faults()
                    .fail_next(FailureRule::new(1, 429).watch(true).retry_after(0));
                poke_until(
                    "a 429 was retried",
                    drop_watches,
                    grew("watch_restart:too_many_requests", refused),
                )
                .await;
            }
            9 => {
                // Any other watch error: back off and relist.
                env.faults().fail_next(FailureRule::new(1, 500).watch(true));
                poke_until("a watch 500 relisted", drop_watches, grew("list", lists)).await;
            }
            _ => {
                // Disconnected while an object changes and history is compacted:
                // the resumed watch gets 410 and the reflector relists (once
                // in three, that relist fails first and is retried).
                env.faults()
                    .fail_next(FailureRule::new(usize::MAX, 429).watch(true).retry_after(0));
                poke_until(
                    "the reflector is disconnected",
                    drop_watches,
                    grew("watch_restart:too_many_requests", refused),
                )
                .await;
                let name = format!("obj-{next}");
                next += 1;
                api.create(&PostParams::default(), &cm(&name, "0"))
                    .await
                    .unwrap();
                live.push(name);
                env.faults().compact();
                env.faults().clear_failures();
                let fail_relist = rng.random_range(0..3) == 0;
                if fail_relist {
                    env.faults().fail_next(
                        FailureRule::new(1, 500)
                            .method(http::Method::GET)
                            .watch(false)
                            .path_contains("configmaps"),
                    );
                }
                eventually("the reflector relisted", grew("list", lists)).await;
                if fail_relist {
                    assert!(m.count("list_failed:InternalError") > failed_lists);
                }
            }
        }
    }
    env.faults().clear_failures();
    until_mirror_equals_list(&r, &api).await;
    assert_eq!(r.mirror.snapshot().len(), live.len(), "seed {seed:#x}");
    eprintln!(
        "relists: expired {} error {}; watch restarts: closed {} 429 {}; lists {}; failed lists {}",
        m.count("relist:expired"),
        m.count("relist:error"),
        m.count("watch_restart:closed"),
        m.count("watch_restart:too_many_requests"),
        m.count("list"),
        m.count("list_failed:InternalError"),
    );
    assert!(
        m.count("relist:expired") >= 1,
        "the faults forced a relist after 410"
    );
    assert!(
        m.count("relist:error") >= 1,
        "the faults forced a relist after an error"
    );
    r.stop().await;
}
