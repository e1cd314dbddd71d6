//! Handlers added while the informer is busy, on a multi-threaded runtime:
//! a late handler's replay must be consistent with the notifications that
//! follow it (no update or delete it cannot place, no duplicate add, no
//! missed change), and a handler added while the informer stops must not be
//! left waiting for a sync that never comes.

use std::collections::HashMap;

use super::*;

/// Follows the cache through one handler's notifications and records every
/// notification it could not apply.
#[derive(Default)]
struct Mirror {
    view: Mutex<HashMap<String, String>>,
    violations: Mutex<Vec<String>>,
}

impl Mirror {
    fn violation(&self, what: String) {
        self.violations.lock().push(what);
    }
}

impl ResourceEventHandler<ConfigMap> for Mirror {
    fn on_add(&self, obj: Arc<ConfigMap>, _initial: bool) {
        let previous = self.view.lock().insert(nm(&obj).into(), rv(&obj).into());
        if let Some(previous) = previous {
            self.violation(format!("add of {} already seen at rv {previous}", nm(&obj)));
        }
    }
    fn on_update(&self, old: Arc<ConfigMap>, new: Arc<ConfigMap>) {
        let previous = self.view.lock().insert(nm(&new).into(), rv(&new).into());
        if previous.as_deref() != Some(rv(&old)) {
            self.violation(format!(
                "update of {} from rv {} but the handler had {previous:?}",
                nm(&new),
                rv(&old)
            ));
        }
    }
    fn on_delete(&self, obj: ObjectOrTombstone<ConfigMap>) {
        if self.view.lock().remove(nm(obj.object())).is_none() {
            self.violation(format!("delete of unseen {}", nm(obj.object())));
        }
    }
}

fn cache_view(inf: &SharedIndexInformer<ConfigMap>) -> HashMap<String, String> {
    inf.indexer()
        .list()
        .iter()
        .map(|o| (nm(o).to_string(), rv(o).to_string()))
        .collect()
}

/// Removing the lock that keeps a late handler's replay and the following
/// deltas apart (`block_deltas` in `add_event_handler`) makes this fail:
/// a change lands between the snapshot and the registration and the
/// handler either misses it or sees it twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn late_handlers_added_during_churn_see_a_consistent_stream() {
    const KEYS: usize = 100;
    const HANDLERS: usize = 300;
    let lw = FakeLw::default();
    for i in 0..KEYS {
        lw.0.apply(&format!("k{i}"), "add");
    }
    let inf = SharedIndexInformer::new(lw.clone(), Duration::ZERO);
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let (inf, stop) = (inf.clone(), stop.clone());
        async move { inf.run(stop).await }
    });
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(eventually(|| !lw.0.state.lock().watchers.is_empty()).await);

    // Churn on other threads: updates, deletes and re-adds.
    let churning = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = std::thread::spawn({
        let (lw, churning) = (lw.clone(), Arc::clone(&churning));
        move || {
            let mut n = 0_usize;
            while churning.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("k{}", n % KEYS);
                let exists = lw.0.state.lock().objects.contains_key(&name);
                let kind = match (exists, n % 7) {
                    (false, _) => "add",
                    (true, 3) => "delete",
                    (true, _) => "update",
                };
                lw.0.apply(&name, kind);
                n += 1;
            }
        }
    });
    let mut mirrors = Vec::new();
    for _ in 0..HANDLERS {
        let mirror = Arc::new(Mirror::default());
        let reg = inf.add_event_handler(Arc::clone(&mirror)).unwrap();
        mirrors.push((mirror, reg));
    }
    churning.store(false, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();

    // Quiescence: the cache holds what the server holds and every handler
    // has been handed everything.
    let server: HashMap<String, String> =
        lw.0.state
            .lock()
            .objects
            .values()
            .map(|o| (nm(o).to_string(), rv(o).to_string()))
            .collect();
    assert!(
        eventually(|| cache_view(&inf) == server).await,
        "the cache caught up"
    );
    assert!(eventually(|| mirrors.iter().all(|(_, reg)| reg.pending() == 0)).await);
    for (i, (mirror, reg)) in mirrors.iter().enumerate() {
        assert!(reg.has_synced(), "handler {i} synced");
        let violations = mirror.violations.lock().clone();
        assert!(violations.is_empty(), "handler {i}: {violations:?}");
        assert_eq!(
            *mirror.view.lock(),
            server,
            "handler {i} ends with the cache"
        );
    }
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A handler registered while the informer is stopping is either refused
/// or reported removed: never a registration that waits forever for a
/// replay the stopped processor will not deliver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_added_while_stopping_is_refused_or_removed() {
    for round in 0..50 {
        let lw = FakeLw::default();
        lw.0.apply("a", "add");
        let inf = SharedIndexInformer::new(lw.clone(), Duration::ZERO);
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (inf, stop) = (inf.clone(), stop.clone());
            async move { inf.run(stop).await }
        });
        inf.wait_for_cache_sync(Duration::from_secs(30))
            .await
            .unwrap();
        let adder = tokio::spawn({
            let inf = inf.clone();
            async move {
                let mut regs = Vec::new();
                loop {
                    match inf.add_event_handler(Recorder::default()) {
                        Ok(reg) => regs.push(reg),
                        Err(InformerError::Stopped { .. }) => return regs,
                        Err(other) => panic!("unexpected error {other}"),
                    }
                    tokio::task::yield_now().await;
                }
            }
        });
        tokio::task::yield_now().await;
        stop.cancel();
        task.await.unwrap().unwrap();
        let regs = adder.await.unwrap();
        for reg in &regs {
            assert!(
                reg.is_removed(),
                "round {round}: a registration outlived its informer: {reg:?}"
            );
            let gave_up = tokio::time::timeout(
                Duration::from_secs(5),
                reg.wait_for_sync_until(&CancellationToken::new()),
            )
            .await;
            assert!(gave_up.is_ok(), "round {round}: the sync wait ended");
        }
        assert_eq!(inf.inner.processor.len(), 0, "round {round}");
    }
}
