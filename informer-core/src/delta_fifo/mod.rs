//! The queue between the reflector and the informer (client-go's `DeltaFIFO`).
//!
//! Layer 2: imports the store and keys.
//!
//! The reflector pushes what it sees (adds, updates, deletes, whole relists
//! and periodic resyncs); the informer pops one *key* at a time together with
//! every change queued for it ([`Deltas`]), so a burst of changes to one
//! object is handled in one go, in order, and a busy object never starves
//! the others:
//!
//! - The queue holds keys; a key already queued keeps its place when more
//!   deltas arrive for it, a new key goes to the tail.
//! - Two trailing `Deleted` deltas of a key collapse into one (the newer one
//!   if the older is a tombstone, else the older).
//! - A delete of a key that is neither queued nor known (in the
//!   [`KnownObjects`], normally the informer's indexer) is dropped.
//! - [`DeltaFifo::replace`] (after every LIST) queues each listed object as
//!   `Replaced`, then a `Deleted` tombstone ([`DeletedFinalStateUnknown`])
//!   for every queued or known key missing from the list, carrying the newest
//!   object seen for it.
//! - [`DeltaFifo::has_synced`] turns true once the FIFO was populated (by the
//!   first `replace`, or any add/update/delete before it) and every item
//!   queued by that first `replace` (tombstones included) has been popped.
//! - An optional [`Transform`] runs once on every object as it enters (never
//!   on tombstones or resyncs, whose objects already went through it).
//!
//! ```
//! use informer_core::delta_fifo::{DeltaFifo, DeltaType};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_core::ObjectMeta;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let cm = |name: &str| ConfigMap {
//!     metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
//!     ..Default::default()
//! };
//! let fifo = DeltaFifo::new(None);
//! fifo.replace(vec![cm("a"), cm("b")], "10");
//! fifo.update(cm("a"));
//! assert_eq!(fifo.list_keys(), ["ns/a", "ns/b"]); // "a" kept its place
//! assert!(!fifo.has_synced());
//!
//! let kinds = fifo.pop(|d| d.deltas.iter().map(|d| d.kind).collect::<Vec<_>>()).await.unwrap();
//! assert_eq!(kinds, [DeltaType::Replaced, DeltaType::Updated]);
//! fifo.pop(|_| ()).await.unwrap();
//! assert!(fifo.has_synced());
//! # }
//! ```

mod state;

use std::collections::HashSet;
use std::fmt;
use std::pin::pin;
use std::sync::Arc;

use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use crate::key::{DeletedFinalStateUnknown, ObjectOrTombstone, object_key_arc};
use crate::store::KnownObjects;
use state::{Listed, Locked, State};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// Seen for the first time on the watch.
    Added,
    /// Changed (watch `MODIFIED`).
    Updated,
    /// Deleted: the object as last seen, or a tombstone after a relist.
    Deleted,
    /// Present in a (re)list.
    Replaced,
    /// Periodic resync of an object the informer already knows.
    Sync,
}

/// One change to an object.
#[derive(Debug, Clone)]
pub struct Delta<K> {
    /// What happened.
    pub kind: DeltaType,
    /// The object after the change (or a tombstone for inferred deletes).
    pub object: ObjectOrTombstone<K>,
}

/// Everything queued for one key, oldest first, as handed out by
/// [`DeltaFifo::pop`]. Never empty.
#[derive(Debug)]
pub struct Deltas<K> {
    /// The object's key (one string shared by the FIFO and the indexer).
    pub key: Arc<str>,
    /// The changes, oldest first.
    pub deltas: Vec<Delta<K>>,
    /// Whether the item was popped before the FIFO synced, i.e. it belongs
    /// to the first list (`!has_synced()` at the time of the pop).
    pub is_in_initial_list: bool,
}

impl<K> Deltas<K> {
    /// The most recent change.
    pub fn newest(&self) -> Option<&Delta<K>> {
        self.deltas.last()
    }

    /// The oldest change.
    pub fn oldest(&self) -> Option<&Delta<K>> {
        self.deltas.first()
    }
}

