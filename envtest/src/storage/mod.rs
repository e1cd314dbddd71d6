//! Object storage with one global revision. Objects are kept per resource
//! (`group/plural`) keyed by namespace and name, each stored once as a
//! shared [`StoredObject`] holding both its JSON value and its pre-serialized
//! bytes, so lists and watch fan-out never deep-copy. Every write bumps the
//! revision, stamps `metadata.resourceVersion` and appends an [`Event`] to a
//! bounded history window; watchers subscribe to a per-resource broadcast
//! channel. The history also lets a paginated LIST reconstruct the exact
//! snapshot its continue token names, for as long as that revision stays
//! inside the window.

mod journal;
pub mod owners;
mod page;
mod scan;

pub use page::{Page, PageRequest};

use crate::storage::owners::{Location, OwnerIndex};
use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};
use tokio::sync::broadcast;

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type ObjKey = (String, String);

/// Errors from reading history.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// The revision is older than the retained history.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The revision asked for.
        requested: u64,
        /// The oldest revision still resumable.
        oldest: u64,
    },
    /// The revision has not been reached yet.
    #[error("too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The revision asked for.
        requested: u64,
        /// The current revision.
        current: u64,
    },
}

/// One stored object version: the value, its JSON bytes and (once asked
/// for) its protobuf message.
#[derive(Debug)]
pub struct StoredObject {
    /// The object, with `metadata.resourceVersion` set to `rev`.
    pub value: Value,
    /// `value` serialized once.
    pub json: Bytes,
    /// The revision that wrote this version.
    pub rev: u64,
    /// `value` in its kind's protobuf message, encoded by the codec layer
    /// the first time a reader asks for protobuf and then shared by every
    /// list page and watch event (`None`: it has no protobuf form).
    pub protobuf: OnceLock<Option<Bytes>>,
}

impl StoredObject {
    fn new(mut value: Value, rev: u64) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
        }
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Self::from_parts(value, json, rev)
    }

    /// A stored object from its value, the value's JSON bytes and its
    /// revision (the protobuf form is encoded when first asked for).
    pub fn from_parts(value: Value, json: Bytes, rev: u64) -> Self {
        StoredObject {
            value,
            json,
            rev,
            protobuf: OnceLock::new(),
        }
    }

    /// The object's `metadata`, or `Null`.
    pub fn meta(&self) -> &Value {
        self.value.get("metadata").unwrap_or(&Value::Null)
    }
}

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One write, as kept in history and sent to watchers.
#[derive(Debug)]
pub struct Event {
    /// The revision of the write.
    pub rev: u64,
    /// Storage key of the resource (`group/plural`).
    pub resource: Arc<str>,
    /// What happened.
    pub kind: EventType,
    /// Namespace and name.
    pub key: ObjKey,
    /// The object after the write (for Deleted: its final state).
    pub object: Arc<StoredObject>,
    /// The object before the write (None for Added).
    pub prev: Option<Arc<StoredObject>>,
    /// The newline-terminated watch line `{"type":..,"object":..}`.
    pub line: Bytes,
}

/// Build one newline-delimited watch line around pre-serialized object bytes.
pub fn event_line(kind: &str, object_json: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object_json.len() + 32);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(kind.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    v.extend_from_slice(object_json);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

struct Table {
    objects: BTreeMap<ObjKey, Arc<StoredObject>>,
    tx: broadcast::Sender<Arc<Event>>,
}

struct State {
    rev: u64,
    /// Oldest revision a watch may resume from (events after it are retained).
    compacted: u64,
    window: usize,
    channel_capacity: usize,
    tables: HashMap<Arc<str>, Table>,
    history: VecDeque<Arc<Event>>,
    owners: OwnerIndex,
    journal: Option<journal::Journal>,
}

impl State {
    fn table(&mut self, res: &str) -> &mut Table {
        if !self.tables.contains_key(res) {
            let (tx, _) = broadcast::channel(self.channel_capacity);
            self.tables.insert(
                Arc::from(res),
                Table {
                    objects: BTreeMap::new(),
                    tx,
                },
            );
        }
        // The entry was inserted above if missing.
        self.tables.get_mut(res).unwrap_or_else(|| unreachable!())
    }

    fn record(
        &mut self,
        res: &str,
        kind: EventType,
        key: ObjKey,
        object: Arc<StoredObject>,
        prev: Option<Arc<StoredObject>>,
    ) {
        let resource: Arc<str> = self
            .tables
            .get_key_value(res)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| Arc::from(res));
        let line = event_line(kind.as_str(), &object.json);
        let ev = Arc::new(Event {
            rev: object.rev,
            resource,
            kind,
            key,
            object,
            prev,
            line,
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.window {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rev;
            }
        }
        // No receivers is fine: nobody is watching this resource.
        let _ = self.table(res).tx.send(ev);
    }
}

/// A write transaction: holds the storage lock for its whole life, so a
/// handler's read-check-write is atomic.
pub struct Txn<'a> {
    st: &'a mut State,
    dry: bool,
}

