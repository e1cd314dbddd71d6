//! The data behind an [`Indexer`](super::Indexer): objects by key and the
//! secondary indexes over them, with no locking (the caller holds the lock).
//!
//! Each stored entry remembers the index values computed for it, so removing
//! an object never calls an index function again: a delete or update always
//! removes exactly what an earlier add inserted, even if index functions are
//! not deterministic or fail. Index values and keys are interned `Arc<str>`s
//! shared between the entries and the index maps. The index maps hold the
//! object `Arc`s too, so `by_index` reads objects without a second lookup
//! per key; every write refreshes them.
//!
//! Index 0 is always the built-in namespace index. Its value is the
//! namespace part of the key (the same string its index function returns
//! for any object the API server can hold), so entries store nothing for it:
//! an object costs the namespace index one `(key, object)` slot and no
//! allocation of its own, and entries of objects without custom indexes own
//! no heap at all besides the shared key.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::{IndexFn, StoreError};

/// The registered index functions, in registration order. Shared as
/// `Arc<IndexSet<K>>` so a writer can compute index values outside the lock
/// and check afterwards (by pointer) that the set did not change meanwhile.
pub(super) struct IndexSet<K> {
    pub(super) names: Vec<String>,
    pub(super) funcs: Vec<IndexFn<K>>,
}

impl<K> Clone for IndexSet<K> {
    fn clone(&self) -> Self {
        IndexSet {
            names: self.names.clone(),
            funcs: self.funcs.clone(),
        }
    }
}

impl<K> IndexSet<K> {
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
}

/// Index values of one object for the custom indexes (index 1 onwards):
/// one sorted, de-duplicated list per index.
pub(super) type Values = Vec<Vec<String>>;

/// Position of the built-in namespace index in every [`IndexSet`]; its
/// values come from the key (see the module docs), never from `Values`.
pub(super) const NAMESPACE_POSITION: usize = 0;

/// The namespace index value of `key`: the part before the `/`, if any.
fn namespace_of(key: &str) -> Option<&str> {
    key.split_once('/')
        .map(|(ns, _)| ns)
        .filter(|ns| !ns.is_empty())
}

/// One index: value -> (key -> object) of the objects with that value.
type Index<K> = HashMap<Arc<str>, HashMap<Arc<str>, Arc<K>>>;

/// `values[i]` are the values an object was filed under in custom index
/// `i + 1`.
type CustomValues = Vec<Box<[Arc<str>]>>;

struct Entry<K> {
    obj: Arc<K>,
    /// `None` without custom indexes; boxed so that an entry stays two
    /// pointers wide (the common case, namespace index only, allocates nothing).
    values: Option<Box<CustomValues>>,
}

pub(super) struct State<K> {
    items: HashMap<Arc<str>, Entry<K>>,
    pub(super) indexers: Arc<IndexSet<K>>,
    /// Parallel to `indexers`.
    indices: Vec<Index<K>>,
}

/// Calls an index function, turning a panic into an error message.
pub(super) fn call_index_fn<K>(f: &IndexFn<K>, obj: &K) -> Result<Vec<String>, String> {
    match catch_unwind(AssertUnwindSafe(|| f(obj))) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            Err(format!("index function panicked: {what}"))
        }
    }
}

/// Runs one index function for one object. On failure the object gets no
/// values in that index; the error names the key and the index.
fn values_for<K>(
    name: &str,
    f: &IndexFn<K>,
    key: &str,
    obj: &K,
) -> Result<Vec<String>, StoreError> {
    match call_index_fn(f, obj) {
        Ok(mut values) => {
            values.sort_unstable();
            values.dedup();
            Ok(values)
        }
        Err(message) => {
            tracing::warn!(index = name, object = key, error = %message, "index function failed");
            Err(StoreError::IndexFunction {
                index: name.to_owned(),
                key: key.to_owned(),
                message,
            })
        }
    }
}

