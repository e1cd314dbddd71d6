//! `wait_for_cache_sync` is woken by the sync itself, not by looking again
//! after a pause.

use super::*;

/// A lister-watcher whose LIST answers after a fixed (virtual) delay.
struct SlowList(FakeLw, Duration);

impl ListerWatcher<ConfigMap> for SlowList {
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<ConfigMap>, ListWatchError>> {
        async move {
            tokio::time::sleep(self.1).await;
            self.0.list(req).await
        }
        .boxed()
    }

    fn watch(
        &self,
        req: WatchRequest,
    ) -> BoxFuture<'_, Result<WatchStream<ConfigMap>, ListWatchError>> {
        self.0.watch(req)
    }
}

/// An informer over the ConfigMaps `names`, listed after `delay`.
fn slow_informer(names: &[&str], delay: Duration) -> SharedIndexInformer<ConfigMap> {
    let lw = FakeLw::default();
    for name in names {
        lw.0.apply(name, "add");
    }
    SharedIndexInformer::new(SlowList(lw, delay), Duration::ZERO)
}

/// Runs `inf` in a task of its own; cancel the token to stop it.
fn start(
    inf: &SharedIndexInformer<ConfigMap>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), InformerError>>,
) {
    let stop = CancellationToken::new();
    let task = tokio::spawn({
        let inf = inf.clone();
        let stop = stop.clone();
        async move { inf.run(stop).await }
    });
    (stop, task)
}

/// The wait ends the moment the cache syncs, not at the next look: on the
/// paused clock, a list answered after 25 ms ends the wait at 25 ms
/// exactly (looking every 10 ms would end it at 30 ms).
#[tokio::test(start_paused = true)]
async fn wait_for_cache_sync_ends_the_moment_the_cache_syncs() {
    let delay = Duration::from_millis(25);
    let inf = slow_informer(&["a", "b", "c"], delay);
    let started = tokio::time::Instant::now();
    let (stop, task) = start(&inf);
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), delay);
    assert_eq!(inf.indexer().len(), 3);
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// A handler registration's wait ends the moment the informer synced and
/// the handler got the initial list: at 25 ms exactly on the paused clock
/// (looking every 10 ms would end it at 30 ms).
#[tokio::test(start_paused = true)]
async fn a_handler_sync_wait_ends_the_moment_the_handler_synced() {
    let delay = Duration::from_millis(25);
    let inf = slow_informer(&["a", "b", "c"], delay);
    let recorder = Arc::new(Recorder::default());
    let reg = inf.add_event_handler(Arc::clone(&recorder)).unwrap();
    let started = tokio::time::Instant::now();
    let (stop, task) = start(&inf);
    assert!(reg.wait_for_sync(Duration::from_secs(30)).await);
    assert_eq!(started.elapsed(), delay);
    assert_eq!(recorder.len(), 3);
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// Removing a handler ends its sync wait at once.
#[tokio::test(start_paused = true)]
async fn removing_a_handler_ends_its_sync_wait_at_once() {
    let inf = slow_informer(&[], Duration::from_secs(3600));
    let reg = inf.add_event_handler(Recorder::default()).unwrap();
    let started = tokio::time::Instant::now();
    let waiter = tokio::spawn({
        let reg = reg.clone();
        async move { reg.wait_for_sync(Duration::from_secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(15)).await;
    inf.remove_event_handler(&reg).unwrap();
    assert!(!waiter.await.unwrap());
    assert_eq!(started.elapsed(), Duration::from_millis(15));
}

/// With nothing listed the handler gets no initial add to wait for: its
/// wait ends when the informer syncs, at 25 ms exactly.
#[tokio::test(start_paused = true)]
async fn a_handler_sync_wait_over_an_empty_list_ends_when_the_informer_syncs() {
    let delay = Duration::from_millis(25);
    let inf = slow_informer(&[], delay);
    let reg = inf.add_event_handler(Recorder::default()).unwrap();
    let started = tokio::time::Instant::now();
    let (stop, task) = start(&inf);
    assert!(reg.wait_for_sync(Duration::from_secs(30)).await);
    assert_eq!(started.elapsed(), delay);
    stop.cancel();
    task.await.unwrap().unwrap();
}
