//! Sources of a controller's requests: which informer, which predicates,
//! which handler (Go's `source.Kind`).
//!
//! A [`Source`] ties one kind's shared informer to the controller's
//! workqueue. It is created when the controller is built (so the informer is
//! requested from the factory before the manager starts it) and registers
//! its informer handler when the controller starts (so a replica that is not
//! leading queues nothing). Initial-list adds and resyncs are queued at low
//! priority so that real changes go first.
//!
//! Controller layer.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use informer_core::factory::is_cluster_scoped;
use informer_core::key::ObjectOrTombstone;
use informer_core::shared_informer::{
    InformerError, ResourceEventHandler, ResourceEventHandlerRegistration,
};
use kube_client::core::ApiResource;
use kube_client::core::metadata::PartialObjectMeta;
use kube_core::Resource;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cache::ScopedInformer;
use crate::handler::EventHandler;
use crate::predicate::Predicate;
use crate::request::Request;
use crate::workqueue::Priority;

/// The controller-wide filters
/// ([`with_event_filter`](super::ControllerBuilder::with_event_filter)):
/// predicates on the metadata of every watched object, shared by every
/// source of the controller.
pub(crate) type EventFilters = Arc<Vec<Box<dyn Predicate<PartialObjectMeta>>>>;

/// Whether every controller-wide filter passes; `check` asks one filter
/// about the objects' metadata views (made only when there is a filter).
fn filters_pass<W: Resource>(
    filters: &EventFilters,
    objects: &[&W],
    check: impl Fn(&dyn Predicate<PartialObjectMeta>, &[PartialObjectMeta]) -> bool,
) -> bool {
    if filters.is_empty() {
        return true;
    }
    let views: Vec<PartialObjectMeta> = objects
        .iter()
        .map(|o| PartialObjectMeta {
            types: None,
            metadata: o.meta().clone(),
            _phantom: std::marker::PhantomData,
        })
        .collect();
    filters.iter().all(|f| check(f.as_ref(), &views))
}

/// A type-erased source of requests: the watch of one kind.
pub(crate) trait Source: Send + Sync + 'static {
    /// `Kind (group/version)`, for logs and sync errors.
    fn describe(&self) -> String;
    /// The resource watched (checked to be served when the manager starts).
    fn resource(&self) -> &ApiResource;
    /// The controller-wide filters this source applies.
    #[cfg(test)]
    fn event_filters(&self) -> &EventFilters;
    /// Registers the informer handler feeding `sink`.
    fn register(&self, sink: Arc<dyn RequestSink>) -> Result<SourceRegistration, InformerError>;
}

/// Where a source's requests go: a controller's queue, with the cluster
/// of the source added to each request.
pub(crate) trait RequestSink: Send + Sync + 'static {
    /// Queues `req` at `priority`.
    fn add(&self, req: Request, priority: Priority);
}

/// A registered source: its informer handler is removed when it is
/// dropped (when the controller stops).
pub(crate) struct SourceRegistration {
    pub(crate) description: String,
    synced: Box<dyn Fn() -> bool + Send + Sync>,
    /// A future that resolves once `synced` may have turned true.
    wait: Box<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>,
    remove: Box<dyn Fn() + Send + Sync>,
}

impl SourceRegistration {
    /// Whether the informer synced and this handler got the initial list.
    pub(crate) fn has_synced(&self) -> bool {
        (self.synced)()
    }

    /// A future that resolves once [`has_synced`](Self::has_synced) may
    /// have turned true (look again then).
    pub(crate) fn sync_wait(&self) -> BoxFuture<'static, ()> {
        (self.wait)()
    }
}

impl Drop for SourceRegistration {
    fn drop(&mut self) {
        (self.remove)();
    }
}

/// Waits until every watch synced, or `timeout`; on timeout the error
/// names the watches that had not synced. Woken by the watches' own sync
/// waits, with a look every 20 ms besides.
pub(crate) async fn wait_for_sync(
    watches: &[SourceRegistration],
    timeout: Duration,
) -> Result<(), Vec<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        let unsynced: Vec<&SourceRegistration> =
            watches.iter().filter(|w| !w.has_synced()).collect();
        if unsynced.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(unsynced.iter().map(|w| w.description.clone()).collect());
        }
        let any_synced = futures::future::select_all(unsynced.iter().map(|w| w.sync_wait()));
        tokio::select! {
            _ = any_synced => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}

/// A kind a controller owns, as the layers above the controller see it
/// (sharding's label mode labels the owned kinds by their resource).
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "sharding"), allow(dead_code))]
pub(crate) struct OwnedKind {
    pub(crate) resource: ApiResource,
    pub(crate) namespaced: bool,
}

impl OwnedKind {
    pub(crate) fn of<C: Resource<DynamicType = ()>>() -> Self {
        OwnedKind {
            resource: ApiResource::erase::<C>(&()),
            namespaced: !is_cluster_scoped::<C>(),
        }
    }
}

