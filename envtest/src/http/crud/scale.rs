//! The `scale` subresource (Deployments, ReplicaSets, StatefulSets, and
//! custom resources whose CRD enables it): reads answer an
//! `autoscaling/v1` Scale built from the object's replica paths; PUT and
//! PATCH change only the desired replicas, with the usual optimistic
//! concurrency and generation rules.

use super::persist::{UpdateMode, apply_update, manager_of};
use crate::error::ApiError;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::objects::{obj_key, value_response};
use crate::resources::patch::{PatchKind, json_patch, merge_patch, strategic_merge};
use crate::resources::registry::{ResourceInfo, ScalePaths};
use crate::resources::selectors::field_value;
use crate::resources::validation::{media_type, parse_json, require_json};
use crate::storage::StoredObject;
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};
use std::sync::Arc;

fn selector(paths: &ScalePaths, v: &Value) -> Option<String> {
    if let Some(p) = &paths.label_selector {
        return field_value(v, p);
    }
    let labels = v["spec"]["selector"]["matchLabels"].as_object()?;
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn scale_of(paths: &ScalePaths, obj: &StoredObject) -> Value {
    let v = &obj.value;
    let meta = &v["metadata"];
    let num = |p: &str| {
        field_value(v, p)
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let mut status = json!({"replicas": num(&paths.status_replicas)});
    if let Some(sel) = selector(paths, v) {
        status["selector"] = json!(sel);
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": obj.rev.to_string(), "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": num(&paths.spec_replicas)},
        "status": status,
    })
}

fn set_path(v: &mut Value, path: &str, value: Value) {
    let segs: Vec<&str> = path.split('.').collect();
    let Some((last, parents)) = segs.split_last() else {
        return;
    };
    let mut cur = v;
    for s in parents {
        if !cur.get(*s).is_some_and(Value::is_object) {
            cur[*s] = json!({});
        }
        cur = &mut cur[*s];
    }
    cur[*last] = value;
}

/// GET, PUT or PATCH `.../{name}/scale`.
pub fn scale(
    srv: &Arc<Server>,
    t: &Target,
    r: &Req,
    method: &Method,
) -> Result<Response, ApiError> {
    let info: &ResourceInfo = &t.info;
    let paths = info
        .scale
        .clone()
        .ok_or_else(|| ApiError::no_route("scale"))?;
    let name = t.name.as_deref().unwrap_or("");
    let key = obj_key(info, t.namespace.as_deref(), name);
    let res = info.storage_key();
    let not_found = || ApiError::not_found(&info.group, &info.plural, name);
    if method == Method::GET {
        let obj = srv
            .store
            .txn(|txn| txn.get(&res, &key))
            .ok_or_else(not_found)?;
        return Ok(value_response(200, &scale_of(&paths, &obj)));
    }
    let patch_kind = match *method {
        Method::PUT => {
            require_json(r.content_type())?;
            None
        }
        Method::PATCH => Some(PatchKind::from_media_type(&media_type(r.content_type()))?),
        ref m => {
            return Err(ApiError::method_not_allowed(
                m.as_str(),
                "the scale subresource",
            ));
        }
    };
    let body = parse_json(&r.body)?;
    let dry = r.query.dry_run()?;
    let manager = manager_of(r);
    let stored = srv.store.txn_mode(dry, |txn| {
        let old = txn.get(&res, &key).ok_or_else(not_found)?;
        let wanted = match patch_kind {
            None => body.clone(),
            Some(kind) => {
                let mut current = scale_of(&paths, &old);
                match kind {
                    PatchKind::Merge | PatchKind::Apply => merge_patch(&mut current, &body)?,
                    PatchKind::Json => json_patch(&mut current, &body, "Scale", name)?,
                    PatchKind::Strategic => strategic_merge(&mut current, &body)?,
                }
                current
            }
        };
        let replicas = wanted["spec"]["replicas"]
            .as_i64()
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "Scale",
                    name,
                    "spec.replicas",
                    "FieldValueInvalid",
                    "Invalid value: must be a non-negative integer",
                )
            })?;
        let mut new = old.value.clone();
        set_path(&mut new, &paths.spec_replicas, json!(replicas));
        let rv = wanted["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        new["metadata"]["resourceVersion"] = json!(rv.unwrap_or_else(|| old.rev.to_string()));
        let mode = UpdateMode {
            status_only: false,
            manager: Some(&manager),
            ..UpdateMode::default()
        };
        apply_update(srv, txn, info, &key, &old, new, mode)
    })?;
    Ok(value_response(200, &scale_of(&paths, &stored)))
}
