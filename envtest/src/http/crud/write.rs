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

use super::persist::{
    UpdateMode, apply_update, insert_new, manager_of, meta_mut, prepare_new, watch_owners,
};
use crate::error::ApiError;
use crate::http::conversion;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::objects::{json_response, obj_key, render};
use crate::resources::patch::{PatchKind, json_patch, merge_patch, strategic_merge};
use crate::resources::registry::ResourceInfo;
use crate::resources::ssa;
use crate::resources::validation::{
    FieldCheck, check_immutable, check_namespace, check_type, media_type, parse_checked,
    parse_json, parse_yaml_or_json, require_json,
};
use crate::storage::{StoredObject, Txn};
use axum::response::Response;
use serde_json::Value;
use std::sync::Arc;

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