pub(crate) fn describe_kind<K: Resource<DynamicType = ()>>() -> String {
    let (group, version, kind) = (K::group(&()), K::version(&()), K::kind(&()));
    if group.is_empty() {
        format!("{kind} ({version})")
    } else {
        format!("{kind} ({group}/{version})")
    }
}

/// The source of one kind `W` (typed, metadata-only or dynamic): its
/// shared informers, handler and predicates.
pub(crate) struct KindSource<W> {
    pub(crate) informer: ScopedInformer<W>,
    pub(crate) handler: Arc<dyn EventHandler<W>>,
    pub(crate) predicates: Arc<Vec<Box<dyn Predicate<W>>>>,
    /// The controller-wide filters, set when the controller is completed.
    pub(crate) filters: EventFilters,
    /// `Kind (group/version)`, for logs and sync errors.
    pub(crate) description: String,
    /// The resource watched.
    pub(crate) resource: ApiResource,
}

impl<W: Watched> Source for KindSource<W> {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn resource(&self) -> &ApiResource {
        &self.resource
    }

    #[cfg(test)]
    fn event_filters(&self) -> &EventFilters {
        &self.filters
    }

    fn register(&self, sink: Arc<dyn RequestSink>) -> Result<SourceRegistration, InformerError> {
        let adapter = InformerHandler {
            sink,
            handler: Arc::clone(&self.handler),
            predicates: Arc::clone(&self.predicates),
            filters: Arc::clone(&self.filters),
        };
        // One handler on each informer of the kind (one per namespace when
        // the cache is restricted to several).
        let registrations: Arc<Vec<ResourceEventHandlerRegistration>> =
            Arc::new(self.informer.add_event_handler(adapter)?);
        let informer = self.informer.clone();
        let synced = {
            let (informer, registrations) = (informer.clone(), Arc::clone(&registrations));
            Box::new(move || informer.has_synced() && registrations.iter().all(|r| r.has_synced()))
        };
        let wait = {
            let registrations = Arc::clone(&registrations);
            Box::new(move || {
                let registrations = Arc::clone(&registrations);
                async move {
                    let never = CancellationToken::new();
                    for registration in registrations.iter() {
                        // A removed handler never syncs: leave it to the look
                        // every 20 ms rather than wake at once, again and again.
                        if !registration.wait_for_sync_until(&never).await {
                            futures::future::pending::<()>().await;
                        }
                    }
                }
                .boxed()
            })
        };
        let remove = Box::new(move || {
            if let Err(error) = informer.remove_event_handler(&registrations) {
                tracing::debug!(%error, "removing a controller's informer handlers");
            }
        });
        Ok(SourceRegistration {
            description: self.describe(),
            synced,
            wait,
            remove,
        })
    }
}

/// The informer handler of a source: the source's predicates and the
/// controller-wide filters, then the event handler, then the queue.
struct InformerHandler<W> {
    sink: Arc<dyn RequestSink>,
    handler: Arc<dyn EventHandler<W>>,
    predicates: Arc<Vec<Box<dyn Predicate<W>>>>,
    filters: EventFilters,
}

/// What a source can watch: any resource type an informer caches.
pub(crate) trait Watched: Resource + Clone + Send + Sync + 'static {}

impl<W: Resource + Clone + Send + Sync + 'static> Watched for W {}

impl<W: Watched> InformerHandler<W> {
    fn push(&self, requests: Vec<Request>, priority: Priority) {
        for req in requests {
            self.sink.add(req, priority);
        }
    }
}

impl<W: Watched> ResourceEventHandler<W> for InformerHandler<W> {
    fn on_add(&self, obj: Arc<W>, is_in_initial_list: bool) {
        if self.predicates.iter().all(|p| p.create(&obj))
            && filters_pass(&self.filters, &[obj.as_ref()], |f, v| f.create(&v[0]))
        {
            self.push(
                self.handler.create(&obj),
                Priority::for_event(is_in_initial_list),
            );
        }
    }

    fn on_update(&self, old: Arc<W>, new: Arc<W>) {
        if self.predicates.iter().all(|p| p.update(&old, &new))
            && filters_pass(&self.filters, &[old.as_ref(), new.as_ref()], |f, v| {
                f.update(&v[0], &v[1])
            })
        {
            let resync = old.meta().resource_version == new.meta().resource_version;
            self.push(self.handler.update(&old, &new), Priority::for_event(resync));
        }
    }