/// A function applied to every object as it enters the FIFO, typically to
/// drop fields the cache does not need. It must not change the object's
/// name or namespace.
pub type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// A [`Transform`] that clears `metadata.managedFields`, which are often the
/// largest part of an object and rarely needed by controllers.
///
/// ```
/// use informer_core::delta_fifo::strip_managed_fields;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
///
/// let mut cm = ConfigMap::default();
/// cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
/// let cm = strip_managed_fields::<ConfigMap>()(cm);
/// assert!(cm.metadata.managed_fields.is_none());
/// ```
pub fn strip_managed_fields<K: Resource>() -> Transform<K> {
    Arc::new(|mut obj: K| {
        obj.meta_mut().managed_fields = None;
        obj
    })
}

/// [`DeltaFifo::pop`] on a closed and drained FIFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the DeltaFIFO is closed and drained")]
pub struct FifoClosed;

/// A queue of keys with the ordered changes of each; see the module docs.
/// Share it as `Arc<DeltaFifo<K>>`.
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    not_empty: Notify,
    /// Turns true, once, when [`has_synced`](Self::has_synced) does.
    synced: watch::Sender<bool>,
    known: Option<Arc<dyn KnownObjects<K>>>,
    transform: Option<Transform<K>>,
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("DeltaFifo")
            .field("len", &state.queue.len())
            .field("closed", &state.closed)
            .field("has_synced", &state.has_synced())
            .finish_non_exhaustive()
    }
}

