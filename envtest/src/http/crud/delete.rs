//! Deletion. An object with finalizers gets `deletionTimestamp` (and a
//! generation bump) and stays, announced as MODIFIED; without finalizers it
//! is removed (DELETED). `preconditions` (uid, resourceVersion) are checked
//! first (409). Deleting a namespace marks it Terminating, deletes every
//! object in it, and removes the namespace once it is empty. Removing a
//! CustomResourceDefinition removes its custom resources and stops serving
//! them. DeleteCollection deletes every object matching the selectors.

use super::gc::{self, Propagation};
use crate::error::ApiError;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::crd;
use crate::resources::objects::{Filter, json_response, now_rfc3339, obj_key, render};
use crate::resources::validation::{FieldCheck, FieldValidation, parse_json};
use crate::storage::{ObjKey, StoredObject, Txn};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;

const NAMESPACES: &str = "/namespaces";

/// DeleteOptions: preconditions, propagation and whether this is a dry run.
#[derive(Debug, Default)]
pub(super) struct Preconditions {
    pub(super) uid: Option<String>,
    pub(super) resource_version: Option<String>,
    pub(super) dry_run: bool,
    pub(super) propagation: Propagation,
}

fn preconditions(r: &Req) -> Result<Preconditions, ApiError> {
    let query_dry = r.query.dry_run()?;
    let query_policy = r
        .query
        .get("propagationPolicy")
        .filter(|p| !p.is_empty())
        .map(Propagation::parse)
        .transpose()?;
    if r.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Preconditions {
            dry_run: query_dry,
            propagation: query_policy.unwrap_or_default(),
            ..Preconditions::default()
        });
    }
    let opts = parse_json(&r.body)?;
    if !opts.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a DeleteOptions object",
        ));
    }
    let body_dry = match &opts["dryRun"] {
        Value::Null => false,
        Value::Array(a) if a.iter().all(|v| v == "All") => !a.is_empty(),
        other => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other}: supported values: \"All\""
            )));
        }
    };
    let body_policy = match (
        opts["propagationPolicy"].as_str(),
        opts["orphanDependents"].as_bool(),
    ) {
        (Some(p), _) => Some(Propagation::parse(p)?),
        (None, Some(true)) => Some(Propagation::Orphan),
        _ => None,
    };
    let p = &opts["preconditions"];
    Ok(Preconditions {
        uid: p["uid"].as_str().map(str::to_string),
        resource_version: p["resourceVersion"].as_str().map(str::to_string),
        dry_run: query_dry || body_dry,
        propagation: body_policy.or(query_policy).unwrap_or_default(),
    })
}

pub(super) enum Outcome {
    Removed(Arc<StoredObject>),
    Pending(Arc<StoredObject>),
}

impl Outcome {
    fn object(&self) -> &Arc<StoredObject> {
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
        crd::on_removed(&srv.registry, txn, value);
    }
    gc::collect(srv, txn, value);
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
        gc::orphan_dependents(txn, &uid);
    }
    if pre.propagation == Propagation::Foreground
        && meta["deletionTimestamp"].is_null()
        && !txn.dependents_of(&uid).is_empty()
    {
        return Ok(gc::start_foreground(srv, txn, res, key, &old));
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

/// DELETE one object.
pub async fn delete(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let info = &t.info;
    let name = t.name.as_deref().unwrap_or("");
    let pre = preconditions(r)?;
    let key = obj_key(info, t.namespace.as_deref(), name);
    let warnings = FieldCheck::new(FieldValidation::Ignore);
    let mut w = Vec::new();
    let admitted = super::admit::delete(srv, t, r, &key, pre.dry_run, &mut w).await;
    warnings.warn(&w);
    admitted?;
    let outcome = srv.store.txn_mode(pre.dry_run, |txn| {
        delete_one(
            srv,
            txn,
            &info.storage_key(),
            &key,
            &pre,
            &info.group,
            &info.plural,
        )
    })?;
    let shown = crate::http::conversion::present_one(srv, info, outcome.object().clone()).await?;
    Ok(warnings.add_warnings(json_response(200, render(&shown, info))))
}

/// DELETE a collection (with label/field selectors).
pub async fn delete_collection(
    srv: &Arc<Server>,
    t: &Target,
    r: &Req,
) -> Result<Response, ApiError> {
    let info = &t.info;
    let filter = Filter::from_query(info, t.namespace.as_deref(), &r.query)?;
    let pre = preconditions(r)?;
    let res = info.storage_key();
    // Each object goes through admission, as a cluster deletes them one by
    // one; a refusal stops the whole request before anything is deleted.
    let warnings = FieldCheck::new(FieldValidation::Ignore);
    if crate::http::admission::Admission::load(srv, info).is_some() {
        let targets: Vec<ObjKey> = srv.store.txn(|txn| {
            txn.list(&res, filter.namespace.as_deref())
                .into_iter()
                .filter(|(_, o)| filter.matches(info, &o.value))
                .map(|(k, _)| k)
                .collect()
        });
        for k in targets {
            let mut w = Vec::new();
            let one = Target {
                info: info.clone(),
                namespace: (!k.0.is_empty()).then(|| k.0.clone()),
                name: Some(k.1.clone()),
                sub: None,
            };
            let admitted = super::admit::delete(srv, &one, r, &k, pre.dry_run, &mut w).await;
            warnings.warn(&w);
            admitted?;
        }
    }
    let (rev, outcomes) = srv.store.txn_mode(pre.dry_run, |txn| {
        let targets: Vec<ObjKey> = txn
            .list(&res, filter.namespace.as_deref())
            .into_iter()
            .filter(|(_, o)| filter.matches(info, &o.value))
            .map(|(k, _)| k)
            .collect();
        let mut outcomes = Vec::new();
        for k in targets {
            match delete_one(srv, txn, &res, &k, &pre, &info.group, &info.plural) {
                Ok(o) => outcomes.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok((txn.rev(), outcomes))
    })?;
    let objects = outcomes.iter().map(|o| o.object().clone()).collect();
    let objects = crate::http::conversion::present(srv, info, objects).await?;
    let items: Vec<Bytes> = objects.iter().map(|o| render(o, info)).collect();
    let mut out = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{rev}\"}},\"items\":[",
        info.kind,
        info.api_version()
    )
    .into_bytes();
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.extend_from_slice(b"]}");
    Ok(warnings.add_warnings(json_response(200, Bytes::from(out))))
}
