//! Writes through admission: how create, update, patch (and apply), the
//! `status` subresource and delete run when webhooks are configured, so
//! that no storage lock is held while a webhook is called.
//!
//! A write is first computed in a dry-run transaction (the object as it
//! would be stored, or, on create, the prepared object); mutating webhooks
//! see it and their patches are applied; a changed object is prepared and
//! checked again (schema validation after mutation); validating webhooks
//! see the result; then it is committed in a transaction that checks the
//! stored object has not moved meanwhile (if it has, the whole write starts
//! again, webhooks included, as kube-apiserver's retried updates do).
//! Nothing is stored for a refused write.

use super::persist::{UpdateMode, apply_update, insert_new, prepare_new, watch_owners};
use crate::error::ApiError;
use crate::http::admission::Admission;
use crate::http::admission::review::Attributes;
use crate::http::authz::UserInfo;
use crate::http::conversion;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::objects::{json_response, obj_key, render};
use crate::resources::registry::ResourceInfo;
use crate::resources::validation::{FieldCheck, FieldValidation};
use crate::storage::{ObjKey, StoredObject, Txn};
use axum::response::Response;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::sync::Arc;

/// How many times an update that raced another write is started again.
const ATTEMPTS: usize = 8;

/// What an update computes under the lock: the object it found (`None`
/// when server-side apply creates), the result, and the status code.
pub(crate) type Computed = (Option<Arc<StoredObject>>, Arc<StoredObject>, u16);

/// The admission attributes of a request to `t`.
pub(super) fn attributes(
    srv: &Server,
    t: &Target,
    r: &Req,
    operation: &'static str,
    old: Option<Value>,
    dry: bool,
) -> Attributes {
    let info = &t.info;
    let options = match operation {
        "CREATE" => json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
        "DELETE" => {
            let mut o = serde_json::from_slice::<Value>(&r.body)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            o["kind"] = json!("DeleteOptions");
            o["apiVersion"] = json!("meta.k8s.io/v1");
            o
        }
        _ if r.method == http::Method::PATCH => {
            json!({"kind": "PatchOptions", "apiVersion": "meta.k8s.io/v1"})
        }
        _ => json!({"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}),
    };
    let mut options = options;
    if operation != "DELETE" {
        if let Some(m) = r.query.get("fieldManager").filter(|m| !m.is_empty()) {
            options["fieldManager"] = json!(m);
        }
        if dry {
            options["dryRun"] = json!(["All"]);
        }
        if r.query.flag("force") {
            options["force"] = json!(true);
        }
    }
    Attributes {
        group: info.group.clone(),
        version: info.version.clone(),
        webhook_version: None,
        kind: info.kind.clone(),
        resource_group: info.group.clone(),
        resource: info.plural.clone(),
        sub: t.sub.clone().unwrap_or_default(),
        namespaced: info.namespaced,
        operation,
        namespace: t.namespace.clone().unwrap_or_default(),
        name: t.name.clone().unwrap_or_default(),
        old_object: old,
        dry_run: dry,
        options,
        user: srv
            .authz
            .identify(&r.headers)
            .unwrap_or_else(UserInfo::admin),
    }
}

/// A new object on its way in.
pub(super) struct New<'a> {
    /// The object prepared for storing (or why it cannot be).
    pub prepared: Result<(Value, Option<String>), ApiError>,
    /// The object as the request gave it (what mutating webhooks see when
    /// it could not be prepared: one of them may complete it).
    pub raw: Value,
    /// The field manager to record when a mutated object is prepared again.
    pub manager: Option<&'a str>,
}

/// Run an update (`compute`: the old object, the result and the status
/// code, under the store's lock; from a given old object when the stored
/// one is in another version) through admission when any is configured
/// (or conversion when the request's version is not the storage version),
/// and answer it.
pub(super) async fn finish<F>(
    srv: &Arc<Server>,
    t: &Target,
    r: &Req,
    fields: &FieldCheck,
    compute: F,
) -> Result<Response, ApiError>
where
    F: Fn(&mut Txn<'_>, Option<&Arc<StoredObject>>) -> Result<Computed, ApiError>,
{
    let info = &t.info;
    let dry = r.query.dry_run()?;
    let (stored, code) = match admission_of(srv, info) {
        None => {
            let (_, stored, code) = srv.store.txn_mode(dry, |txn| compute(txn, None))?;
            (stored, code)
        }
        Some(adm) => update(srv, t, r, &adm, fields, compute, dry).await?,
    };
    watch_owners(srv, info, &stored, dry);
    let stored = conversion::present_one(srv, info, stored).await?;
    Ok(fields.add_warnings(json_response(code, render(&stored, info))))
}

/// The admission writes to `info` go through: the configured one, or none
/// but conversion when the request's version is not the storage version.
pub(super) fn admission_of(srv: &Server, info: &ResourceInfo) -> Option<Admission> {
    Admission::load(srv, info)
        .map(|a| a.with_conversion(convert_for_webhook))
        .or_else(|| conversion::converts_writes(srv, info).then(Admission::default))
}

/// `obj` (of `info`'s resource) in `desired` (`group/version`) for an
/// admission webhook whose rule names that version: by the CRD's
/// conversion webhook, else (`strategy: None`) by rewriting `apiVersion`.
fn convert_for_webhook<'a>(
    srv: &'a Server,
    info: &'a ResourceInfo,
    mut obj: Value,
    desired: String,
) -> BoxFuture<'a, Result<Value, ApiError>> {
    Box::pin(async move {
        let Some(conv) = conversion::of(srv, info) else {
            obj["apiVersion"] = json!(desired);
            return Ok(obj);
        };
        conversion::convert(srv, &conv, &info.kind, vec![obj], &desired)
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("conversion lost the object"))
    })
}