impl Txn<'_> {
    /// The current global revision.
    pub fn rev(&self) -> u64 {
        self.st.rev
    }

    /// Where the object with `uid` is stored.
    pub fn locate(&self, uid: &str) -> Option<Location> {
        self.st.owners.locate(uid)
    }

    /// Objects that name `uid` in their ownerReferences.
    pub fn dependents_of(&self, uid: &str) -> Vec<Location> {
        self.st.owners.dependents(uid)
    }

    /// Whether this is a dry run: writes are computed but not stored.
    pub fn is_dry(&self) -> bool {
        self.dry
    }

    /// One object.
    pub fn get(&self, res: &str, key: &ObjKey) -> Option<Arc<StoredObject>> {
        self.st
            .tables
            .get(res)
            .and_then(|t| t.objects.get(key))
            .cloned()
    }

    /// Objects of a resource, optionally in one namespace, ordered by key.
    pub fn list(&self, res: &str, ns: Option<&str>) -> Vec<(ObjKey, Arc<StoredObject>)> {
        let Some(t) = self.st.tables.get(res) else {
            return Vec::new();
        };
        match ns {
            None => t
                .objects
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Some(ns) => t
                .objects
                .range((ns.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == ns)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Whether any object of any resource lives in namespace `ns`.
    pub fn resources_with_objects_in(&self, ns: &str) -> Vec<String> {
        self.st
            .tables
            .iter()
            .filter(|(_, t)| {
                t.objects
                    .range((ns.to_string(), String::new())..)
                    .next()
                    .is_some_and(|(k, _)| k.0 == ns)
            })
            .map(|(k, _)| k.to_string())
            .collect()
    }

    /// Create or replace an object; bumps the revision and records ADDED or MODIFIED.
    pub fn put(&mut self, res: &str, key: ObjKey, value: Value) -> Arc<StoredObject> {
        if self.dry {
            return Arc::new(StoredObject::new(value, self.st.rev));
        }
        self.st.rev += 1;
        let obj = Arc::new(StoredObject::new(value, self.st.rev));
        let prev = self.st.table(res).objects.insert(key.clone(), obj.clone());
        if let Some(p) = &prev {
            self.st.owners.remove(res, &key, &p.value);
        }
        self.st.owners.add(res, &key, &obj.value);
        if let Some(j) = &mut self.st.journal {
            j.put(res, &key, &obj);
        }
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.st.record(res, kind, key, obj.clone(), prev);
        obj
    }

    /// Remove an object, recording DELETED with `final_value` stamped at the
    /// new revision. Returns None if it did not exist.
    pub fn remove(
        &mut self,
        res: &str,
        key: &ObjKey,
        final_value: Value,
    ) -> Option<Arc<StoredObject>> {
        if self.dry {
            self.get(res, key)?;
            return Some(Arc::new(StoredObject::new(final_value, self.st.rev)));
        }
        let prev = self.st.table(res).objects.remove(key)?;
        self.st.owners.remove(res, key, &prev.value);
        self.st.rev += 1;
        let rev = self.st.rev;
        if let Some(j) = &mut self.st.journal {
            j.delete(res, key, rev);
        }
        let obj = Arc::new(StoredObject::new(final_value, self.st.rev));
        self.st.record(
            res,
            EventType::Deleted,
            key.clone(),
            obj.clone(),
            Some(prev),
        );
        Some(obj)
    }
}

/// How a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchFrom {
    /// Synthetic ADDED for every current object, then changes.
    Now,
    /// Exactly the changes after this revision.
    Rev(u64),
}

/// What a new watch gets: its starting point and a live subscription taken
/// atomically with it, so nothing is missed or repeated.
pub struct WatchStart {
    /// Current objects (for [`WatchFrom::Now`]).
    pub initial: Vec<Arc<StoredObject>>,
    /// Retained events after the requested revision (for [`WatchFrom::Rev`]).
    pub backlog: Vec<Arc<Event>>,
    /// The revision at subscription time.
    pub rev: u64,
    /// Live events after `rev`.
    pub rx: broadcast::Receiver<Arc<Event>>,
}

/// The storage of one server.
pub struct Store {
    state: Mutex<State>,
    /// Remaining counts of unfinished paginated lists (see [`page`]).
    page_counts: Mutex<page::PageCounts>,
}

impl Store {
    /// New empty storage keeping `window` events of history; each watcher may
    /// fall at most `channel_capacity` events behind before it is closed.
    pub fn new(window: usize, channel_capacity: usize) -> Self {
        Store {
            state: Mutex::new(State {
                rev: 1,
                compacted: 1,
                window: window.max(1),
                channel_capacity: channel_capacity.max(16),
                tables: HashMap::new(),
                history: VecDeque::new(),
                owners: OwnerIndex::default(),
                journal: None,
            }),
            page_counts: Mutex::new(page::PageCounts::default()),
        }
    }

    /// Storage persisted in `dir` (see [`journal`]): existing state is
    /// loaded, and every later write is fsync'd before it returns.
    pub fn open(
        dir: &std::path::Path,
        window: usize,
        channel_capacity: usize,
    ) -> std::io::Result<Self> {
        let store = Store::new(window, channel_capacity);
        {
            let mut st = store.state.lock();
            let j = journal::open(dir, &mut st)?;
            st.journal = Some(j);
        }
        Ok(store)
    }

    /// Run `f` under the storage lock.
    pub fn txn<R>(&self, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        self.txn_mode(false, f)
    }

    /// Run `f` under the storage lock; with `dry` set, writes are computed
    /// and returned but nothing is stored or announced.
    pub fn txn_mode<R>(&self, dry: bool, f: impl FnOnce(&mut Txn<'_>) -> R) -> R {
        let mut guard = self.state.lock();
        let mut txn = Txn {
            st: &mut guard,
            dry,
        };
        f(&mut txn)
    }

    /// The current revision.
    pub fn rev(&self) -> u64 {
        self.state.lock().rev
    }

    /// Forget all history: resuming from any revision before now is 410.
    pub fn compact(&self) {
        let mut st = self.state.lock();
        st.history.clear();
        st.compacted = st.rev;
    }

    /// Start a watch on `res`.
    pub fn watch(&self, res: &str, from: WatchFrom) -> Result<WatchStart, StorageError> {
        let mut st = self.state.lock();
        let rev = st.rev;
        let compacted = st.compacted;
        match from {
            WatchFrom::Now => {
                let table = st.table(res);
                let initial = table.objects.values().cloned().collect();
                let rx = table.tx.subscribe();
                Ok(WatchStart {
                    initial,
                    backlog: Vec::new(),
                    rev,
                    rx,
                })
            }
            WatchFrom::Rev(x) => {
                if x < compacted {
                    return Err(StorageError::Expired {
                        requested: x,
                        oldest: compacted,
                    });
                }
                if x > rev {
                    return Err(StorageError::TooLarge {
                        requested: x,
                        current: rev,
                    });
                }
                let start = st.history.partition_point(|e| e.rev <= x);
                let backlog = st
                    .history
                    .range(start..)
                    .filter(|e| &*e.resource == res)
                    .cloned()
                    .collect();
                let rx = st.table(res).tx.subscribe();
                Ok(WatchStart {
                    initial: Vec::new(),
                    backlog,
                    rev,
                    rx,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str, v: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d"}, "data": {"v": v}})
    }

    fn key(name: &str) -> ObjKey {
        ("d".into(), name.into())
    }

    #[test]
    fn writes_bump_one_global_revision_and_stamp_objects() {
        let s = Store::new(100, 100);
        let a = s.txn(|t| t.put("/configmaps", key("a"), cm("a", "1")));
        let b = s.txn(|t| t.put("/secrets", key("b"), cm("b", "1")));
        assert_eq!(b.rev, a.rev + 1);
        assert_eq!(a.value["metadata"]["resourceVersion"], a.rev.to_string());
    }

    #[test]
    fn snapshot_reconstructs_past_state() {
        let s = Store::new(100, 100);
        s.txn(|t| t.put("/configmaps", key("a"), cm("a", "1")));
        let r1 = s.rev();
        s.txn(|t| {
            t.put("/configmaps", key("a"), cm("a", "2"));
            t.put("/configmaps", key("b"), cm("b", "1"));
            t.remove("/configmaps", &key("a"), cm("a", "2"));
        });
        let snap = s.snapshot("/configmaps", r1).unwrap();
        assert_eq!(snap.len(), 1);
        assert_eq!(snap[&key("a")].value["data"]["v"], "1");
        let now = s.snapshot("/configmaps", s.rev()).unwrap();
        assert_eq!(now.keys().collect::<Vec<_>>(), vec![&key("b")]);
    }

    #[test]
    fn scan_merges_past_state_by_namespace_and_start_key() {
        let s = Store::new(100, 100);
        let put = |ns: &str, n: &str, v: &str| {
            let mut o = cm(n, v);
            o["metadata"]["namespace"] = json!(ns);
            s.txn(|t| t.put("/configmaps", (ns.into(), n.into()), o))
        };
        put("a", "x", "1");
        put("b", "x", "1");
        put("b", "y", "1");
        let r = s.rev();
        put("b", "w", "2");
        s.txn(|t| t.remove("/configmaps", &("b".into(), "x".into()), cm("x", "1")));
        put("b", "y", "2");
        let seen = |at: Option<u64>, after: Option<&ObjKey>| {
            let mut out = Vec::new();
            s.scan("/configmaps", at, Some("b"), after, |k, o| {
                out.push(format!(
                    "{}={}",
                    k.1,
                    o.value["data"]["v"].as_str().unwrap()
                ));
                true
            })
            .unwrap();
            out
        };
        assert_eq!(seen(Some(r), None), vec!["x=1", "y=1"]);
        assert_eq!(seen(None, None), vec!["w=2", "y=2"]);
        assert_eq!(seen(Some(r), Some(&("b".into(), "x".into()))), vec!["y=1"]);
        assert_eq!(seen(None, Some(&("b".into(), "w".into()))), vec!["y=2"]);
    }

    #[test]
    fn dry_runs_store_nothing() {
        let s = Store::new(100, 100);
        let r = s.rev();
        let o = s.txn_mode(true, |t| t.put("/configmaps", key("a"), cm("a", "1")));
        assert_eq!(o.value["data"]["v"], "1");
        assert_eq!(s.rev(), r);
        assert!(s.txn(|t| t.get("/configmaps", &key("a"))).is_none());
        s.txn(|t| t.put("/configmaps", key("a"), cm("a", "1")));
        assert!(
            s.txn_mode(true, |t| t.remove("/configmaps", &key("a"), cm("a", "1")))
                .is_some()
        );
        assert!(s.txn(|t| t.get("/configmaps", &key("a"))).is_some());
    }

    #[test]
    fn history_window_expires_old_revisions() {
        let s = Store::new(2, 100);
        let r0 = s.rev();
        for i in 0..5 {
            s.txn(|t| t.put("/configmaps", key("a"), cm("a", &i.to_string())));
        }
        assert!(matches!(
            s.watch("/configmaps", WatchFrom::Rev(r0)),
            Err(StorageError::Expired { .. })
        ));
        let ok = s.watch("/configmaps", WatchFrom::Rev(s.rev() - 2)).unwrap();
        assert_eq!(ok.backlog.len(), 2);
        s.compact();
        assert!(s.watch("/configmaps", WatchFrom::Rev(s.rev() - 1)).is_err());
        assert!(s.watch("/configmaps", WatchFrom::Rev(s.rev())).is_ok());
        assert!(matches!(
            s.snapshot("/configmaps", s.rev() + 1),
            Err(StorageError::TooLarge { .. })
        ));
    }
}
