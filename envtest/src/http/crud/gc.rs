//! Owner-reference garbage collection, done synchronously at deletion time
//! (what kube-controller-manager's garbage collector does asynchronously):
//!
//! - Background (the default): once an owner is really gone, each
//!   dependent that names no other owner is deleted (finalizers honoured);
//!   a dependent with other owners just loses the dangling reference.
//! - Foreground: the owner gets `deletionTimestamp` and the
//!   `foregroundDeletion` finalizer, its dependents are deleted, and the
//!   owner goes once the last dependent is gone.
//! - Orphan: dependents lose their reference to the owner and stay.
//!
//! The removal of one object ([`delete_one`], with its preconditions and
//! the bookkeeping after it) lives here too: a removal starts a collection
//! and a collection removes dependents, so the two are one unit. The
//! handlers (`delete.rs`, `write.rs`) and admission (`admit.rs`) use it.

use crate::error::ApiError;
use crate::http::state::Server;
use crate::resources::crd;
use crate::resources::objects::now_rfc3339;
use crate::storage::owners::owner_uids;
use crate::storage::{ObjKey, StoredObject, Txn};
use serde_json::Value;
use std::sync::Arc;

/// The foreground-deletion finalizer.
pub const FOREGROUND: &str = "foregroundDeletion";

/// How deletion propagates to dependents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Propagation {
    /// Delete dependents after the owner is gone.
    #[default]
    Background,
    /// Delete dependents first, then the owner.
    Foreground,
    /// Leave dependents, removing their owner reference.
    Orphan,
}

impl Propagation {
    /// Parse a `propagationPolicy` value.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        match s {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Background\", \"Foreground\", \"Orphan\""
            ))),
        }
    }
}

fn without_owner(v: &Value, uid: &str) -> Value {
    let mut v = v.clone();
    if let Some(refs) = v["metadata"]["ownerReferences"].as_array_mut() {
        refs.retain(|r| r["uid"].as_str() != Some(uid));
        if refs.is_empty()
            && let Some(m) = v["metadata"].as_object_mut()
        {
            m.remove("ownerReferences");
        }
    }
    v
}

/// Remove references to `uid` from its dependents.
pub fn orphan_dependents(txn: &mut Txn<'_>, uid: &str) {
    for (res, key) in txn.dependents_of(uid) {
        if let Some(d) = txn.get(&res, &key) {
            let v = without_owner(&d.value, uid);
            txn.put(&res, key, v);
        }
    }
}

