//! The OpenAPI v3 surface `kubectl explain` and `kubectl apply` read: the
//! `/openapi/v3` index lists every served group/version with a
//! `serverRelativeURL` carrying the hash of that group/version's document,
//! and `/openapi/v3/{api/v1 | apis/g/v}` serves the document: each resource's
//! operations (with `x-kubernetes-group-version-kind` and the
//! `fieldValidation` parameter, which tells kubectl the server validates
//! fields) and, under `components/schemas`, the real schemas of its kinds
//! (see [`schemas`]). A document is built from the registry on demand, so a
//! CRD that is created or changed shows up at once, and its hash changes,
//! which makes kubectl's cache fetch it again.

mod schemas;

use crate::error::ApiError;
use crate::http::state::Server;
use crate::resources::registry::ResourceInfo;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, header};
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// A group/version's rendered document and the hash published for it.
struct Doc {
    body: Bytes,
    hash: String,
}

/// Rendered documents by group/version path, each with the fingerprint of
/// the resources it was rendered from.
type DocCache = Mutex<HashMap<String, (u64, Arc<Doc>)>>;

/// The rendered documents. Built-in documents are costly to render and
/// identical across servers, so they are shared process-wide.
fn cache() -> &'static DocCache {
    static CACHE: OnceLock<DocCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

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

/// Everything a document depends on, hashed.
fn fingerprint(rs: &[Arc<ResourceInfo>]) -> u64 {
    let mut h = DefaultHasher::new();
    for r in rs {
        (
            &r.group,
            &r.version,
            &r.kind,
            &r.plural,
            r.namespaced,
            r.custom,
        )
            .hash(&mut h);
        r.schema.as_deref().map(Value::to_string).hash(&mut h);
    }
    h.finish()
}

fn operation(r: &ResourceInfo, action: &str, schema: &str) -> Value {
    json!({
        "operationId": format!("{action}{}", r.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("{}{schema}", schemas::REF_PREFIX)}}}}},
    })
}

/// The OpenAPI document of one group/version.
fn render(gv: &str, rs: &[Arc<ResourceInfo>]) -> Value {
    let mut paths = Map::new();
    let mut components = Map::new();
    for r in rs {
        let (name, defs) = schemas::for_kind(r);
        components.extend(defs);
        let prefix = if r.namespaced {
            format!("/{gv}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("/{gv}/{}", r.plural)
        };
        paths.insert(
            format!("{prefix}/{{name}}"),
            json!({"get": operation(r, "get", &name), "put": operation(r, "put", &name),
                   "patch": operation(r, "patch", &name), "delete": operation(r, "delete", &name)}),
        );
        paths.insert(
            prefix,
            json!({"get": operation(r, "list", &name), "post": operation(r, "post", &name)}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::http::discovery::KUBE_MINOR)},
        "paths": paths,
        "components": {"schemas": components},
    })
}

/// The document of one group/version, rendered once per distinct set of
/// resources.
fn doc(gv: &str, rs: &[Arc<ResourceInfo>]) -> Arc<Doc> {
    let fp = fingerprint(rs);
    if let Some((cached_fp, d)) = cache().lock().get(gv)
        && *cached_fp == fp
    {
        return d.clone();
    }
    let body = Bytes::from(render(gv, rs).to_string());
    let mut h = DefaultHasher::new();
    body.hash(&mut h);
    let d = Arc::new(Doc {
        body,
        hash: format!("{:016X}", h.finish()),
    });
    cache().lock().insert(gv.to_string(), (fp, d.clone()));
    d
}

/// `/openapi/v3`: every served group/version and where its document is.
pub fn root(srv: &Server) -> Response {
    let paths: Map<String, Value> = by_gv(srv)
        .iter()
        .map(|(gv, rs)| {
            let d = doc(gv, rs);
            (
                gv.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", d.hash)}),
            )
        })
        .collect();
    crate::resources::objects::value_response(200, &json!({"paths": paths}))
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`, with the
/// document's hash as its `ETag`.
pub fn group_version(srv: &Server, gv: &str) -> Result<Response, ApiError> {
    let all = by_gv(srv);
    let rs = all
        .get(gv)
        .ok_or_else(|| ApiError::no_route(&format!("/openapi/v3/{gv}")))?;
    let d = doc(gv, rs);
    let mut resp = crate::resources::objects::json_response(200, d.body.clone());
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", d.hash)) {
        resp.headers_mut().insert(header::ETAG, etag);
    }
    Ok(resp)
}
