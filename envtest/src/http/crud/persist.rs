//! The store side of create, update and patch, below admission: an object
//! made ready for creation ([`prepare_new`], [`insert_new`]), an update
//! applied in a transaction ([`apply_update`]) and the owners watched after
//! a write ([`watch_owners`]). The handlers (`write.rs`) and admission
//! (`admit.rs`) both call it; it calls only the removal in `gc.rs` (an
//! update that removes the last finalizer removes the object).

use super::gc::{after_removal, can_remove, check_owners_later};
use crate::error::ApiError;
use crate::http::state::Server;
use crate::request::Req;
use crate::resources::crd;
use crate::resources::objects::{now_rfc3339, obj_key};
use crate::resources::registry::ResourceInfo;
use crate::resources::ssa;
use crate::resources::validation::{
    FieldCheck, FieldValidation, check_immutable, check_metadata, check_name, check_namespace,
    check_type, check_webhooks, decode_object,
};
use crate::storage::{ObjKey, StoredObject, Txn};
use rand::Rng;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    let mut rng = rand::rng();
    (0..5)
        .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
        .collect()
}

pub(super) fn meta_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("metadata must be a JSON object"))
}

/// Validate a new object's body and fill in system fields (outside the lock).
/// Unknown fields and the body's `duplicate` fields go to `fields`.
pub(super) fn prepare_new(
    info: &ResourceInfo,
    mut obj: Value,
    ns: Option<&str>,
    fields: &FieldCheck,
    duplicate: &[String],
) -> Result<(Value, Option<String>), ApiError> {
    check_type(info, &mut obj)?;
    check_namespace(info, &mut obj, ns)?;
    let mut unknown = decode_object(info, &mut obj)?;
    let meta = meta_mut(&mut obj)?;
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let generate = meta
        .get("generateName")
        .and_then(Value::as_str)
        .filter(|g| !g.is_empty())
        .map(str::to_string);
    if name.is_empty() {
        match &generate {
            Some(g) => check_name(info, &format!("{g}x"))?,
            None => check_name(info, "")?,
        }
    } else {
        check_name(info, &name)?;
    }
    meta.insert(
        "uid".into(),
        Value::String(uuid::Uuid::new_v4().to_string()),
    );
    meta.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
    meta.insert("generation".into(), Value::from(1));
    for f in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(f);
    }
    check_metadata(info, &obj)?;
    check_webhooks(info, &obj)?;
    if info.status
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    if info.group.is_empty() && info.plural == "namespaces" {
        obj["status"] = serde_json::json!({"phase": "Active"});
    }
    if crd::is_crd(info) {
        crd::prepare(&mut obj)?;
    }
    if let Some(schema) = &info.schema {
        unknown.extend(crate::resources::schema::check(
            schema, &mut obj, &info.kind,
        )?);
    }
    fields.report(&unknown, duplicate)?;
    let generate = if name.is_empty() { generate } else { None };
    Ok((obj, generate))
}

