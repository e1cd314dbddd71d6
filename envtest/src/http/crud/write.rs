//! Create, update (PUT) and patch. Create assigns `uid`,
//! `creationTimestamp`, `generation: 1` and a `generateName` suffix and never
//! overwrites (409 AlreadyExists). Update enforces optimistic concurrency
//! (stale `resourceVersion` is 409; a custom resource PUT without one is 422)
//! and never creates. `generation` moves only when something outside
//! `metadata` (and outside `status` when the status subresource is enabled)
//! changes. With the status subresource, `/status` writes change only
//! `status` and main-endpoint writes leave `status` alone. Once deletion has
//! started no finalizer may be added, and removing the last one deletes the
//! object.

use super::delete::{after_removal, can_remove};
use crate::error::ApiError;
use crate::http::conversion;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::crd;
use crate::resources::objects::{json_response, now_rfc3339, obj_key, render};
use crate::resources::patch::{PatchKind, json_patch, merge_patch, strategic_merge};
use crate::resources::registry::ResourceInfo;
use crate::resources::ssa;
use crate::resources::validation::{
    FieldCheck, FieldValidation, check_immutable, check_metadata, check_name, check_namespace,
    check_type, check_webhooks, decode_object, media_type, parse_checked, parse_json,
    parse_yaml_or_json, require_json,
};
use crate::storage::{ObjKey, StoredObject, Txn};
use axum::response::Response;
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

fn meta_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
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
    super::gc::check_owners_later(srv, info.storage_key(), key, uid.to_string());
}

/// POST a new object.
pub async fn create(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let info = &t.info;
    if info.namespaced && t.namespace.is_none() {
        return Err(ApiError::method_not_allowed(
            "POST",
            &format!("{} without a namespace", info.group_resource()),
        ));
    }
    require_json(r.content_type())?;
    let fields = FieldCheck::from_query(&r.query)?;
    let (obj, duplicate) = parse_checked(&r.body)?;
    let dry = r.query.dry_run()?;
    let manager = manager_of(r);
    let ns = t.namespace.as_deref();
    let stored = match super::admit::admission_of(srv, info) {
        None => {
            let (mut obj, generate) = prepare_new(info, obj, ns, &fields, &duplicate)?;
            ssa::record_update(info, None, &mut obj, &manager, "");
            srv.store
                .txn_mode(dry, |txn| insert_new(srv, txn, info, obj, generate))?
        }
        Some(adm) => {
            let prepared =
                prepare_new(info, obj.clone(), ns, &fields, &duplicate).map(|(mut o, g)| {
                    ssa::record_update(info, None, &mut o, &manager, "");
                    (o, g)
                });
            let new = super::admit::New {
                prepared,
                raw: obj,
                manager: Some(&manager),
            };
            let attrs = super::admit::attributes(srv, t, r, "CREATE", None, dry);
            super::admit::create(srv, t, &adm, attrs, new, &fields).await?
        }
    };
    watch_owners(srv, info, &stored, dry);
    let stored = conversion::present_one(srv, info, stored).await?;
    Ok(fields.add_warnings(json_response(201, render(&stored, info))))
}

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

/// PUT an object (or its status).
pub async fn update(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let info = &t.info;
    let name = t.name.as_deref().unwrap_or("");
    let manager = manager_of(r);
    require_json(r.content_type())?;
    let fields = FieldCheck::from_query(&r.query)?;
    let (mut obj, duplicate) = parse_checked(&r.body)?;
    check_type(info, &mut obj)?;
    check_namespace(info, &mut obj, t.namespace.as_deref())?;
    let meta = meta_mut(&mut obj)?;
    match meta.get("name").and_then(Value::as_str) {
        Some(n) if n != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        _ => {
            meta.insert("name".into(), Value::String(name.to_string()));
        }
    }
    let key = obj_key(info, t.namespace.as_deref(), name);
    let compute = |txn: &mut Txn<'_>, given: Option<&Arc<StoredObject>>| {
        let old = given
            .cloned()
            .or_else(|| txn.get(&info.storage_key(), &key))
            .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))?;
        let mode = UpdateMode {
            status_only: t.sub.is_some(),
            manager: Some(&manager),
            fields: Some(&fields),
            duplicate: &duplicate,
        };
        apply_update(srv, txn, info, &key, &old, obj.clone(), mode).map(|s| (Some(old), s, 200))
    };
    super::admit::finish(srv, t, r, &fields, compute).await
}

