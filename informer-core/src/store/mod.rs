//! The informer's local cache: a thread-safe store of objects by key with
//! named secondary indexes (client-go's `Indexer` / `threadSafeMap`).
//!
//! Layer 1: imports only [`crate::key`].
//!
//! An [`Indexer`] holds each object once, as an `Arc<K>` that listers,
//! handlers and reconcilers all share. Named index functions ([`IndexFn`])
//! map an object to zero or more string values; the indexer keeps, for each
//! index, a map `value -> set of keys`, so that "all pods on node X" or "all
//! objects in namespace Y" is a lookup rather than a scan. A
//! [`NAMESPACE_INDEX`] is always present.
//!
//! Concurrency: the state sits behind one `parking_lot` read-write lock.
//! Readers hold it only to clone `Arc`s out; writers compute index values
//! *before* taking the write lock (re-checking that the set of index
//! functions did not change meanwhile), so user index functions never run
//! while readers wait, except inside [`Indexer::add_indexers`].
//!
//! Failing index functions: an index function that returns `Err` (or
//! panics) never loses the object. The object is stored and filed under every
//! index whose function succeeded; under the failing index it has *no*
//! entries (its previous entries there are removed), so that index does not
//! find it until a later successful add/update. The operation then returns
//! [`StoreError::IndexFunction`] naming the key and the index.

mod state;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kube_core::Resource;
use parking_lot::RwLock;

use crate::key::{object_key, object_key_arc};
use state::{IndexSet, State, call_index_fn, compute_values};

/// Name of the built-in index that files objects by namespace
/// (cluster-scoped objects have no entry in it).
pub const NAMESPACE_INDEX: &str = "namespace";

/// An index function: the values an object is filed under, or an error
/// message. Returning several values files the object under each of them.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Result<Vec<String>, String> + Send + Sync>;

/// Read access to the objects an informer already knows, by key. The
/// [`DeltaFifo`](crate::delta_fifo::DeltaFifo) uses it to decide whether a
/// delete is for a known object and which objects a relist removed.
pub trait KnownObjects<K>: Send + Sync {
    /// Keys of all known objects.
    fn list_keys(&self) -> Vec<String>;
    /// Whether no object is known (without listing the keys, where the
    /// store can tell).
    fn is_empty(&self) -> bool {
        self.list_keys().is_empty()
    }
    /// The known object under `key`, if any.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
}

/// Errors from [`Indexer`] operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No index of that name is registered.
    #[error("no index named {index:?} is registered")]
    UnknownIndex {
        /// The name asked for.
        index: String,
    },
    /// [`Indexer::add_indexers`] was given a name already registered (or the
    /// same name twice).
    #[error("an index named {index:?} is already registered")]
    IndexExists {
        /// The duplicate name.
        index: String,
    },
    /// An index function failed for an object. The object is still stored;
    /// see the module docs for the index state.
    #[error("index function {index:?} failed for object {key:?}: {message}")]
    IndexFunction {
        /// The index whose function failed.
        index: String,
        /// The key of the object it failed on.
        key: String,
        /// The function's error message (or panic message).
        message: String,
    },
}

/// The index function of [`NAMESPACE_INDEX`].
fn namespace_index_fn<K: Resource>() -> IndexFn<K> {
    Arc::new(|obj: &K| {
        Ok(obj
            .meta()
            .namespace
            .iter()
            .filter(|ns| !ns.is_empty())
            .cloned()
            .collect())
    })
}