/// Computes every custom index's values for `obj` (the namespace index
/// needs none). A failing index gets no values; the first failure (in
/// registration order) is returned beside the values.
pub(super) fn compute_values<K>(
    set: &IndexSet<K>,
    key: &str,
    obj: &K,
) -> (Values, Option<StoreError>) {
    let mut first_err = None;
    let values = set
        .names
        .iter()
        .zip(&set.funcs)
        .skip(NAMESPACE_POSITION + 1)
        .map(|(name, f)| {
            values_for(name, f, key, obj).unwrap_or_else(|e| {
                first_err.get_or_insert(e);
                Vec::new()
            })
        })
        .collect();
    (values, first_err)
}

/// Files `(key, obj)` under `value`, replacing the object if the key is
/// already there.
fn file_under<K>(index: &mut Index<K>, value: &str, key: &Arc<str>, obj: &Arc<K>) {
    match index.get_mut(value) {
        Some(set) => {
            set.insert(key.clone(), obj.clone());
        }
        None => {
            index.insert(
                Arc::from(value),
                HashMap::from([(key.clone(), obj.clone())]),
            );
        }
    }
}

/// Like [`file_under`], and returns the interned value string.
fn insert_value<K>(index: &mut Index<K>, value: &str, key: &Arc<str>, obj: &Arc<K>) -> Arc<str> {
    if let Some(set) = index.get_mut(value) {
        set.insert(key.clone(), obj.clone());
        // Reuse the interned value string held by the map.
        if let Some((interned, _)) = index.get_key_value(value) {
            return interned.clone();
        }
    }
    let interned: Arc<str> = Arc::from(value);
    index.insert(
        interned.clone(),
        HashMap::from([(key.clone(), obj.clone())]),
    );
    interned
}

fn remove_value<K>(index: &mut Index<K>, value: &str, key: &str) {
    if let Some(set) = index.get_mut(value) {
        set.remove(key);
        if set.is_empty() {
            index.remove(value);
        }
    }
}

fn same_values(old: &[Arc<str>], new: &[String]) -> bool {
    old.len() == new.len() && old.iter().zip(new).all(|(a, b)| **a == **b)
}

impl<K> State<K> {
    pub(super) fn new(indexers: Arc<IndexSet<K>>) -> Self {
        let indices = indexers.names.iter().map(|_| Index::new()).collect();
        State {
            items: HashMap::new(),
            indexers,
            indices,
        }
    }

    /// Builds a state holding `objs` (later duplicates of a key win), with
    /// index values computed from `indexers`. Returns the first index failure.
    pub(super) fn from_objects(
        indexers: Arc<IndexSet<K>>,
        objs: impl IntoIterator<Item = (Arc<str>, Arc<K>)>,
    ) -> (Self, Option<StoreError>) {
        let objs = objs.into_iter();
        let mut state = State::new(indexers.clone());
        state.items.reserve(objs.size_hint().0);
        let mut first_err = None;
        for (key, obj) in objs {
            let (values, err) = compute_values(&indexers, &key, &*obj);
            if let Some(e) = err {
                first_err.get_or_insert(e);
            }
            state.upsert(&key, obj, values);
        }
        (state, first_err)
    }

    /// Takes every `(key, object)` out, leaving the state empty.
    pub(super) fn drain_objects(&mut self) -> Vec<(Arc<str>, Arc<K>)> {
        for index in &mut self.indices {
            index.clear();
        }
        self.items.drain().map(|(k, e)| (k, e.obj)).collect()
    }

    /// Stores `obj` under `key` with precomputed `values` (one list per
    /// custom index, as from [`compute_values`] with the current index set).
    /// Returns the object it replaced. A new entry shares `key`'s string.
    pub(super) fn upsert(&mut self, key: &Arc<str>, obj: Arc<K>, values: Values) -> Option<Arc<K>> {
        let (key_arc, old_obj, old_values) = match self.items.remove_entry(&**key) {
            Some((k, e)) => (k, Some(e.obj), e.values),
            None => (Arc::clone(key), None, None),
        };
        if let Some(ns) = namespace_of(&key_arc) {
            // Same key, same namespace: this inserts or refreshes the object.
            file_under(&mut self.indices[NAMESPACE_POSITION], ns, &key_arc, &obj);
        }
        let mut old_values = old_values.map(|v| *v).unwrap_or_default();
        let mut entry_values = Vec::with_capacity(values.len());
        for (i, new) in values.into_iter().enumerate() {
            let index = &mut self.indices[NAMESPACE_POSITION + 1 + i];
            let old_i = old_values
                .get_mut(i)
                .map(std::mem::take)
                .unwrap_or_default();
            if same_values(&old_i, &new) {
                // Same values: only the object the index holds changes.
                for v in old_i.iter() {
                    if let Some(slot) = index.get_mut(&**v).and_then(|set| set.get_mut(&*key_arc)) {
                        *slot = obj.clone();
                    }
                }
                entry_values.push(old_i);
                continue;
            }
            for v in old_i.iter() {
                remove_value(index, v, &key_arc);
            }
            let interned: Box<[Arc<str>]> = new
                .iter()
                .map(|v| insert_value(index, v, &key_arc, &obj))
                .collect();
            entry_values.push(interned);
        }
        self.items.insert(
            key_arc,
            Entry {
                obj,
                values: (!entry_values.is_empty()).then(|| Box::new(entry_values)),
            },
        );
        old_obj
    }

