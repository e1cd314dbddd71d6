//! SharedIndexInformer against envtest (real clock, condition waits):
//! initial sync, live events, late handler, slow and panicking handlers,
//! transform, removal, resync, sync timeout, and cache == fresh LIST after a
//! burst with dropped watches and compaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envtest::TestEnv;
use informer_core::delta_fifo::Transform;
use informer_core::shared_informer::{InformerError, handler_fn};
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;

use crate::common::*;

#[tokio::test]
async fn initial_sync_fills_the_cache_and_reports_initial_adds() {
    let (_env, client) = env_with(&["ns1"]).await;
    for i in 0..20 {
        create(&client, "ns1", &format!("cm{i:02}"), &[]).await;
    }
    let informer = informer(&client, Duration::ZERO);
    let rec = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(rec.clone()).unwrap();
    assert!(!informer.has_synced());
    assert!(informer.last_sync_resource_version().is_none());
    let stop = spawn(&informer);

    informer.wait_for_cache_sync(LIMIT).await.unwrap();
    assert_eq!(informer.indexer().len(), 20);
    assert!(reg.wait_for_sync(LIMIT).await);
    assert_eq!(rec.count("add:"), 20);
    assert_eq!(
        rec.count("add:"),
        rec.seen().iter().filter(|s| s.ends_with(":true")).count()
    );
    assert!(
        informer
            .last_sync_resource_version()
            .is_some_and(|rv| !rv.is_empty())
    );
    // The cache holds exactly what the server lists.
    let mut cached: Vec<String> = informer
        .indexer()
        .list()
        .iter()
        .map(|o| key_rv(o))
        .collect();
    cached.sort();
    assert_eq!(cached, fresh_list(&client).await);
    stop.cancel();
}

#[tokio::test]
async fn live_changes_reach_handlers_in_order() {
    let (_env, client) = env_with(&["ns1"]).await;
    let informer = informer(&client, Duration::ZERO);
    let rec = Arc::new(Recorder::default());
    informer.add_event_handler(rec.clone()).unwrap();
    let stop = run_synced(&informer).await;

    let created = create(&client, "ns1", "a", &[]).await;
    let updated = set_value(&client, "ns1", "a", "1").await;
    delete_cm(&client, "ns1", "a").await;
    eventually("add, update, delete seen", || rec.len() == 3).await;
    assert_eq!(
        rec.seen(),
        vec![
            "add:a:false".to_string(),
            format!(
                "update:a:{}->{}",
                created.metadata.resource_version.unwrap(),
                updated.metadata.resource_version.unwrap()
            ),
            "delete:a".to_string(),
        ]
    );
    assert!(informer.indexer().get_by_key("ns1/a").is_none());
    stop.cancel();
}

#[tokio::test]
async fn a_late_handler_first_gets_the_cache_then_live_changes() {
    let (_env, client) = env_with(&["ns1"]).await;
    for i in 0..10 {
        create(&client, "ns1", &format!("cm{i}"), &[]).await;
    }
    let informer = informer(&client, Duration::ZERO);
    let stop = run_synced(&informer).await;

    let late = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(late.clone()).unwrap();
    assert!(reg.wait_for_sync(LIMIT).await);
    assert_eq!(late.count("add:"), 10);
    assert!(late.seen().iter().all(|s| s.ends_with(":true")));

    create(&client, "ns1", "after", &[]).await;
    eventually("live add after replay", || late.len() == 11).await;
    assert_eq!(late.seen().last().unwrap(), "add:after:false");
    stop.cancel();
}

#[tokio::test]
async fn a_blocked_handler_does_not_block_the_informer_or_other_handlers() {
    let (_env, client) = env_with(&["ns1"]).await;
    let informer = informer(&client, Duration::ZERO);
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let slow_calls = Arc::new(AtomicUsize::new(0));
    let slow = handler_fn::<ConfigMap>().on_add({
        let slow_calls = slow_calls.clone();
        move |_, _| {
            slow_calls.fetch_add(1, Ordering::SeqCst);
            let _ = gate.lock().recv();
        }
    });
    let slow_reg = informer.add_event_handler(slow).unwrap();
    let fast = Arc::new(Recorder::default());
    informer.add_event_handler(fast.clone()).unwrap();
    let stop = run_synced(&informer).await;

    for i in 0..15 {
        create(&client, "ns1", &format!("cm{i}"), &[]).await;
    }
    eventually("fast handler saw all adds", || fast.count("add:") == 15).await;
    eventually("cache has all objects", || informer.indexer().len() == 15).await;
    assert_eq!(
        slow_calls.load(Ordering::SeqCst),
        1,
        "slow handler is stuck on its first call"
    );
    assert_eq!(slow_reg.pending(), 15);

    for _ in 0..15 {
        release.send(()).unwrap();
    }
    eventually("slow handler caught up", || slow_reg.pending() == 0).await;
    assert_eq!(slow_calls.load(Ordering::SeqCst), 15);
    stop.cancel();
}

