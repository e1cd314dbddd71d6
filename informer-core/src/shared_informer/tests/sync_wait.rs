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

/// The wait ends the moment the cache syncs, not at the next look: on the
/// paused clock, a list answered after 25 ms ends the wait at 25 ms
/// exactly (looking every 10 ms would end it at 30 ms).
#[tokio::test(start_paused = true)]
async fn wait_for_cache_sync_ends_the_moment_the_cache_syncs() {
    let lw = FakeLw::default();
    for name in ["a", "b", "c"] {
        lw.0.apply(name, "add");
    }
    let delay = Duration::from_millis(25);
    let inf = SharedIndexInformer::new(SlowList(lw, delay), Duration::ZERO);
    let stop = CancellationToken::new();
    let started = tokio::time::Instant::now();
    let task = tokio::spawn({
        let inf = inf.clone();
        let stop = stop.clone();
        async move { inf.run(stop).await }
    });
    inf.wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(started.elapsed(), delay);
    assert_eq!(inf.indexer().len(), 3);
    stop.cancel();
    task.await.unwrap().unwrap();
}
