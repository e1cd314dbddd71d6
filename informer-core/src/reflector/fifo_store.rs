//! A [`DeltaFifo`] is what a reflector normally feeds: each store call
//! becomes a delta (`Added`, `Updated`, `Deleted`, `Replaced` + tombstones,
//! `Sync`).

use kube_core::Resource;

use super::{ReflectorStore, WatchChange};
use crate::delta_fifo::{DeltaFifo, DeltaType};

impl<K: Resource + Clone + Send + Sync + 'static> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: K) {
        DeltaFifo::add(self, obj);
    }

    fn update(&self, obj: K) {
        DeltaFifo::update(self, obj);
    }

    fn delete(&self, obj: K) {
        DeltaFifo::delete(self, obj);
    }

    fn replace(&self, list: Vec<K>, resource_version: &str) {
        DeltaFifo::replace(self, list, resource_version);
    }

    fn resync(&self) {
        DeltaFifo::resync(self);
    }

    fn prepare_listed(&self, obj: K) -> K {
        self.transformed(obj)
    }

    fn replace_prepared(&self, list: Vec<K>, resource_version: &str) {
        self.replace_transformed(list, resource_version);
    }

    fn replaces_by_page(&self) -> bool {
        true
    }

    fn replace_begin(&self) {
        DeltaFifo::replace_begin(self);
    }

    fn replace_page(&self, page: Vec<K>) {
        DeltaFifo::replace_page(self, page);
    }

    fn replace_finish(&self, resource_version: &str) {
        DeltaFifo::replace_finish(self, resource_version);
    }

    fn watch_batch(&self, changes: Vec<WatchChange<K>>) {
        self.push_batch(changes.into_iter().map(|change| match change {
            WatchChange::Added(o) => (DeltaType::Added, o),
            WatchChange::Modified(o) => (DeltaType::Updated, o),
            WatchChange::Deleted(o) => (DeltaType::Deleted, o),
        }));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::super::Reflector;
    use super::super::tests::fake::{Bump, FakeLw, Item, Step, cm, page};
    use crate::delta_fifo::{DeltaFifo, DeltaType};
    use crate::list_watch::WatchEvent;

    /// A reflector feeding a FIFO: the list becomes `Replaced` deltas (which
    /// make the FIFO synced once popped) and watch events follow in order.
    #[tokio::test(start_paused = true)]
    async fn reflector_feeds_a_delta_fifo() {
        let bump = Bump::new();
        let lw = FakeLw::new(
            &bump,
            vec![
                Step::List(Ok(page("10", &["a", "b"], None))),
                Step::Watch(vec![
                    Item::Event(WatchEvent::Modified(cm("a", "11"))),
                    Item::Event(WatchEvent::Deleted(cm("b", "12"))),
                    Item::Hang,
                ]),
            ],
        );
        let fifo = Arc::new(DeltaFifo::new(None));
        let reflector = Reflector::builder(lw.clone(), fifo.clone()).build();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));

        let lw2 = lw.clone();
        bump.until("the watch events were applied", move || lw2.hung() == 1)
            .await;
        let mut popped = Vec::new();
        for _ in 0..2 {
            let item = fifo
                .pop(|d| {
                    (
                        d.key.to_string(),
                        d.deltas.iter().map(|d| d.kind).collect::<Vec<_>>(),
                    )
                })
                .await
                .unwrap();
            popped.push(item);
        }
        let lw2 = lw.clone();
        bump.until("the watch is open", move || lw2.calls().len() == 2)
            .await;
        assert_eq!(
            popped,
            vec![
                (
                    "ns/a".to_owned(),
                    vec![DeltaType::Replaced, DeltaType::Updated]
                ),
                (
                    "ns/b".to_owned(),
                    vec![DeltaType::Replaced, DeltaType::Deleted]
                ),
            ]
        );
        assert!(fifo.has_synced());
        assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("10"));
        cancel.cancel();
        task.await.unwrap();
    }

    /// The FIFO's transform runs on each list page as it arrives (before
    /// the next page is requested), once per object: `replace_prepared`
    /// does not transform again.
    #[tokio::test(start_paused = true)]
    async fn list_pages_are_transformed_as_they_arrive_and_only_once() {
        let bump = Bump::new();
        let lw = FakeLw::new(
            &bump,
            vec![
                Step::List(Ok(page("10", &["a", "b"], Some("next")))),
                Step::List(Ok(page("10", &["c"], None))),
                Step::Watch(vec![Item::Hang]),
            ],
        );
        // For each transformed object: how many requests had been made.
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let transform: crate::delta_fifo::Transform<k8s_openapi::api::core::v1::ConfigMap> = {
            let (seen, lw) = (seen.clone(), lw.clone());
            Arc::new(move |mut obj| {
                let name = obj.metadata.name.clone().unwrap_or_default();
                seen.lock().unwrap().push((name, lw.calls().len()));
                obj.metadata.labels = Some([("t".to_owned(), "1".to_owned())].into());
                obj
            })
        };
        let fifo = Arc::new(DeltaFifo::new(None).with_transform(transform));
        let reflector = Reflector::builder(lw.clone(), fifo.clone())
            .page_size(2)
            .build();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(reflector.run(cancel.clone()));
        let lw2 = lw.clone();
        bump.until("the watch is open", move || lw2.hung() == 1)
            .await;
        assert_eq!(
            *seen.lock().unwrap(),
            [
                ("a".to_owned(), 1),
                ("b".to_owned(), 1),
                ("c".to_owned(), 2)
            ]
        );
        let labelled = fifo
            .pop(|d| {
                d.deltas
                    .iter()
                    .all(|d| d.object.object().metadata.labels.is_some())
            })
            .await
            .unwrap();
        assert!(labelled);
        cancel.cancel();
        task.await.unwrap();
    }

    fn drain(fifo: &DeltaFifo<super::super::tests::fake::Obj>) -> Vec<(String, Vec<DeltaType>)> {
        let mut out = Vec::new();
        while !fifo.is_empty() {
            let next = fifo.pop(|d| (d.key.to_string(), d.deltas.iter().map(|d| d.kind).collect()));
            let Some(Ok(item)) = futures::FutureExt::now_or_never(next) else {
                panic!("a queued item pops at once");
            };
            out.push(item);
        }
        out
    }

    /// Each store call the reflector makes reaches the FIFO as its delta.
    #[test]
    fn every_store_call_becomes_its_delta() {
        use super::super::ReflectorStore;
        use crate::store::Indexer;
        let known = Arc::new(Indexer::new());
        known.add(Arc::new(cm("r", "1"))).unwrap();
        let fifo = DeltaFifo::new(Some(known));
        let store: &dyn ReflectorStore<_> = &fifo;
        assert!(store.replaces_by_page());
        store.add(cm("a", "2"));
        store.update(cm("a", "3"));
        store.delete(cm("a", "4"));
        store.resync();
        assert_eq!(
            drain(&fifo),
            [
                (
                    "ns/a".to_owned(),
                    vec![DeltaType::Added, DeltaType::Updated, DeltaType::Deleted]
                ),
                ("ns/r".to_owned(), vec![DeltaType::Sync]),
            ]
        );

        let fifo = DeltaFifo::new(None);
        let store: &dyn ReflectorStore<_> = &fifo;
        store.replace(vec![cm("x", "5")], "5");
        assert_eq!(
            drain(&fifo),
            [("ns/x".to_owned(), vec![DeltaType::Replaced])]
        );
        store.replace_prepared(vec![cm("y", "6")], "6");
        assert_eq!(
            drain(&fifo),
            [("ns/y".to_owned(), vec![DeltaType::Replaced])]
        );
        assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("6"));
        store.add(cm("old", "7"));
        store.replace_begin();
        store.replace_page(vec![cm("z", "8")]);
        store.replace_finish("8");
        assert_eq!(
            drain(&fifo),
            [
                (
                    "ns/old".to_owned(),
                    vec![DeltaType::Added, DeltaType::Deleted]
                ),
                ("ns/z".to_owned(), vec![DeltaType::Replaced]),
            ],
            "a paged replace: the page, and a tombstone for what it did not list"
        );
        assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("8"));

        // A paged list that broke off and began again: only the pages of
        // the second attempt count as listed.
        let fifo = DeltaFifo::new(None);
        let store: &dyn ReflectorStore<_> = &fifo;
        store.replace_begin();
        store.replace_page(vec![cm("a", "9")]);
        store.replace_begin();
        store.replace_page(vec![cm("b", "9")]);
        store.replace_finish("9");
        assert_eq!(
            drain(&fifo),
            [
                (
                    "ns/a".to_owned(),
                    vec![DeltaType::Replaced, DeltaType::Deleted]
                ),
                ("ns/b".to_owned(), vec![DeltaType::Replaced]),
            ]
        );
    }
}