#[tokio::test]
async fn a_panicking_handler_keeps_receiving_notifications() {
    let (_env, client) = env_with(&["ns1"]).await;
    let informer = informer(&client, Duration::ZERO);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let panicky = handler_fn::<ConfigMap>().on_add({
        let seen = seen.clone();
        move |obj, _| {
            let n = name(&obj);
            if n.starts_with("boom") {
                panic!("handler refuses {n}");
            }
            seen.lock().push(n);
        }
    });
    let reg = informer.add_event_handler(panicky).unwrap();
    let stop = run_synced(&informer).await;

    for n in ["a", "boom1", "b", "boom2", "c"] {
        create(&client, "ns1", n, &[]).await;
    }
    eventually("non-panicking adds delivered", || seen.lock().len() == 3).await;
    assert_eq!(*seen.lock(), vec!["a", "b", "c"]);
    assert_eq!(reg.panics(), 2);
    stop.cancel();
}

#[tokio::test]
async fn the_transform_applies_to_cache_and_handlers_and_is_fixed_at_start() {
    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "before", &[]).await;
    let informer = informer(&client, Duration::ZERO);
    let drop_data: Transform<ConfigMap> = Arc::new(|mut cm: ConfigMap| {
        cm.data = None;
        cm.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("transformed".into(), "yes".into());
        cm
    });
    informer.set_transform(drop_data.clone()).unwrap();
    let handler_saw_transformed = Arc::new(AtomicUsize::new(0));
    informer
        .add_event_handler(handler_fn::<ConfigMap>().on_add({
            let n = handler_saw_transformed.clone();
            move |obj, _| {
                if obj.data.is_none() {
                    n.fetch_add(1, Ordering::SeqCst);
                }
            }
        }))
        .unwrap();
    let stop = run_synced(&informer).await;
    create(&client, "ns1", "after", &[]).await;
    eventually("both adds transformed", || {
        handler_saw_transformed.load(Ordering::SeqCst) == 2
    })
    .await;
    for obj in informer.indexer().list() {
        assert!(obj.data.is_none());
        assert_eq!(
            obj.metadata
                .annotations
                .as_ref()
                .unwrap()
                .get("transformed")
                .unwrap(),
            "yes"
        );
    }
    assert!(matches!(
        informer.set_transform(drop_data),
        Err(InformerError::AlreadyStarted { .. })
    ));
    assert!(matches!(
        informer.set_watch_error_handler(Arc::new(|_| {})),
        Err(InformerError::AlreadyStarted { .. })
    ));
    stop.cancel();
}

#[tokio::test]
async fn a_removed_handler_receives_nothing_more() {
    let (_env, client) = env_with(&["ns1"]).await;
    let informer = informer(&client, Duration::ZERO);
    let removed = Arc::new(Recorder::default());
    let kept = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(removed.clone()).unwrap();
    informer.add_event_handler(kept.clone()).unwrap();
    let stop = run_synced(&informer).await;

    create(&client, "ns1", "one", &[]).await;
    eventually("both saw the first add", || {
        removed.len() == 1 && kept.len() == 1
    })
    .await;
    informer.remove_event_handler(&reg).unwrap();
    assert!(reg.is_removed());
    create(&client, "ns1", "two", &[]).await;
    create(&client, "ns1", "three", &[]).await;
    eventually("kept handler saw the later adds", || kept.len() == 3).await;
    assert_eq!(removed.seen(), vec!["add:one:false"]);
    stop.cancel();
}

#[tokio::test]
async fn resync_reaches_only_handlers_that_asked_for_it() {
    let (_env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    create(&client, "ns1", "b", &[]).await;
    let informer = informer(&client, Duration::ZERO);
    let resyncing = Arc::new(Recorder::default());
    let quiet = Arc::new(Recorder::default());
    informer
        .add_event_handler_with_resync(resyncing.clone(), Duration::from_secs(1))
        .unwrap();
    informer.add_event_handler(quiet.clone()).unwrap();
    assert_eq!(informer.resync_check_period(), Some(Duration::from_secs(1)));
    let stop = run_synced(&informer).await;

    eventually("two resync rounds delivered", || {
        resyncing.count("update:") >= 4
    })
    .await;
    for s in resyncing.seen().iter().filter(|s| s.starts_with("update:")) {
        let rvs = s.rsplit(':').next().unwrap();
        let (old, new) = rvs.split_once("->").unwrap();
        assert_eq!(old, new, "a resync carries the same resourceVersion: {s}");
    }
    assert_eq!(quiet.count("update:"), 0);
    // A real change still reaches everyone.
    set_value(&client, "ns1", "a", "changed").await;
    eventually("real update reaches the quiet handler", || {
        quiet.count("update:") == 1
    })
    .await;
    stop.cancel();
}

#[tokio::test]
async fn a_resync_period_below_the_minimum_is_raised() {
    let env = TestEnv::start().await.unwrap();
    let informer = informer(&env.client(), Duration::ZERO);
    informer
        .add_event_handler_with_resync(Recorder::default(), Duration::from_millis(10))
        .unwrap();
    assert_eq!(informer.resync_check_period(), Some(Duration::from_secs(1)));
}

#[tokio::test]
async fn wait_for_cache_sync_times_out_while_the_server_is_paused() {
    let env = TestEnv::start().await.unwrap();
    env.faults().pause();
    let informer = informer(&env.client(), Duration::ZERO);
    let stop = spawn(&informer);
    let err = informer
        .wait_for_cache_sync(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, InformerError::SyncTimeout(_)), "{err}");
    env.faults().resume();
    informer.wait_for_cache_sync(LIMIT).await.unwrap();
    stop.cancel();
}