/// Start a foreground deletion of an owner that has dependents.
pub fn start_foreground(
    srv: &Server,
    txn: &mut Txn<'_>,
    res: &str,
    key: &ObjKey,
    old: &Arc<StoredObject>,
) -> Outcome {
    let uid = old.meta()["uid"].as_str().unwrap_or("").to_string();
    let mut v = old.value.clone();
    let generation = old.meta()["generation"].as_i64().unwrap_or(1);
    v["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
    v["metadata"]["deletionGracePeriodSeconds"] = Value::from(0);
    v["metadata"]["generation"] = Value::from(generation + 1);
    let mut finalizers: Vec<Value> = v["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == FOREGROUND) {
        finalizers.push(Value::String(FOREGROUND.into()));
    }
    v["metadata"]["finalizers"] = Value::Array(finalizers);
    let marked = txn.put(res, key.clone(), v);
    let pre = Preconditions {
        propagation: Propagation::Foreground,
        ..Preconditions::default()
    };
    for (r, k) in txn.dependents_of(&uid) {
        // A dependent may already be gone through an earlier cascade.
        let _ = delete_one(srv, txn, &r, &k, &pre, "", &r);
    }
    finish_foreground(srv, txn, &uid);
    match txn.get(res, key) {
        Some(now) => Outcome::Pending(now),
        None => Outcome::Removed(marked),
    }
}

/// An owner in foreground deletion whose dependents are all gone loses the
/// `foregroundDeletion` finalizer (and goes, if it was the last one).
pub fn finish_foreground(srv: &Server, txn: &mut Txn<'_>, owner_uid: &str) {
    let Some((res, key)) = txn.locate(owner_uid) else {
        return;
    };
    let Some(owner) = txn.get(&res, &key) else {
        return;
    };
    let fins: Vec<Value> = owner.meta()["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if owner.meta()["deletionTimestamp"].is_null()
        || !fins.iter().any(|f| f == FOREGROUND)
        || !txn.dependents_of(owner_uid).is_empty()
    {
        return;
    }
    let rest: Vec<Value> = fins.into_iter().filter(|f| f != FOREGROUND).collect();
    let mut v = owner.value.clone();
    if rest.is_empty() {
        if let Some(m) = v["metadata"].as_object_mut() {
            m.remove("finalizers");
        }
        if can_remove(txn, &res, &key)
            && let Some(gone) = txn.remove(&res, &key, v)
        {
            after_removal(srv, txn, &res, &gone.value);
        }
    } else {
        v["metadata"]["finalizers"] = Value::Array(rest);
        txn.put(&res, key, v);
    }
}

/// After `value` is really gone: collect its dependents (background) and
/// let owners waiting in foreground deletion finish.
pub fn collect(srv: &Server, txn: &mut Txn<'_>, value: &Value) {
    if let Some(uid) = value["metadata"]["uid"].as_str() {
        for (res, key) in txn.dependents_of(uid) {
            let Some(d) = txn.get(&res, &key) else {
                continue;
            };
            let others = owner_uids(&d.value).into_iter().any(|o| o != uid);
            if others {
                let v = without_owner(&d.value, uid);
                txn.put(&res, key, v);
            } else {
                // The dependent may have gone through an earlier cascade.
                let _ = delete_one(srv, txn, &res, &key, &Preconditions::default(), "", &res);
            }
        }
    }
    for owner in owner_uids(value) {
        finish_foreground(srv, txn, &owner);
    }
}

/// How long after a write the collector looks for the owners an object
/// names (kube-controller-manager notices a new dependent about as fast).
pub const DANGLING_CHECK_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// After `uid` was written at `res`/`key` naming owners: shortly after,
/// delete it if none of its owners exists (same uid and name, in its
/// namespace or cluster-scoped), or drop the references to the missing
/// ones if some exist — what the garbage collector does with dependents
/// whose owner never existed or is already gone.
pub fn check_owners_later(srv: &Arc<Server>, res: String, key: ObjKey, uid: String) {
    let weak = Arc::downgrade(srv);
    tokio::spawn(async move {
        tokio::time::sleep(DANGLING_CHECK_DELAY).await;
        if let Some(srv) = weak.upgrade() {
            srv.store
                .txn(|txn| collect_dangling(&srv, txn, &res, &key, &uid));
        }
    });
}

fn owner_exists(txn: &Txn<'_>, owner: &Value, dependent_ns: &str) -> bool {
    let Some(uid) = owner["uid"].as_str() else {
        return false;
    };
    let Some((res, key)) = txn.locate(uid) else {
        return false;
    };
    let same_name = owner["name"].as_str() == Some(key.1.as_str());
    let visible = key.0.is_empty() || key.0 == dependent_ns;
    same_name && visible && txn.get(&res, &key).is_some()
}

fn collect_dangling(srv: &Server, txn: &mut Txn<'_>, res: &str, key: &ObjKey, uid: &str) {
    let Some(d) = txn.get(res, key) else {
        return;
    };
    if d.meta()["uid"].as_str() != Some(uid) {
        return;
    }
    let refs = d.meta()["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let dangling: Vec<String> = refs
        .iter()
        .filter(|r| !owner_exists(txn, r, &key.0))
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect();
    if dangling.is_empty() {
        return;
    }
    if dangling.len() == refs.len() {
        let pre = Preconditions {
            uid: Some(uid.to_string()),
            ..Preconditions::default()
        };
        // The dependent may be gone already, or be waiting on finalizers.
        let _ = delete_one(srv, txn, res, key, &pre, "", res);
    } else {
        let mut v = d.value.clone();
        for owner in &dangling {
            v = without_owner(&v, owner);
        }
        txn.put(res, key.clone(), v);
    }
}

const NAMESPACES: &str = "/namespaces";

/// DeleteOptions: preconditions, propagation and whether this is a dry run.
#[derive(Debug, Default)]
pub(super) struct Preconditions {
    pub(super) uid: Option<String>,
    pub(super) resource_version: Option<String>,
    pub(super) dry_run: bool,
    pub(super) propagation: Propagation,
}

pub(super) enum Outcome {
    Removed(Arc<StoredObject>),
    Pending(Arc<StoredObject>),
}

impl Outcome {
    pub(super) fn object(&self) -> &Arc<StoredObject> {
        match self {
            Outcome::Removed(o) | Outcome::Pending(o) => o,
        }
    }
}

fn has_finalizers(v: &Value) -> bool {
    v["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
}

/// Whether an object whose deletion has started and whose finalizers are
/// gone may be removed now (a namespace also waits for its contents).
pub(crate) fn can_remove(txn: &Txn<'_>, res: &str, key: &ObjKey) -> bool {
    res != NAMESPACES || txn.resources_with_objects_in(&key.1).is_empty()
}

/// Bookkeeping after an object is really gone.
pub(crate) fn after_removal(srv: &Server, txn: &mut Txn<'_>, res: &str, value: &Value) {
    if txn.is_dry() {
        return;
    }
    if res == crd::STORAGE_KEY {
        // Its objects go as any removed object goes: their dependents are
        // collected, and a Terminating namespace they held up finishes.
        let (objects, removed) = crd::on_removed(&srv.registry, txn, value);
        for object in &removed {
            after_removal(srv, txn, &objects, object);
        }
    }
    collect(srv, txn, value);
    if let Some(ns) = value["metadata"]["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
    {
        finish_namespace(txn, ns);
    }
}

fn finish_namespace(txn: &mut Txn<'_>, ns: &str) {
    let key = (String::new(), ns.to_string());
    let Some(obj) = txn.get(NAMESPACES, &key) else {
        return;
    };
    if obj.meta()["deletionTimestamp"].is_null()
        || has_finalizers(&obj.value)
        || !can_remove(txn, NAMESPACES, &key)
    {
        return;
    }
    txn.remove(NAMESPACES, &key, obj.value.clone());
}

#[allow(clippy::too_many_arguments)]
pub(super) fn delete_one(
    srv: &Server,
    txn: &mut Txn<'_>,
    res: &str,
    key: &ObjKey,
    pre: &Preconditions,
    group: &str,
    plural: &str,
) -> Result<Outcome, ApiError> {
    let name = key.1.as_str();
    let old = txn
        .get(res, key)
        .ok_or_else(|| ApiError::not_found(group, plural, name))?;
    let meta = old.meta();
    if let Some(uid) = &pre.uid {
        let actual = meta["uid"].as_str().unwrap_or("");
        if uid != actual {
            return Err(ApiError::conflict(
                group,
                plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &pre.resource_version
        && *rv != old.rev.to_string()
    {
        return Err(ApiError::conflict(
            group,
            plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old.rev
            ),
        ));
    }
    let uid = meta["uid"].as_str().unwrap_or("").to_string();
    if pre.propagation == Propagation::Orphan && !txn.is_dry() {
        orphan_dependents(txn, &uid);
    }
    if pre.propagation == Propagation::Foreground
        && meta["deletionTimestamp"].is_null()
        && !txn.dependents_of(&uid).is_empty()
    {
        return Ok(start_foreground(srv, txn, res, key, &old));
    }
    let is_ns = res == NAMESPACES;
    if has_finalizers(&old.value) || is_ns {
        if !meta["deletionTimestamp"].is_null() {
            return Ok(Outcome::Pending(old));
        }
        let mut v = old.value.clone();
        let generation = meta["generation"].as_i64().unwrap_or(1);
        v["metadata"]["deletionTimestamp"] = Value::String(now_rfc3339());
        v["metadata"]["deletionGracePeriodSeconds"] = Value::from(0);
        v["metadata"]["generation"] = Value::from(generation + 1);
        if is_ns {
            v["status"]["phase"] = Value::String("Terminating".into());
        }
        let marked = txn.put(res, key.clone(), v);
        if is_ns {
            for r in txn.resources_with_objects_in(name) {
                for (k, _) in txn.list(&r, Some(name)) {
                    // Objects may vanish as a cascade of earlier deletions.
                    let _ = delete_one(srv, txn, &r, &k, &Preconditions::default(), "", &r);
                }
            }
            finish_namespace(txn, name);
            if txn.get(res, key).is_none() {
                let gone = txn.get(res, key).unwrap_or(marked);
                return Ok(Outcome::Removed(gone));
            }
        }
        return Ok(Outcome::Pending(marked));
    }
    let removed = txn
        .remove(res, key, old.value.clone())
        .ok_or_else(|| ApiError::not_found(group, plural, name))?;
    after_removal(srv, txn, res, &removed.value);
    Ok(Outcome::Removed(removed))
}
