//! A minimal OpenAPI v3 surface: the `/openapi/v3` root listing every served
//! group/version, and one document per group/version whose paths carry each
//! resource's PATCH operation with its `x-kubernetes-group-version-kind` and
//! the `fieldValidation` query parameter. That is what kubectl reads to
//! decide that the server validates fields itself, so `kubectl create -f`
//! and `kubectl apply` work without client-side schemas. Object schemas are
//! given as free-form objects.

use crate::error::ApiError;
use crate::objects::value_response;
use crate::registry::ResourceInfo;
use crate::server::Server;
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

fn gv_path(r: &ResourceInfo) -> String {
    if r.group.is_empty() {
        format!("api/{}", r.version)
    } else {
        format!("apis/{}/{}", r.group, r.version)
    }
}

fn by_gv(srv: &Server) -> BTreeMap<String, Vec<Arc<ResourceInfo>>> {
    let mut out: BTreeMap<String, Vec<Arc<ResourceInfo>>> = BTreeMap::new();
    for r in srv.registry.all() {
        out.entry(gv_path(&r)).or_default().push(r);
    }
    out
}

fn hash_of(rs: &[Arc<ResourceInfo>]) -> String {
    let mut h = DefaultHasher::new();
    for r in rs {
        (
            &r.group,
            &r.version,
            &r.kind,
            &r.plural,
            r.namespaced,
            r.status,
        )
            .hash(&mut h);
    }
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`.
pub fn root(srv: &Server) -> Response {
    let paths: Map<String, Value> = by_gv(srv)
        .iter()
        .map(|(gv, rs)| {
            (
                gv.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash_of(rs))}),
            )
        })
        .collect();
    value_response(200, &json!({"paths": paths}))
}

fn operation(r: &ResourceInfo, action: &str) -> Value {
    json!({
        "operationId": format!("{action}{}", r.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{}", schema_name(r))}}}}},
    })
}

fn schema_name(r: &ResourceInfo) -> String {
    let group = if r.group.is_empty() {
        "core".to_string()
    } else {
        r.group.clone()
    };
    format!("{group}.{}.{}", r.version, r.kind)
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
pub fn group_version(srv: &Server, gv: &str) -> Result<Response, ApiError> {
    let all = by_gv(srv);
    let rs = all
        .get(gv)
        .ok_or_else(|| ApiError::no_route(&format!("/openapi/v3/{gv}")))?;
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in rs {
        let prefix = if r.namespaced {
            format!("/{gv}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("/{gv}/{}", r.plural)
        };
        paths.insert(format!("{prefix}/{{name}}"), json!({"get": operation(r, "get"), "put": operation(r, "put"), "patch": operation(r, "patch"), "delete": operation(r, "delete")}));
        paths.insert(
            prefix,
            json!({"get": operation(r, "list"), "post": operation(r, "post")}),
        );
        schemas.insert(
            schema_name(r),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                   "x-kubernetes-group-version-kind": [{"group": r.group, "version": r.version, "kind": r.kind}]}),
        );
    }
    Ok(value_response(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes (envtest)", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
    ))
}