/// Thread-safe store of `Arc<K>` by key, with secondary indexes. Cloning is
/// cheap and gives another handle to the same store.
///
/// ```
/// use std::sync::Arc;
/// use informer_core::store::{Indexer, IndexFn, NAMESPACE_INDEX};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_core::ObjectMeta;
///
/// let pod = |ns: &str, name: &str, node: &str| {
///     let mut p = Pod { metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() }, ..Default::default() };
///     p.spec.get_or_insert_default().node_name = Some(node.into());
///     Arc::new(p)
/// };
/// let by_node: IndexFn<Pod> = Arc::new(|p: &Pod| {
///     Ok(p.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect())
/// });
///
/// let indexer = Indexer::new();
/// indexer.add_indexers([("node".to_string(), by_node)]).unwrap();
/// indexer.add(pod("default", "a", "node-1")).unwrap();
/// indexer.add(pod("default", "b", "node-2")).unwrap();
/// indexer.add(pod("kube-system", "c", "node-1")).unwrap();
///
/// assert_eq!(indexer.index_keys("node", "node-1").unwrap(), ["default/a", "kube-system/c"]);
/// assert_eq!(indexer.by_index(NAMESPACE_INDEX, "default").unwrap().len(), 2);
/// assert!(indexer.by_index("no-such-index", "x").is_err());
/// ```
pub struct Indexer<K> {
    state: Arc<RwLock<State<K>>>,
    /// Set (never cleared) once an index beyond the namespace index is
    /// registered: until then writers need no index-function pass and take
    /// the write lock directly.
    custom_indexes: Arc<AtomicBool>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Indexer {
            state: self.state.clone(),
            custom_indexes: self.custom_indexes.clone(),
        }
    }
}

impl<K> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.read();
        f.debug_struct("Indexer")
            .field("len", &state.len())
            .field("indexes", &state.indexers.names)
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> Default for Indexer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Send + Sync + 'static> Indexer<K> {
    /// An empty indexer with only the [`NAMESPACE_INDEX`].
    pub fn new() -> Self {
        let set = IndexSet {
            names: vec![NAMESPACE_INDEX.to_owned()],
            funcs: vec![namespace_index_fn::<K>()],
        };
        Indexer {
            state: Arc::new(RwLock::new(State::new(Arc::new(set)))),
            custom_indexes: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Stores `obj` under its key, replacing any object already there, and
    /// refiles it in every index. On [`StoreError::IndexFunction`] the object
    /// is still stored (see the module docs).
    pub fn add(&self, obj: Arc<K>) -> Result<(), StoreError> {
        let key = object_key_arc(&*obj);
        let (replaced, err) = self.upsert(&key, obj);
        drop(replaced);
        err.map_or(Ok(()), Err)
    }

    /// Stores `obj` under `key` (which must be its key), sharing that string,
    /// and returns the object it replaced beside the first index failure.
    /// The informer's path: one key per object from the FIFO onwards, and no
    /// separate lookup of the old version.
    pub(crate) fn upsert(
        &self,
        key: &Arc<str>,
        obj: Arc<K>,
    ) -> (Option<Arc<K>>, Option<StoreError>) {
        if !self.custom_indexes.load(Ordering::Acquire) {
            // Only the built-in namespace index, which needs no index
            // function call: one write lock and done (re-checked under the
            // lock, in case indexes were added meanwhile).
            let mut state = self.state.write();
            if state.indexers.funcs.len() == 1 {
                let replaced = state.upsert(key, obj, Vec::new());
                drop(state);
                return (replaced, None);
            }
        }
        let snapshot = self.state.read().indexers.clone();
        let (values, err) = compute_values(&snapshot, key, &*obj);
        let mut state = self.state.write();
        let (values, err) = if Arc::ptr_eq(&state.indexers, &snapshot) {
            (values, err)
        } else {
            // Indexes were added meanwhile: recompute against the current set.
            let current = state.indexers.clone();
            compute_values(&current, key, &*obj)
        };
        let replaced = state.upsert(key, obj, values);
        drop(state);
        (replaced, err)
    }

    /// Same as [`add`](Self::add): stores `obj`, replacing the old version.
    pub fn update(&self, obj: Arc<K>) -> Result<(), StoreError> {
        self.add(obj)
    }

    /// Removes the object under `key` and its index entries; returns it.
    pub fn delete(&self, key: &str) -> Option<Arc<K>> {
        self.state.write().remove(key)
    }

    /// Replaces the whole content with `objs` and rebuilds every index.
    /// Index values are computed before the write lock is taken. On
    /// [`StoreError::IndexFunction`] (the first failure) all objects are
    /// still stored.
    pub fn replace(&self, objs: Vec<Arc<K>>) -> Result<(), StoreError> {
        let snapshot = self.state.read().indexers.clone();
        let keyed = objs.into_iter().map(|o| (object_key_arc(&*o), o));
        let (mut fresh, mut err) = State::from_objects(snapshot.clone(), keyed);
        let mut state = self.state.write();
        if !Arc::ptr_eq(&state.indexers, &snapshot) {
            let objects = fresh.drain_objects();
            (fresh, err) = State::from_objects(state.indexers.clone(), objects);
        }
        let old = std::mem::replace(&mut *state, fresh);
        drop(state);
        drop(old);
        err.map_or(Ok(()), Err)
    }

    /// Registers index functions and files every stored object under them.
    ///
    /// A name that is already registered, or given twice, is
    /// [`StoreError::IndexExists`] and nothing is added. If a new function
    /// fails for some object, the index is still registered, that object is
    /// not filed under it, and the first failure is returned.
    ///
    /// The functions run under the write lock (normally this is called once,
    /// before the informer starts).
    pub fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFn<K>)>,
    ) -> Result<(), StoreError> {
        let new: Vec<_> = indexers.into_iter().collect();
        let mut state = self.state.write();
        let result = state.add_indexers(new);
        if state.indexers.funcs.len() > 1 {
            self.custom_indexes.store(true, Ordering::Release);
        }
        result
    }
}

