//! Deletion. An object with finalizers gets `deletionTimestamp` (and a
//! generation bump) and stays, announced as MODIFIED; without finalizers it
//! is removed (DELETED). `preconditions` (uid, resourceVersion) are checked
//! first (409). Deleting a namespace marks it Terminating, deletes every
//! object in it, and removes the namespace once it is empty. Removing a
//! CustomResourceDefinition removes its custom resources and stops serving
//! them. DeleteCollection deletes every object matching the selectors.

use super::gc::{Preconditions, Propagation, delete_one};
use crate::error::ApiError;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::objects::{Filter, json_response, obj_key, render};
use crate::resources::validation::{FieldCheck, FieldValidation, parse_json};
use crate::storage::ObjKey;
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;

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