impl<K: Resource + Clone + Send + Sync + 'static> DeltaFifo<K> {
    /// An empty FIFO. `known` is what the consumer already holds (the
    /// informer's indexer); without it, deletes of keys not queued are
    /// dropped and `replace` only tombstones queued keys.
    pub fn new(known: Option<Arc<dyn KnownObjects<K>>>) -> Self {
        DeltaFifo {
            state: Mutex::new(State::default()),
            not_empty: Notify::new(),
            synced: watch::Sender::new(false),
            known,
            transform: None,
        }
    }

    /// Sets the transform applied to each object as it enters.
    #[must_use]
    pub fn with_transform(mut self, t: Transform<K>) -> Self {
        self.transform = Some(t);
        self
    }

    /// The state, locked. Every change goes through this, so that the
    /// moment `has_synced` turns true is told to [`synced`](Self::synced)'s
    /// waiters, when the lock is let go.
    fn lock(&self) -> Locked<'_, K> {
        Locked {
            state: self.state.lock(),
            synced: &self.synced,
        }
    }

    /// Resolves once [`has_synced`](Self::has_synced) is true: at once if it
    /// already is, else as soon as the last object of the first list has
    /// been popped and processed.
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// use informer_core::delta_fifo::DeltaFifo;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// let fifo: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    /// fifo.replace(Vec::new(), "1");
    /// fifo.synced().await; // an empty first list: synced at once
    /// # });
    /// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    /// # }
    /// ```
    pub async fn synced(&self) {
        let _ = self.synced_receiver().wait_for(|synced| *synced).await;
    }

    /// A receiver of [`synced`](Self::synced)'s flag, for waiting without
    /// borrowing the FIFO.
    pub(crate) fn synced_receiver(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    fn enter(&self, obj: K) -> Arc<K> {
        Arc::new(self.transformed(obj))
    }

    /// `obj` after the transform (if any).
    pub(crate) fn transformed(&self, obj: K) -> K {
        match &self.transform {
            Some(t) => t(obj),
            None => obj,
        }
    }

    fn push(&self, kind: DeltaType, obj: K) {
        let obj = self.enter(obj);
        let key = object_key_arc(&*obj);
        let mut state = self.lock();
        state.populated = true;
        state.queue_action(
            key,
            Delta {
                kind,
                object: ObjectOrTombstone::Object(obj),
            },
        );
        drop(state);
        self.not_empty.notify_waiters();
    }

    /// Queues `Added`.
    pub fn add(&self, obj: K) {
        self.push(DeltaType::Added, obj);
    }

    /// Queues `Updated`.
    pub fn update(&self, obj: K) {
        self.push(DeltaType::Updated, obj);
    }

    /// Queues `Deleted`, unless the key is neither queued nor known (then
    /// the delete is dropped: there is nothing to delete).
    pub fn delete(&self, obj: K) {
        let obj = self.enter(obj);
        let key = object_key_arc(&*obj);
        let mut state = self.lock();
        state.populated = true;
        if !state.items.contains_key(&*key) && !self.knows(&key) {
            tracing::trace!(object = %key, "dropping delete of an object neither queued nor known");
            return;
        }
        state.queue_action(
            key,
            Delta {
                kind: DeltaType::Deleted,
                object: ObjectOrTombstone::Object(obj),
            },
        );
        drop(state);
        self.not_empty.notify_waiters();
    }

    /// Queues the changes of watch events that arrived together (each
    /// `Added`, `Updated` or `Deleted`), in order, under one lock and with
    /// one wake-up of the reader: the same deltas as [`add`](Self::add),
    /// [`update`](Self::update) and [`delete`](Self::delete) for each in
    /// turn.
    pub(crate) fn push_batch(&self, changes: impl IntoIterator<Item = (DeltaType, K)>) {
        let entered: Vec<(DeltaType, Arc<str>, Arc<K>)> = changes
            .into_iter()
            .map(|(kind, obj)| {
                let obj = self.enter(obj);
                (kind, object_key_arc(&*obj), obj)
            })
            .collect();
        let mut state = self.lock();
        state.populated = true;
        let mut queued = false;
        for (kind, key, obj) in entered {
            if kind == DeltaType::Deleted && !state.items.contains_key(&*key) && !self.knows(&key) {
                tracing::trace!(object = %key, "dropping delete of an object neither queued nor known");
                continue;
            }
            state.queue_action(
                key,
                Delta {
                    kind,
                    object: ObjectOrTombstone::Object(obj),
                },
            );
            queued = true;
        }
        drop(state);
        if queued {
            self.not_empty.notify_waiters();
        }
    }

    /// Whether the known objects hold `key`.
    fn knows(&self, key: &str) -> bool {
        self.known
            .as_ref()
            .is_some_and(|k| k.get_by_key(key).is_some())
    }

    /// Takes in a full LIST: queues `Replaced` for each listed object, then
    /// a `Deleted` tombstone for each queued or known key absent from
    /// `list` (queued keys in queue order, then known keys sorted), with the
    /// newest object seen for it. Records `resource_version`.
    pub fn replace(&self, list: Vec<K>, resource_version: &str) {
        let list = list.into_iter().map(|o| self.transformed(o)).collect();
        self.replace_transformed(list, resource_version);
    }

    /// [`replace`](Self::replace) for objects already transformed (the
    /// reflector transforms each list page as it arrives).
    pub(crate) fn replace_transformed(&self, list: Vec<K>, resource_version: &str) {
        let objs = keyed(list);
        let mut state = self.lock();
        self.begin_locked(&mut state);
        page_locked(&mut state, objs);
        self.finish_locked(&mut state, resource_version);
        drop(state);
        self.not_empty.notify_waiters();
    }

    /// Starts a [`replace`](Self::replace) that arrives page by page (the
    /// reflector's paged LIST): [`replace_page`](Self::replace_page) queues
    /// each page's objects at once, so the informer can apply them (and let
    /// the old objects go) while the rest of the list is still coming;
    /// [`replace_finish`](Self::replace_finish) then queues the tombstones.
    /// The deltas are the same as one `replace` of every page's objects.
    /// Beginning again forgets the keys listed so far (a list that broke
    /// off and starts over).
    pub(crate) fn replace_begin(&self) {
        self.begin_locked(&mut self.lock());
    }

    /// One page of a paged replace (objects already transformed).
    pub(crate) fn replace_page(&self, page: Vec<K>) {
        let objs = keyed(page);
        page_locked(&mut self.lock(), objs);
        self.not_empty.notify_waiters();
    }

    /// Ends a paged replace: tombstones for every queued or known key no
    /// page listed; records `resource_version`.
    pub(crate) fn replace_finish(&self, resource_version: &str) {
        self.finish_locked(&mut self.lock(), resource_version);
        self.not_empty.notify_waiters();
    }

    fn begin_locked(&self, state: &mut State<K>) {
        // Nothing queued and nothing known (the first list): there can be no
        // tombstones, so the listed keys need not be kept.
        let nothing_to_delete = !state.populated
            && state.queue.is_empty()
            && self.known.as_ref().is_none_or(|k| k.is_empty());
        state.replacing = Some(if nothing_to_delete {
            Listed::Untracked
        } else {
            Listed::Keys(HashSet::new())
        });
    }

    fn finish_locked(&self, state: &mut State<K>, resource_version: &str) {
        let listed = state
            .replacing
            .take()
            .unwrap_or_else(|| Listed::Keys(HashSet::new()));
        let tombstones = match listed {
            Listed::Untracked => Vec::new(),
            Listed::Keys(listed) => self.tombstones(state, &listed),
        };
        state.queue.reserve(tombstones.len());
        state.items.reserve(tombstones.len());
        for (key, obj) in tombstones {
            let tombstone = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
                key: key.to_string(),
                obj,
            });
            state.queue_action(
                key,
                Delta {
                    kind: DeltaType::Deleted,
                    object: tombstone,
                },
            );
        }
        if !state.populated {
            state.populated = true;
            state.initial_population_count = state.queue.len();
        }
        state.last_sync_rv = Some(resource_version.to_owned());
    }

    /// Queued keys (in queue order), then known keys (sorted), that are not
    /// in `listed`, each with the newest object seen for it.
    fn tombstones(&self, state: &State<K>, listed: &HashSet<Arc<str>>) -> Vec<(Arc<str>, Arc<K>)> {
        let mut tombstones: Vec<(Arc<str>, Arc<K>)> = state
            .queue
            .iter()
            .filter(|k| !listed.contains(&***k))
            .filter_map(|k| {
                Some((
                    k.clone(),
                    state.items.get(&**k)?.last()?.object.object().clone(),
                ))
            })
            .collect();
        if let Some(known) = &self.known {
            let mut keys = known.list_keys();
            keys.sort_unstable();
            for key in keys {
                if listed.contains(key.as_str()) || state.items.contains_key(key.as_str()) {
                    continue;
                }
                if let Some(obj) = known.get_by_key(&key) {
                    tombstones.push((Arc::from(key), obj));
                }
            }
        }
        tombstones
    }

    /// Queues `Sync` for every known object whose key has no queued deltas
    /// (pending changes are never resynced over). Does nothing without
    /// known objects.
    pub fn resync(&self) {
        let Some(known) = &self.known else { return };
        let mut keys = known.list_keys();
        keys.sort_unstable();
        let mut state = self.lock();
        let mut queued = false;
        for key in keys {
            if state.items.contains_key(key.as_str()) {
                continue;
            }
            if let Some(obj) = known.get_by_key(&key) {
                state.queue_action(
                    Arc::from(key),
                    Delta {
                        kind: DeltaType::Sync,
                        object: ObjectOrTombstone::Object(obj),
                    },
                );
                queued = true;
            }
        }
        drop(state);
        if queued {
            self.not_empty.notify_waiters();
        }
    }

    /// Waits for a key, removes it with all its deltas and hands them to
    /// `process`, returning its result.
    ///
    /// `process` runs while the FIFO's lock is held, so no add, `replace` or
    /// `resync` can interleave: the informer updates its indexer inside
    /// `process`, and the next `replace` computes tombstones against the
    /// updated indexer. Keep `process` short and never call back into this
    /// FIFO from it (that would deadlock).
    ///
    /// After [`close`](Self::close) the remaining items are still handed out;
    /// once empty, `pop` returns [`FifoClosed`].
    ///
    /// The informer's loop, in brief:
    ///
    /// ```
    /// use std::sync::Arc;
    /// use informer_core::delta_fifo::{DeltaFifo, DeltaType};
    /// use informer_core::store::Indexer;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_core::ObjectMeta;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let indexer: Indexer<ConfigMap> = Indexer::new();
    /// let fifo = Arc::new(DeltaFifo::new(Some(Arc::new(indexer.clone()))));
    /// let cm = ConfigMap { metadata: ObjectMeta { name: Some("a".into()), namespace: Some("ns".into()), ..Default::default() }, ..Default::default() };
    /// fifo.replace(vec![cm], "1");
    /// fifo.close(); // so the loop below ends once drained
    ///
    /// while let Ok(()) = fifo
    ///     .pop(|deltas| {
    ///         for d in deltas.deltas {
    ///             match d.kind {
    ///                 DeltaType::Deleted => drop(indexer.delete(&deltas.key)),
    ///                 _ => indexer.update(d.object.into_object()).unwrap_or_else(|e| eprintln!("{e}")),
    ///             }
    ///             // ... then notify handlers
    ///         }
    ///     })
    ///     .await
    /// {}
    /// assert_eq!(indexer.list_keys(), ["ns/a"]);
    /// # }
    /// ```
    pub async fn pop<R>(&self, process: impl FnOnce(Deltas<K>) -> R) -> Result<R, FifoClosed> {
        loop {
            // Register for wake-ups before looking, so none is missed.
            let mut notified = pin!(self.not_empty.notified());
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some(deltas) = state.pop_front() {
                    return Ok(process(deltas));
                }
                if state.closed {
                    return Err(FifoClosed);
                }
            }
            notified.await;
        }
    }

    /// Like [`pop`](Self::pop) for up to `max` keys at once: waits for a
    /// key, then removes the first `max` queued (fewer if fewer are) and
    /// hands them to `process` in pop order, under one lock. The informer's
    /// path: a LIST page or a burst of watch events is applied in one go.
    pub(crate) async fn pop_batch<R>(
        &self,
        max: usize,
        process: impl FnOnce(Vec<Deltas<K>>) -> R,
    ) -> Result<R, FifoClosed> {
        loop {
            let mut notified = pin!(self.not_empty.notified());
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                let first = state.queue.len().min(max.max(1));
                let mut batch = Vec::with_capacity(first);
                while batch.len() < first {
                    match state.pop_front() {
                        Some(deltas) => batch.push(deltas),
                        None => break,
                    }
                }
                if !batch.is_empty() {
                    return Ok(process(batch));
                }
                if state.closed {
                    return Err(FifoClosed);
                }
            }
            notified.await;
        }
    }

    /// Closes the FIFO: waiting and later `pop`s drain what is queued, then
    /// return [`FifoClosed`]. As in client-go, pushes after `close` are still
    /// accepted (and drained).
    pub fn close(&self) {
        self.lock().closed = true;
        self.not_empty.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Whether the FIFO was populated and every item of the first `replace`
    /// has been popped.
    pub fn has_synced(&self) -> bool {
        self.lock().has_synced()
    }

    /// Number of queued keys.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no key is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queued keys, in pop order.
    pub fn list_keys(&self) -> Vec<String> {
        self.state
            .lock()
            .queue
            .iter()
            .map(|k| k.to_string())
            .collect()
    }

    /// The resource version of the last `replace`.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.lock().last_sync_rv.clone()
    }
}

/// Each object shared, with its key.
fn keyed<K: Resource>(list: Vec<K>) -> Vec<(Arc<str>, Arc<K>)> {
    list.into_iter()
        .map(|o| {
            let o = Arc::new(o);
            (object_key_arc(&*o), o)
        })
        .collect()
}

/// Queues `Replaced` for each of `objs`, noting their keys when the replace
/// in progress keeps them.
fn page_locked<K>(state: &mut State<K>, objs: Vec<(Arc<str>, Arc<K>)>) {
    // Grow once per page rather than rehashing step by step.
    state.queue.reserve(objs.len());
    state.items.reserve(objs.len());
    let mut listed = state
        .replacing
        .take()
        .unwrap_or_else(|| Listed::Keys(HashSet::new()));
    for (key, obj) in objs {
        if let Listed::Keys(keys) = &mut listed {
            keys.insert(key.clone());
        }
        state.queue_action(
            key,
            Delta {
                kind: DeltaType::Replaced,
                object: ObjectOrTombstone::Object(obj),
            },
        );
    }
    state.replacing = Some(listed);
}

#[cfg(test)]
mod tests;