/// The patch request, decoded.
struct PatchRequest<'a> {
    kind: PatchKind,
    body: Value,
    manager: &'a str,
    /// The subresource written through (`""`: the object itself).
    sub: &'a str,
    force: bool,
    fields: &'a FieldCheck,
    duplicate: &'a [String],
}

/// The object `old` with the patch applied.
fn patched(
    info: &ResourceInfo,
    name: &str,
    old: &Value,
    p: &PatchRequest<'_>,
) -> Result<Value, ApiError> {
    let mut doc = old.clone();
    match p.kind {
        PatchKind::Merge => merge_patch(&mut doc, &p.body)?,
        PatchKind::Json => json_patch(&mut doc, &p.body, &info.kind, name)?,
        PatchKind::Strategic if info.custom => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "strategic merge patch is not supported for custom resources; use a JSON merge patch (application/merge-patch+json)",
            ));
        }
        PatchKind::Strategic => strategic_merge(&mut doc, &p.body)?,
        PatchKind::Apply => {
            // The configuration's own `uid`/`deletionTimestamp`: apply
            // tracks no ownership of them, but may not change them either.
            check_immutable(info, old, &p.body)?;
            doc = ssa::apply(info, Some(old), &p.body, p.manager, p.sub, p.force)?
        }
    }
    Ok(doc)
}

/// Server-side apply of a configuration to an object that does not exist yet.
fn apply_create(
    srv: &Server,
    txn: &mut Txn<'_>,
    t: &Target,
    name: &str,
    p: &PatchRequest<'_>,
) -> Result<Arc<StoredObject>, ApiError> {
    let info = &t.info;
    let mut obj = ssa::apply(info, None, &p.body, p.manager, "", p.force)?;
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("name")
            .or_insert_with(|| Value::String(name.to_string()));
    }
    if obj["metadata"]["name"].as_str() != Some(name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object does not match the name on the URL ({name})"
        )));
    }
    let (obj, _) = prepare_new(info, obj, t.namespace.as_deref(), p.fields, p.duplicate)?;
    insert_new(srv, txn, info, obj, None)
}

/// PATCH an object (or its status): merge, JSON, strategic merge, or apply.
pub async fn patch(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let info = &t.info;
    let name = t.name.as_deref().unwrap_or("");
    let kind = PatchKind::from_media_type(&media_type(r.content_type()))?;
    let (body, duplicate) = match kind {
        PatchKind::Apply => parse_yaml_or_json(&r.body)?,
        _ => (parse_json(&r.body)?, Vec::new()),
    };
    let fields = FieldCheck::from_query(&r.query)?;
    let manager = manager_of(r);
    if kind == PatchKind::Apply && r.query.get("fieldManager").is_none_or(str::is_empty) {
        return Err(ApiError::bad_request(
            "PATCH with application/apply-patch+yaml requires the fieldManager query parameter",
        ));
    }
    let p = PatchRequest {
        kind,
        body,
        manager: &manager,
        sub: t.sub.as_deref().unwrap_or(""),
        force: r.query.flag("force"),
        fields: &fields,
        duplicate: &duplicate,
    };
    let key = obj_key(info, t.namespace.as_deref(), name);
    let compute = |txn: &mut Txn<'_>, given: Option<&Arc<StoredObject>>| {
        let Some(old) = given
            .cloned()
            .or_else(|| txn.get(&info.storage_key(), &key))
        else {
            if kind == PatchKind::Apply && t.sub.is_none() {
                return apply_create(srv, txn, t, name, &p).map(|s| (None, s, 201));
            }
            return Err(ApiError::not_found(&info.group, &info.plural, name));
        };
        let mut doc = patched(info, name, &old.value, &p)?;
        check_type(info, &mut doc)?;
        if doc["metadata"]["name"].as_str() != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object does not match the name on the URL ({name}); a patch cannot rename an object"
            )));
        }
        check_namespace(info, &mut doc, t.namespace.as_deref())?;
        let manager = (kind != PatchKind::Apply).then_some(manager.as_str());
        let mode = UpdateMode {
            status_only: t.sub.is_some(),
            manager,
            fields: Some(&fields),
            duplicate: &duplicate,
        };
        apply_update(srv, txn, info, &key, &old, doc, mode).map(|s| (Some(old), s, 200))
    };
    super::admit::finish(srv, t, r, &fields, compute).await
}