/// The object a mutating webhook sees on create: no identity yet.
fn unstamped(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
            m.remove(f);
        }
        if m.get("generateName")
            .is_some_and(|g| g.as_str() != Some(""))
            && m.get("name").is_some_and(|n| n.as_str() == Some(""))
        {
            m.remove("name");
        }
    }
    v
}

fn without_rv(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// Create through admission.
pub(super) async fn create(
    srv: &Arc<Server>,
    t: &Target,
    adm: &Admission,
    mut attrs: Attributes,
    new: New<'_>,
    fields: &FieldCheck,
) -> Result<Arc<StoredObject>, ApiError> {
    let info = &t.info;
    let ns = t.namespace.as_deref();
    let mut warnings = Vec::new();
    let input = match &new.prepared {
        Ok((o, _)) => unstamped(o.clone()),
        Err(_) if adm.has_mutating() => {
            let mut raw = new.raw.clone();
            if let (Some(ns), Some(m)) =
                (ns, raw.get_mut("metadata").and_then(Value::as_object_mut))
            {
                m.insert("namespace".into(), json!(ns));
            }
            raw
        }
        Err(e) => return Err(e.clone()),
    };
    if attrs.name.is_empty() {
        attrs.name = input["metadata"]["name"].as_str().unwrap_or("").to_string();
    }
    let mutated = adm.mutate(srv, &attrs, input, &mut warnings).await;
    let mutated = match mutated {
        Ok(m) => m,
        Err(e) => {
            fields.warn(&warnings);
            return Err(e);
        }
    };
    let ignore = FieldCheck::new(FieldValidation::Ignore);
    let (mut obj, mut generate) = match (new.prepared, mutated.changed) {
        (Ok(p), false) => p,
        (Err(e), false) => return Err(e),
        (_, true) => {
            let (mut o, g) = prepare_new(info, mutated.object, ns, &ignore, &[])?;
            if let Some(m) = new.manager {
                crate::resources::ssa::record_update(info, None, &mut o, m, "");
            }
            (o, g)
        }
    };
    let candidate = srv.store.txn_mode(true, |txn| {
        insert_new(srv, txn, info, obj.clone(), generate.clone())
    })?;
    attrs.name = candidate.meta()["name"].as_str().unwrap_or("").to_string();
    let checked = adm
        .validate(
            srv,
            &attrs,
            Some(&without_rv(candidate.value.clone())),
            &mut warnings,
        )
        .await;
    fields.warn(&warnings);
    checked?;
    if attrs.dry_run {
        return Ok(candidate);
    }
    if generate.take().is_some() {
        obj["metadata"]["name"] = json!(attrs.name);
    }
    let obj = conversion::to_storage(srv, info, obj).await?;
    srv.store
        .txn(|txn| insert_new(srv, txn, info, obj, generate))
}

/// Store `new` (in `info`'s version) over the object at `key` if that is
/// still at `expected` (`Ok(None)` when another write came first); `base`
/// is that object in `info`'s version when it is stored in another.
#[allow(clippy::too_many_arguments)]
fn commit(
    srv: &Server,
    txn: &mut Txn<'_>,
    t: &Target,
    info: &ResourceInfo,
    key: &ObjKey,
    expected: u64,
    base: Option<&Arc<StoredObject>>,
    new: Value,
) -> Result<Option<Arc<StoredObject>>, ApiError> {
    let Some(current) = txn.get(&info.storage_key(), key) else {
        return Err(ApiError::not_found(&info.group, &info.plural, &key.1));
    };
    if current.rev != expected {
        return Ok(None);
    }
    let old = base.unwrap_or(&current);
    // A dry run stamps the store's revision; the check above is the
    // precondition, so the result carries the object's own.
    let mut new = new;
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), json!(current.rev.to_string()));
    }
    let mode = UpdateMode {
        status_only: t.sub.is_some(),
        ..UpdateMode::default()
    };
    apply_update(srv, txn, info, key, old, new, mode).map(Some)
}