/// Store a prepared new object under the lock: namespace must exist and be
/// live, the name must be free.
pub(super) fn insert_new(
    srv: &Server,
    txn: &mut Txn<'_>,
    info: &ResourceInfo,
    mut obj: Value,
    generate: Option<String>,
) -> Result<Arc<StoredObject>, ApiError> {
    let ns = obj["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if info.namespaced {
        match txn.get("/namespaces", &(String::new(), ns.clone())) {
            None => return Err(ApiError::not_found("", "namespaces", &ns)),
            Some(n) if !n.meta()["deletionTimestamp"].is_null() => {
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        info.group_resource(),
                        obj["metadata"]["name"].as_str().unwrap_or("")
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    let res = info.storage_key();
    let name = match generate {
        Some(g) => {
            let free = (0..16)
                .map(|_| format!("{g}{}", random_suffix()))
                .find(|n| txn.get(&res, &(ns.clone(), n.clone())).is_none());
            let n = free.ok_or_else(|| ApiError::already_exists(&info.group, &info.plural, &g))?;
            obj["metadata"]["name"] = Value::String(n.clone());
            n
        }
        None => obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
    };
    let key: ObjKey = (ns, name.clone());
    if txn.get(&res, &key).is_some() {
        return Err(ApiError::already_exists(&info.group, &info.plural, &name));
    }
    if !info.custom {
        crate::resources::defaults::apply(&info.group, &info.plural, &mut obj, true, &srv.ips);
    }
    crate::resources::limits::check_object_size(&obj)?;
    let stored = txn.put(&res, key, obj);
    if crd::is_crd(info) && !txn.is_dry() {
        crd::register(&srv.registry, &stored.value);
    }
    Ok(stored)
}

/// After a real write of an object naming owners, have the garbage
/// collector look for them (see [`super::gc::check_owners_later`]).
pub(super) fn watch_owners(
    srv: &Arc<Server>,
    info: &ResourceInfo,
    stored: &StoredObject,
    dry: bool,
) {
    if dry || crate::storage::owners::owner_uids(&stored.value).is_empty() {
        return;
    }
    let meta = stored.meta();
    let (Some(name), Some(uid)) = (meta["name"].as_str(), meta["uid"].as_str()) else {
        return;
    };
    let key = obj_key(info, meta["namespace"].as_str(), name);
    check_owners_later(srv, info.storage_key(), key, uid.to_string());
}

/// The object's finalizers.
fn finalizers(v: &Value) -> BTreeSet<String> {
    v["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn spec_changed(old: &Value, new: &Value, has_status: bool) -> bool {
    let skip = |k: &str| k == "metadata" || (has_status && k == "status");
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).filter(|k| !skip(k)).collect();
    keys.into_iter().any(|k| o.get(k) != n.get(k))
}

/// How an update is applied.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UpdateMode<'a> {
    /// A `/status` write: only `status` changes.
    pub status_only: bool,
    /// The field manager to record (None when server-side apply already did).
    pub manager: Option<&'a str>,
    /// Where unknown fields are reported (None: dropped silently).
    pub fields: Option<&'a FieldCheck>,
    /// Fields the request body gave twice.
    pub duplicate: &'a [String],
}

/// The field manager of a request: `fieldManager`, else the client's
/// User-Agent product name, else `unknown`.
pub(crate) fn manager_of(r: &Req) -> String {
    if let Some(m) = r.query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    r.headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// Apply an update to an existing object under the lock (PUT and PATCH).
pub(crate) fn apply_update(
    srv: &Server,
    txn: &mut Txn<'_>,
    info: &ResourceInfo,
    key: &ObjKey,
    old: &Arc<StoredObject>,
    mut new: Value,
    mode: UpdateMode<'_>,
) -> Result<Arc<StoredObject>, ApiError> {
    let status_only = mode.status_only;
    let name = key.1.as_str();
    match new["metadata"]["resourceVersion"]
        .as_str()
        .filter(|s| !s.is_empty())
    {
        None if info.custom => {
            return Err(ApiError::invalid(
                &info.kind,
                name,
                "metadata.resourceVersion",
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
            ));
        }
        None => {}
        Some(rv) if rv != old.rev.to_string() => {
            return Err(ApiError::conflict(
                &info.group,
                &info.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        Some(_) => {}
    }
    let mut result = if status_only {
        let mut r = old.value.clone();
        match new.get("status") {
            Some(s) => r["status"] = s.clone(),
            None => {
                if let Some(m) = r.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        // Server-side apply through `/status` recorded its ownership.
        if mode.manager.is_none()
            && let Some(mf) = new["metadata"].get("managedFields")
        {
            r["metadata"]["managedFields"] = mf.clone();
        }
        r
    } else {
        check_immutable(info, &old.value, &new)?;
        let old_meta = old.meta();
        let meta = meta_mut(&mut new)?;
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "name",
            "namespace",
        ] {
            match old_meta.get(f) {
                Some(v) => meta.insert(f.into(), v.clone()),
                None => meta.remove(f),
            };
        }
        // Writes that do not mention field ownership keep it as it was.
        if !meta.contains_key("managedFields")
            && let Some(mf) = old_meta.get("managedFields")
        {
            meta.insert("managedFields".into(), mf.clone());
        }
        if info.status
            && let Some(m) = new.as_object_mut()
        {
            match old.value.get("status") {
                Some(s) => m.insert("status".into(), s.clone()),
                None => m.remove("status"),
            };
        }
        new
    };
    let ignore = FieldCheck::new(FieldValidation::Ignore);
    let fields = mode.fields.unwrap_or(&ignore);
    let mut unknown = decode_object(info, &mut result)?;
    check_metadata(info, &result)?;
    if !info.custom && !status_only {
        // Allocated addresses are immutable; defaults are re-applied.
        if info.group.is_empty()
            && info.plural == "services"
            && result["spec"].get("clusterIP").is_none()
            && let Some(ip) = old.value["spec"].get("clusterIP")
        {
            result["spec"]["clusterIP"] = ip.clone();
        }
        crate::resources::defaults::apply(&info.group, &info.plural, &mut result, false, &srv.ips);
    }
    check_webhooks(info, &result)?;
    if let Some(schema) = &info.schema {
        unknown.extend(crate::resources::schema::check_update(
            schema,
            &mut result,
            Some(&old.value),
            &info.kind,
        )?);
    }
    fields.report(&unknown, mode.duplicate)?;
    let deleting = !old.meta()["deletionTimestamp"].is_null();
    if deleting {
        let added: Vec<String> = finalizers(&result)
            .difference(&finalizers(&old.value))
            .cloned()
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                &info.kind,
                name,
                "metadata.finalizers",
                "FieldValueForbidden",
                &format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                ),
            ));
        }
    }
    let old_gen = old.meta()["generation"].as_i64().unwrap_or(1);
    let generation = if !status_only && spec_changed(&old.value, &result, info.status) {
        old_gen + 1
    } else {
        old_gen
    };
    {
        let meta = meta_mut(&mut result)?;
        meta.insert("generation".into(), Value::from(generation));
        meta.insert("resourceVersion".into(), Value::String(old.rev.to_string()));
    }
    if let Some(m) = mode.manager {
        let sub = if status_only { "status" } else { "" };
        ssa::record_update(info, Some(&old.value), &mut result, m, sub);
    }
    if crd::is_crd(info) {
        crd::prepare(&mut result)?;
    }
    if result == old.value {
        return Ok(old.clone());
    }
    let res = info.storage_key();
    if deleting && finalizers(&result).is_empty() && can_remove(txn, &res, key) {
        let fin = txn
            .remove(&res, key, result)
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
        after_removal(srv, txn, &res, &fin.value);
        return Ok(fin);
    }
    crate::resources::limits::check_object_size(&result)?;
    let stored = txn.put(&res, key.clone(), result);
    if crd::is_crd(info) && !txn.is_dry() {
        crd::register(&srv.registry, &stored.value);
    }
    Ok(stored)
}