#[tokio::test]
async fn a_stopped_informer_refuses_new_handlers() {
    let env = TestEnv::start().await.unwrap();
    let informer = informer(&env.client(), Duration::ZERO);
    let stop = run_synced(&informer).await;
    stop.cancel();
    eventually("informer stopped", || informer.is_stopped()).await;
    assert!(matches!(
        informer.add_event_handler(Recorder::default()),
        Err(InformerError::Stopped { .. })
    ));
}

#[tokio::test]
async fn after_quiescence_the_cache_equals_a_fresh_list() {
    let env = TestEnv::builder().history_window(64).start().await.unwrap();
    let client = env.client();
    for ns in ["ns1", "ns2"] {
        create_namespace(&client, ns).await;
    }
    for i in 0..30 {
        create(
            &client,
            if i % 2 == 0 { "ns1" } else { "ns2" },
            &format!("pre{i}"),
            &[],
        )
        .await;
    }
    let informer = informer(&client, Duration::ZERO);
    let rec = Arc::new(Recorder::default());
    informer.add_event_handler(rec.clone()).unwrap();
    let stop = run_synced(&informer).await;

    for round in 0..4 {
        for i in 0..25 {
            let ns = if i % 2 == 0 { "ns1" } else { "ns2" };
            create(&client, ns, &format!("r{round}-{i}"), &[]).await;
        }
        if round % 2 == 0 {
            env.faults().drop_watches();
        }
        for i in 0..25 {
            let ns = if i % 2 == 0 { "ns1" } else { "ns2" };
            set_value(&client, ns, &format!("r{round}-{i}"), "u").await;
        }
        if round == 1 {
            // Deletes and updates while the informer cannot resume: it must
            // relist and infer the deletes.
            env.faults().compact();
            env.faults().drop_watches();
        }
        for i in (0..25).step_by(3) {
            let ns = if i % 2 == 0 { "ns1" } else { "ns2" };
            delete_cm(&client, ns, &format!("r{round}-{i}")).await;
        }
        delete_cm(
            &client,
            if round % 2 == 0 { "ns1" } else { "ns2" },
            &format!("pre{round}"),
        )
        .await;
    }

    // Quiescence: nothing more changes on the server; the cache converges.
    let expected = fresh_list(&client).await;
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let mut cached: Vec<String> = informer
            .indexer()
            .list()
            .iter()
            .map(|o| key_rv(o))
            .collect();
        cached.sort();
        if cached == expected {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cache never matched the fresh LIST:\ncache: {cached:?}\nlist: {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The compaction forced at least one relist after the first list.
    // Lists are streaming lists (watches sending initial events) by default.
    let lists = env
        .request_log()
        .iter()
        .filter(|r| {
            r.method == http::Method::GET
                && r.path.ends_with("/configmaps")
                && (!r.is_watch() || r.query.contains("sendInitialEvents=true"))
        })
        .count();
    assert!(
        lists >= 2,
        "expected a relist after compaction, saw {lists} lists"
    );
    // Handlers saw as many net adds minus deletes as the cache holds.
    eventually("handler notifications settle", || {
        let adds = rec.count("add:");
        let deletes = rec.count("delete:");
        adds >= deletes && adds - deletes == expected.len()
    })
    .await;
    stop.cancel();
}

#[tokio::test]
async fn the_watch_error_handler_hears_failed_lists_and_the_informer_recovers() {
    use envtest::FailureRule;
    use informer_core::reflector::ReflectorError;

    let (env, client) = env_with(&["ns1"]).await;
    create(&client, "ns1", "a", &[]).await;
    env.faults().fail_next(
        FailureRule::new(1, 500)
            .method(http::Method::GET)
            .path_contains("configmaps")
            .watch(false),
    );
    let informer = listing_informer(&client, Duration::ZERO);
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    informer
        .set_watch_error_handler(Arc::new({
            let errors = errors.clone();
            move |err: &ReflectorError| {
                let kind = match err {
                    ReflectorError::List { .. } => "list",
                    ReflectorError::Watch { .. } => "watch",
                    _ => "other",
                };
                errors.lock().push(format!("{kind}: {err}"));
            }
        }))
        .unwrap();
    let stop = run_synced(&informer).await;
    assert_eq!(informer.indexer().len(), 1);
    let errors = errors.lock().clone();
    assert!(
        errors.first().is_some_and(|e| e.starts_with("list: ")),
        "{errors:?}"
    );
    stop.cancel();
}