/// The stored object at `key` in `t`'s version, when the resource converts
/// by webhook and it is stored in another (`None` otherwise, or when absent).
async fn converted_old(
    srv: &Server,
    t: &Target,
    key: &ObjKey,
) -> Result<Option<Arc<StoredObject>>, ApiError> {
    if !conversion::converts_writes(srv, &t.info) {
        return Ok(None);
    }
    match srv.store.txn(|txn| txn.get(&t.info.storage_key(), key)) {
        Some(o) => conversion::present_one(srv, &t.info, o).await.map(Some),
        None => Ok(None),
    }
}

/// Update (PUT, PATCH, apply, `/status`) through admission; `compute` is
/// the write without admission (from a given old object, in the request's
/// version, when the stored one is in another).
pub(super) async fn update<F>(
    srv: &Arc<Server>,
    t: &Target,
    r: &Req,
    adm: &Admission,
    fields: &FieldCheck,
    compute: F,
    dry: bool,
) -> Result<(Arc<StoredObject>, u16), ApiError>
where
    F: Fn(&mut Txn<'_>, Option<&Arc<StoredObject>>) -> Result<Computed, ApiError>,
{
    let info = &t.info;
    let key = obj_key(
        info,
        t.namespace.as_deref(),
        t.name.as_deref().unwrap_or(""),
    );
    for _ in 0..ATTEMPTS {
        let given = converted_old(srv, t, &key).await?;
        let (old, candidate, code) = srv
            .store
            .txn_mode(true, |txn| compute(txn, given.as_ref()))?;
        let Some(old) = old else {
            // Server-side apply of an object that does not exist: a create.
            let attrs = attributes(srv, t, r, "CREATE", None, dry);
            let new = New {
                prepared: Ok((without_rv(candidate.value.clone()), None)),
                raw: candidate.value.clone(),
                manager: None,
            };
            return create(srv, t, adm, attrs, new, fields)
                .await
                .map(|s| (s, code));
        };
        let attrs = attributes(srv, t, r, "UPDATE", Some(old.value.clone()), dry);
        let mut warnings = Vec::new();
        let base = given.is_some().then_some(&old);
        let outcome = admit_update(
            srv,
            t,
            adm,
            &attrs,
            &key,
            old.rev,
            base,
            candidate,
            &mut warnings,
        )
        .await;
        fields.warn(&warnings);
        match outcome? {
            Some(stored) => return Ok((stored, code)),
            None => continue,
        }
    }
    Err(ApiError::conflict(
        &info.group,
        &info.plural,
        &key.1,
        "the object has been modified; please apply your changes to the latest version and try again",
    ))
}

/// One attempt of an update through admission (`Ok(None)`: raced). `base`
/// is the stored object in the request's version when it is stored in
/// another (converted by the webhook).
#[allow(clippy::too_many_arguments)]
async fn admit_update(
    srv: &Arc<Server>,
    t: &Target,
    adm: &Admission,
    attrs: &Attributes,
    key: &ObjKey,
    expected: u64,
    base: Option<&Arc<StoredObject>>,
    candidate: Arc<StoredObject>,
    warnings: &mut Vec<String>,
) -> Result<Option<Arc<StoredObject>>, ApiError> {
    let info = &t.info;
    let mutated = adm
        .mutate(srv, attrs, candidate.value.clone(), warnings)
        .await?;
    let candidate = if mutated.changed {
        let again = srv.store.txn_mode(true, |txn| {
            commit(srv, txn, t, info, key, expected, base, mutated.object)
        })?;
        match again {
            Some(c) => c,
            None => return Ok(None),
        }
    } else {
        candidate
    };
    adm.validate(srv, attrs, Some(&candidate.value), warnings)
        .await?;
    if attrs.dry_run {
        return Ok(Some(candidate));
    }
    // Stored in the storage version (converted by the webhook when the
    // request is in another), over the object as it is stored.
    let (storage_info, value) = match base {
        Some(_) => {
            let storage = conversion::of(srv, info)
                .and_then(|c| {
                    srv.registry
                        .get(&info.group, &c.storage_version, &info.plural)
                })
                .unwrap_or_else(|| info.clone());
            let value = conversion::to_storage(srv, info, candidate.value.clone()).await?;
            (storage, value)
        }
        None => (info.clone(), candidate.value.clone()),
    };
    srv.store
        .txn(|txn| commit(srv, txn, t, &storage_info, key, expected, None, value))
}

/// Admission of a delete of the object at `key` (none when it is gone:
/// the delete itself answers 404).
pub(super) async fn delete(
    srv: &Arc<Server>,
    t: &Target,
    r: &Req,
    key: &ObjKey,
    dry: bool,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let info = &t.info;
    let Some(adm) = Admission::load(srv, info).map(|a| a.with_conversion(convert_for_webhook))
    else {
        return Ok(());
    };
    let Some(old) = srv.store.txn(|txn| txn.get(&info.storage_key(), key)) else {
        return Ok(());
    };
    let mut attrs = attributes(srv, t, r, "DELETE", Some(old.value.clone()), dry);
    attrs.name = key.1.clone();
    attrs.namespace = key.0.clone();
    adm.mutate(srv, &attrs, Value::Null, warnings).await?;
    adm.validate(srv, &attrs, None, warnings).await
}
