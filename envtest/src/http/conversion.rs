//! CRD conversion webhooks (`spec.conversion.strategy: Webhook`): objects
//! are stored in the storage version; whatever is read, listed, watched or
//! answered in another version, and whatever is written in another
//! version, goes through a `apiextensions.k8s.io/v1` ConversionReview (the
//! objects of one list page in one review). A conversion that fails (the
//! call, or the webhook's `result`) is a 500 as on a cluster. With
//! `strategy: None` nothing here applies and a version is served by
//! rewriting `apiVersion`.
//!
//! HTTP layer: called by the read, write and watch handlers, never with a
//! storage lock held; the call itself is [`super::admission::client`]'s.

use crate::error::ApiError;
use crate::http::admission::client;
use crate::http::state::Server;
use crate::resources::registry::{Conversion, ResourceInfo};
use crate::storage::StoredObject;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How long a conversion webhook may take (kube-apiserver's fixed 30s).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The conversion `info`'s objects go through, if any.
pub fn of(srv: &Server, info: &ResourceInfo) -> Option<Arc<Conversion>> {
    if !info.custom {
        return None;
    }
    srv.registry.conversion(&info.group, &info.plural)
}

fn api_version_of(v: &Value) -> &str {
    v["apiVersion"].as_str().unwrap_or("")
}

fn failed(kind: &str, from: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!(
        "Internal error occurred: conversion webhook for {from}, Kind={kind} failed: {why}"
    ))
}

/// Convert `objects` to `desired` (`group/version`) with one review.
pub async fn convert(
    srv: &Server,
    conv: &Conversion,
    kind: &str,
    objects: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ApiError> {
    if objects.is_empty() {
        return Ok(objects);
    }
    let from = api_version_of(&objects[0]).to_string();
    let uid = uuid::Uuid::new_v4().to_string();
    let count = objects.len();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    });
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let limit = srv
        .config
        .max_body_bytes
        .saturating_mul(count.max(1))
        .max(srv.config.max_body_bytes);
    let answer = client::post(
        &conv.client_config,
        &srv.config.webhook_services,
        body,
        TIMEOUT,
        limit,
    )
    .await
    .map_err(|e| failed(kind, &from, e))?;
    let v: Value = serde_json::from_slice(&answer).map_err(|e| failed(kind, &from, e))?;
    let resp = &v["response"];
    if v["kind"] != "ConversionReview" || !resp.is_object() {
        return Err(failed(
            kind,
            &from,
            "the webhook answered no ConversionReview response",
        ));
    }
    if resp["uid"].as_str() != Some(uid.as_str()) {
        return Err(failed(
            kind,
            &from,
            format!(
                "expected response.uid={uid:?}, got {:?}",
                resp["uid"].as_str().unwrap_or("")
            ),
        ));
    }
    if resp["result"]["status"].as_str() != Some("Success") {
        let msg = resp["result"]["message"]
            .as_str()
            .unwrap_or("conversion failed");
        return Err(failed(kind, &from, msg));
    }
    let converted = resp["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != count {
        return Err(failed(
            kind,
            &from,
            format!(
                "expected {count} converted objects, got {}",
                converted.len()
            ),
        ));
    }
    for (i, o) in converted.iter().enumerate() {
        if api_version_of(o) != desired {
            return Err(failed(
                kind,
                &from,
                format!(
                    "invalid converted object at index {i}: wrong apiVersion {:?}, expected {desired:?}",
                    api_version_of(o)
                ),
            ));
        }
    }
    Ok(converted)
}

/// `objects` as a reader of `info` sees them: those stored in another
/// version are converted by the webhook (all in one review).
pub async fn present(
    srv: &Server,
    info: &ResourceInfo,
    objects: Vec<Arc<StoredObject>>,
) -> Result<Vec<Arc<StoredObject>>, ApiError> {
    let Some(conv) = of(srv, info) else {
        return Ok(objects);
    };
    let want = info.api_version();
    let stale: Vec<usize> = (0..objects.len())
        .filter(|&i| api_version_of(&objects[i].value) != want)
        .collect();
    if stale.is_empty() {
        return Ok(objects);
    }
    let input = stale.iter().map(|&i| objects[i].value.clone()).collect();
    let converted = convert(srv, &conv, &info.kind, input, &want).await?;
    let mut out = objects;
    for (i, mut value) in stale.into_iter().zip(converted) {
        let rev = out[i].rev;
        if let Some(m) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(rev.to_string()));
        }
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        out[i] = Arc::new(StoredObject::from_parts(value, json, rev));
    }
    Ok(out)
}

/// One object, as [`present`].
pub async fn present_one(
    srv: &Server,
    info: &ResourceInfo,
    object: Arc<StoredObject>,
) -> Result<Arc<StoredObject>, ApiError> {
    let mut v = present(srv, info, vec![object]).await?;
    v.pop()
        .ok_or_else(|| ApiError::internal("conversion lost the object"))
}

/// A written object (in the request's version) in the version it is
/// stored in, when the CRD converts by webhook.
pub async fn to_storage(srv: &Server, info: &ResourceInfo, obj: Value) -> Result<Value, ApiError> {
    let Some(conv) = of(srv, info) else {
        return Ok(obj);
    };
    let storage = format!("{}/{}", info.group, conv.storage_version);
    if api_version_of(&obj) == storage {
        return Ok(obj);
    }
    let mut out = convert(srv, &conv, &info.kind, vec![obj], &storage).await?;
    out.pop()
        .ok_or_else(|| ApiError::internal("conversion lost the object"))
}

/// Whether writes to `info` are in another version than storage's (and go
/// through conversion).
pub fn converts_writes(srv: &Server, info: &ResourceInfo) -> bool {
    of(srv, info).is_some_and(|c| c.storage_version != info.version)
}
