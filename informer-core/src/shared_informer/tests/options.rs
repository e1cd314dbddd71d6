//! Builder options: a transform composes with managedFields stripping
//! (transform first), and streaming lists are on by default where the
//! lister-watcher supports them, off by the builder switch.

use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

use super::*;
use crate::delta_fifo::Transform;
use crate::list_watch::{Bookmark, INITIAL_EVENTS_END_ANNOTATION};

fn managed(name: &str) -> ConfigMap {
    let mut obj = cm(name, "1");
    obj.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kubectl".into()),
        ..ManagedFieldsEntry::default()
    }]);
    obj
}

/// Serves one ConfigMap carrying managedFields, by LIST or by a streaming
/// list when asked (and `supports` says it can); remembers every watch
/// request.
struct OneObject {
    supports: bool,
    watches: Mutex<Vec<WatchRequest>>,
}

impl OneObject {
    fn new(supports: bool) -> Arc<Self> {
        Arc::new(Self {
            supports,
            watches: Mutex::new(Vec::new()),
        })
    }

    fn streamed(&self) -> Vec<bool> {
        self.watches
            .lock()
            .iter()
            .map(|w| w.send_initial_events)
            .collect()
    }
}

impl ListerWatcher<ConfigMap> for OneObject {
    fn list(
        &self,
        _req: ListRequest,
    ) -> BoxFuture<'_, Result<ListPage<ConfigMap>, ListWatchError>> {
        let page = ListPage {
            items: vec![managed("a")],
            resource_version: "1".into(),
            ..ListPage::default()
        };
        async move { Ok(page) }.boxed()
    }

    fn watch(
        &self,
        req: WatchRequest,
    ) -> BoxFuture<'_, Result<WatchStream<ConfigMap>, ListWatchError>> {
        let initial = req.send_initial_events;
        self.watches.lock().push(req);
        async move {
            let mut events = Vec::new();
            if initial {
                let end = Bookmark {
                    resource_version: "1".into(),
                    annotations: [(INITIAL_EVENTS_END_ANNOTATION.to_owned(), "true".to_owned())]
                        .into(),
                };
                events = vec![
                    Ok(WatchEvent::Added(managed("a"))),
                    Ok(WatchEvent::Bookmark(end)),
                ];
            }
            Ok(futures::stream::iter(events)
                .chain(futures::stream::pending())
                .boxed())
        }
        .boxed()
    }

    fn supports_streaming_list(&self) -> bool {
        self.supports
    }
}

/// Runs `informer` until its cache synced; returns its stop token.
async fn run_synced(informer: &SharedIndexInformer<ConfigMap>) -> CancellationToken {
    let stop = CancellationToken::new();
    tokio::spawn({
        let informer = informer.clone();
        let stop = stop.clone();
        async move { informer.run(stop).await }
    });
    informer
        .wait_for_cache_sync(Duration::from_secs(10))
        .await
        .unwrap();
    stop
}

/// A transform that labels each object and records whether it still saw
/// managedFields.
fn labelling(saw_managed_fields: Arc<AtomicBool>) -> Transform<ConfigMap> {
    Arc::new(move |mut obj: ConfigMap| {
        if obj.metadata.managed_fields.is_some() {
            saw_managed_fields.store(true, Ordering::Relaxed);
        }
        obj.metadata
            .labels
            .get_or_insert_default()
            .insert("seen".into(), "yes".into());
        obj
    })
}

#[tokio::test(start_paused = true)]
async fn a_transform_runs_first_and_managed_fields_are_still_stripped() {
    for set_later in [false, true] {
        let saw = Arc::new(AtomicBool::new(false));
        let mut builder =
            SharedIndexInformer::builder(OneObject::new(false)).strip_managed_fields(true);
        if !set_later {
            builder = builder.transform(labelling(Arc::clone(&saw)));
        }
        let informer = builder.build().unwrap();
        if set_later {
            informer.set_transform(labelling(Arc::clone(&saw))).unwrap();
        }
        assert!(informer.strips_managed_fields());
        let stop = run_synced(&informer).await;
        let cached = informer.indexer().get_by_key("ns/a").unwrap();
        assert_eq!(
            cached.metadata.managed_fields, None,
            "set later: {set_later}"
        );
        assert_eq!(cached.metadata.labels.as_ref().unwrap()["seen"], "yes");
        assert!(
            saw.load(Ordering::Relaxed),
            "the transform sees the object as sent"
        );
        stop.cancel();
    }
}

#[tokio::test(start_paused = true)]
async fn without_stripping_a_transform_alone_keeps_managed_fields() {
    let saw = Arc::new(AtomicBool::new(false));
    let informer = SharedIndexInformer::builder(OneObject::new(false))
        .transform(labelling(saw))
        .build()
        .unwrap();
    assert!(!informer.strips_managed_fields());
    let stop = run_synced(&informer).await;
    let cached = informer.indexer().get_by_key("ns/a").unwrap();
    assert!(cached.metadata.managed_fields.is_some());
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn streaming_lists_are_on_by_default_where_supported() {
    let lw = OneObject::new(true);
    let informer = SharedIndexInformer::new(Arc::clone(&lw), Duration::ZERO);
    assert!(informer.uses_streaming_list());
    let stop = run_synced(&informer).await;
    assert_eq!(
        lw.streamed(),
        [true],
        "the first watch is the streaming list"
    );
    stop.cancel();

    let lw = OneObject::new(true);
    let informer = SharedIndexInformer::builder(Arc::clone(&lw))
        .streaming_list(false)
        .build()
        .unwrap();
    assert!(!informer.uses_streaming_list());
    let stop = run_synced(&informer).await;
    tokio::time::timeout(Duration::from_secs(5), async {
        while lw.watches.lock().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(lw.streamed(), [false], "listed, then a plain watch");
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_lister_watcher_without_streaming_is_listed() {
    let lw = OneObject::new(false);
    let informer = SharedIndexInformer::new(Arc::clone(&lw), Duration::ZERO);
    assert!(!informer.uses_streaming_list());
    let stop = run_synced(&informer).await;
    assert!(!lw.streamed().contains(&true));
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn streamed_objects_go_through_the_transform_and_the_stripping() {
    let saw = Arc::new(AtomicBool::new(false));
    let informer = SharedIndexInformer::builder(OneObject::new(true))
        .strip_managed_fields(true)
        .transform(labelling(Arc::clone(&saw)))
        .build()
        .unwrap();
    let stop = run_synced(&informer).await;
    let cached = informer.indexer().get_by_key("ns/a").unwrap();
    assert_eq!(cached.metadata.managed_fields, None);
    assert_eq!(cached.metadata.labels.as_ref().unwrap()["seen"], "yes");
    assert!(saw.load(Ordering::Relaxed));
    stop.cancel();
}