    /// Removes the object under `key` and all its index entries.
    pub(super) fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let entry = self.items.remove(key)?;
        if let Some(ns) = namespace_of(key) {
            remove_value(&mut self.indices[NAMESPACE_POSITION], ns, key);
        }
        let custom = self.indices.iter_mut().skip(NAMESPACE_POSITION + 1);
        for (index, values) in custom.zip(entry.values.iter().flat_map(|v| v.iter())) {
            for v in values.iter() {
                remove_value(index, v, key);
            }
        }
        Some(entry.obj)
    }

    pub(super) fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.items.get(key).map(|e| &e.obj)
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn objects(&self) -> impl Iterator<Item = &Arc<K>> {
        self.items.values().map(|e| &e.obj)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.items.keys().map(|k| &**k)
    }

    fn index_of(&self, name: &str) -> Result<&Index<K>, StoreError> {
        self.indexers
            .position(name)
            .map(|i| &self.indices[i])
            .ok_or_else(|| StoreError::UnknownIndex {
                index: name.to_owned(),
            })
    }

    /// Keys filed under `value` in index `name` (in no particular order).
    pub(super) fn index_keys(&self, name: &str, value: &str) -> Result<Vec<&str>, StoreError> {
        Ok(self
            .index_of(name)?
            .get(value)
            .map(|set| set.keys().map(|k| &**k).collect())
            .unwrap_or_default())
    }

    /// `(key, object)` pairs filed under `value` in index `name` (in no
    /// particular order).
    pub(super) fn index_entries(
        &self,
        name: &str,
        value: &str,
    ) -> Result<impl Iterator<Item = (&str, &Arc<K>)>, StoreError> {
        let set = self.index_of(name)?.get(value);
        Ok(set.into_iter().flatten().map(|(k, o)| (&**k, o)))
    }

    /// Every value of index `name` that has at least one object.
    pub(super) fn index_values(&self, name: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.index_of(name)?.keys().map(|v| v.to_string()).collect())
    }

    /// Adds index functions and files every stored object under them.
    /// Nothing changes if a name is already registered or repeated.
    pub(super) fn add_indexers(
        &mut self,
        new: Vec<(String, IndexFn<K>)>,
    ) -> Result<(), StoreError> {
        for (i, (name, _)) in new.iter().enumerate() {
            if self.indexers.position(name).is_some() || new[..i].iter().any(|(n, _)| n == name) {
                return Err(StoreError::IndexExists {
                    index: name.clone(),
                });
            }
        }
        let mut set = (*self.indexers).clone();
        let mut first_err = None;
        for (name, f) in new {
            let mut index = Index::new();
            for (key, entry) in &mut self.items {
                let values = values_for(&name, &f, key, &*entry.obj).unwrap_or_else(|e| {
                    first_err.get_or_insert(e);
                    Vec::new()
                });
                let interned: Box<[Arc<str>]> = values
                    .iter()
                    .map(|v| insert_value(&mut index, v, key, &entry.obj))
                    .collect();
                entry.values.get_or_insert_default().push(interned);
            }
            set.names.push(name);
            set.funcs.push(f);
            self.indices.push(index);
        }
        self.indexers = Arc::new(set);
        first_err.map_or(Ok(()), Err)
    }
}