impl<K> Indexer<K> {
    /// The object stored under `key`.
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.state.read().get(key).cloned()
    }

    /// The stored version of the object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Option<Arc<K>>
    where
        K: Resource,
    {
        self.get_by_key(&object_key(obj))
    }

    /// Every stored object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.state.read().objects().cloned().collect()
    }

    /// Every stored key, in no particular order.
    pub fn list_keys(&self) -> Vec<String> {
        self.state.read().keys().map(str::to_owned).collect()
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.state.read().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Names of the registered indexes, in registration order.
    pub fn index_names(&self) -> Vec<String> {
        self.state.read().indexers.names.clone()
    }

    /// Objects filed under `value` in index `index`, in no particular order.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, StoreError> {
        let state = self.state.read();
        Ok(state
            .index_entries(index, value)?
            .map(|(_, o)| o.clone())
            .collect())
    }

    /// Keys filed under `value` in index `index`, sorted.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<String>, StoreError> {
        let mut keys: Vec<String> = self
            .state
            .read()
            .index_keys(index, value)?
            .into_iter()
            .map(str::to_owned)
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }

    /// Objects that share at least one value of index `index` with `obj`
    /// (the union over `obj`'s values), each once, sorted by key. `obj`
    /// need not be stored. Fails if the index function fails for `obj`.
    pub fn index(&self, index: &str, obj: &K) -> Result<Vec<Arc<K>>, StoreError>
    where
        K: Resource,
    {
        let func = {
            let state = self.state.read();
            let i = state
                .indexers
                .position(index)
                .ok_or_else(|| StoreError::UnknownIndex {
                    index: index.to_owned(),
                })?;
            state.indexers.funcs[i].clone()
        };
        let values = call_index_fn(&func, obj).map_err(|message| StoreError::IndexFunction {
            index: index.to_owned(),
            key: object_key(obj),
            message,
        })?;
        let state = self.state.read();
        let mut found = std::collections::BTreeMap::new();
        for value in &values {
            found.extend(state.index_entries(index, value)?);
        }
        Ok(found.into_values().cloned().collect())
    }

    /// Every value of index `index` that currently files at least one
    /// object, sorted.
    pub fn list_index_func_values(&self, index: &str) -> Result<Vec<String>, StoreError> {
        let mut values = self.state.read().index_values(index)?;
        values.sort_unstable();
        Ok(values)
    }
}

impl<K: Send + Sync> KnownObjects<K> for Indexer<K> {
    fn list_keys(&self) -> Vec<String> {
        Indexer::list_keys(self)
    }

    fn is_empty(&self) -> bool {
        Indexer::is_empty(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Indexer::get_by_key(self, key)
    }
}

#[cfg(test)]
mod tests;