    fn on_delete(&self, obj: ObjectOrTombstone<W>) {
        let obj = obj.object();
        if self.predicates.iter().all(|p| p.delete(obj))
            && filters_pass(&self.filters, &[obj.as_ref()], |f, v| f.delete(&v[0]))
        {
            self.push(self.handler.delete(obj), Priority::NORMAL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::EnqueueRequestForObject;
    use crate::predicate::from_fn;
    use crate::workqueue::{AddOptions, Queue};
    use k8s_openapi::api::core::v1::ConfigMap;

    impl RequestSink for Queue<Request> {
        fn add(&self, req: Request, priority: Priority) {
            if priority == Priority::NORMAL {
                Queue::add(self, req);
            } else {
                self.add_with(req, AddOptions::new().priority(priority));
            }
        }
    }

    fn cm(name: &str, rv: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.resource_version = Some(rv.into());
        Arc::new(cm)
    }

    fn enqueue(
        queue: &Queue<Request>,
        predicates: Vec<Box<dyn Predicate<ConfigMap>>>,
    ) -> InformerHandler<ConfigMap> {
        InformerHandler {
            sink: Arc::new(queue.clone()),
            handler: Arc::new(EnqueueRequestForObject),
            predicates: Arc::new(predicates),
            filters: Arc::new(Vec::new()),
        }
    }

    /// The controller-wide filters see every event's metadata, besides the
    /// source's own predicates, on create, update and delete.
    #[tokio::test(start_paused = true)]
    async fn controller_wide_filters_apply_to_every_event() {
        let queue: Queue<Request> = Queue::new();
        let mut handler = enqueue(&queue, Vec::new());
        let picked = |m: &PartialObjectMeta| m.metadata.labels.is_some();
        handler.filters = Arc::new(vec![Box::new(from_fn(picked))]);
        let labelled = |name: &str, rv: &str| {
            let mut c = (*cm(name, rv)).clone();
            c.metadata.labels = Some([("pick".to_string(), "yes".to_string())].into());
            Arc::new(c)
        };
        handler.on_add(cm("plain", "1"), false);
        handler.on_update(cm("plain", "1"), cm("plain", "2"));
        handler.on_delete(ObjectOrTombstone::Object(cm("plain", "2")));
        assert_eq!(queue.len(), 0, "unlabelled objects are filtered out");
        handler.on_add(labelled("a", "1"), false);
        handler.on_update(labelled("b", "1"), labelled("b", "2"));
        handler.on_delete(ObjectOrTombstone::Object(labelled("c", "1")));
        assert_eq!(queue.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn initial_list_adds_and_resyncs_wait_behind_real_changes() {
        let queue: Queue<Request> = Queue::new();
        let handler = enqueue(&queue, Vec::new());
        handler.on_add(cm("initial", "1"), true);
        handler.on_update(cm("resync", "2"), cm("resync", "2"));
        handler.on_add(cm("created", "3"), false);
        handler.on_update(cm("changed", "4"), cm("changed", "5"));
        let mut order = Vec::new();
        while let Some(req) = tokio::time::timeout(Duration::from_millis(50), queue.get())
            .await
            .ok()
            .flatten()
        {
            order.push(req.name.clone());
            queue.done(&req);
        }
        assert_eq!(order, vec!["created", "changed", "initial", "resync"]);
    }

    #[tokio::test(start_paused = true)]
    async fn predicates_filter_and_deletes_of_tombstones_enqueue() {
        let queue: Queue<Request> = Queue::new();
        let handler = enqueue(
            &queue,
            vec![Box::new(from_fn(|cm: &ConfigMap| {
                cm.metadata.name.as_deref() != Some("skip")
            }))],
        );
        handler.on_add(cm("skip", "1"), false);
        handler.on_delete(ObjectOrTombstone::Tombstone(
            informer_core::key::DeletedFinalStateUnknown {
                key: "ns/gone".into(),
                obj: cm("gone", "2"),
            },
        ));
        assert_eq!(queue.len(), 1);
        assert_eq!(
            queue.get().await.map(|r| r.to_string()),
            Some("ns/gone".to_string())
        );
    }

    /// The wait ends the moment the last watch syncs (at 25 ms exactly on
    /// the paused clock; a look every 20 ms alone would end it at 40 ms).
    #[tokio::test(start_paused = true)]
    async fn sync_wait_ends_the_moment_the_last_watch_synced() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let registered = vec![SourceRegistration {
            description: "Pod (v1)".into(),
            synced: Box::new({
                let rx = rx.clone();
                move || *rx.borrow()
            }),
            wait: Box::new(move || {
                let mut rx = rx.clone();
                async move {
                    let _ = rx.wait_for(|synced| *synced).await;
                }
                .boxed()
            }),
            remove: Box::new(|| {}),
        }];
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(25)).await;
            tx.send_replace(true);
            // Keep the sender: a dropped one would also end the wait.
            std::future::pending::<()>().await;
        });
        wait_for_sync(&registered, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(25));
    }

    #[tokio::test(start_paused = true)]
    async fn sync_wait_names_the_unsynced_watches() {
        let registered = vec![
            SourceRegistration {
                description: "Pod (v1)".into(),
                synced: Box::new(|| true),
                wait: Box::new(|| futures::future::pending().boxed()),
                remove: Box::new(|| {}),
            },
            SourceRegistration {
                description: "Widget (example.com/v1)".into(),
                synced: Box::new(|| false),
                wait: Box::new(|| futures::future::pending().boxed()),
                remove: Box::new(|| {}),
            },
        ];
        let unsynced = wait_for_sync(&registered, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(unsynced, vec!["Widget (example.com/v1)".to_string()]);
        assert_eq!(describe_kind::<ConfigMap>(), "ConfigMap (v1)");
        assert_eq!(
            describe_kind::<k8s_openapi::api::apps::v1::Deployment>(),
            "Deployment (apps/v1)"
        );
    }
}
