//! Discovery documents, so standard clients (kube-client's discovery,
//! kubectl) can find what is served: `/version`, `/api`, `/api/v1`, `/apis`,
//! `/apis/{group}` and `/apis/{group}/{version}` in the legacy
//! (non-aggregated) format, built from the live registry so custom
//! resources appear as soon as their CRD is created.

use crate::error::ApiError;
use crate::http::state::Server;
use crate::resources::objects::value_response;
use crate::resources::registry::ResourceInfo;
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The Kubernetes version this server reports.
pub const KUBE_MINOR: &str = "34";

/// `/version`.
pub fn version() -> Response {
    value_response(
        200,
        &json!({
            "major": "1", "minor": KUBE_MINOR, "gitVersion": format!("v1.{KUBE_MINOR}.0-envtest"),
            "gitCommit": "envtest", "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "n/a (envtest, Rust)", "compiler": "rustc", "platform": "linux/amd64",
        }),
    )
}

/// `/`: the list of paths.
pub fn root_paths(srv: &Server) -> Response {
    let mut paths = vec![
        "/api".to_string(),
        "/api/v1".into(),
        "/apis".into(),
        "/healthz".into(),
        "/livez".into(),
        "/readyz".into(),
        "/version".into(),
    ];
    for (g, vs) in groups(srv) {
        paths.push(format!("/apis/{g}"));
        paths.extend(vs.iter().map(|v| format!("/apis/{g}/{v}")));
    }
    value_response(200, &json!({"paths": paths}))
}

/// `/api`.
pub fn api_versions(srv: &Server) -> Response {
    value_response(
        200,
        &json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": srv.config.addr}],
        }),
    )
}

/// Order versions as Kubernetes does: GA before beta before alpha, higher first.
fn version_priority(v: &str) -> (u8, u64, u64) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (class, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (class, major, minor)
}

fn groups(srv: &Server) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in srv.registry.all().iter().filter(|r| !r.group.is_empty()) {
        let vs = out.entry(r.group.clone()).or_default();
        if !vs.contains(&r.version) {
            vs.push(r.version.clone());
        }
    }
    for (g, v) in crate::http::auth_review::groups() {
        out.entry(g.to_string()).or_default().push(v.to_string());
    }
    for vs in out.values_mut() {
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out
}

fn group_value(g: &str, vs: &[String]) -> Value {
    let versions: Vec<Value> = vs
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": g, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
pub fn group_list(srv: &Server) -> Response {
    let groups: Vec<Value> = groups(srv)
        .iter()
        .map(|(g, vs)| group_value(g, vs))
        .collect();
    value_response(
        200,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `/apis/{group}`.
pub fn group(srv: &Server, g: &str) -> Result<Response, ApiError> {
    let all = groups(srv);
    let vs = all
        .get(g)
        .ok_or_else(|| ApiError::no_route(&format!("/apis/{g}")))?;
    let mut v = group_value(g, vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Ok(value_response(200, &v))
}

fn resource_entry(r: &Arc<ResourceInfo>) -> Vec<Value> {
    let mut out = vec![json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": r.short_names,
        "categories": r.categories,
    })];
    if r.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced,
            "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"],
        }));
    }
    if r.status {
        out.push(json!({
            "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
            "kind": r.kind, "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(srv: &Server, g: &str, v: &str) -> Result<Response, ApiError> {
    let rs = srv.registry.group_version(g, v);
    let reviews = crate::http::auth_review::discovery_resources(g, v);
    if rs.is_empty() && reviews.is_empty() {
        return Err(ApiError::no_route(&format!("/apis/{g}/{v}")));
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    let mut resources: Vec<Value> = rs.iter().flat_map(resource_entry).collect();
    resources.extend(reviews);
    Ok(value_response(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    ))
}

/// The media type of aggregated discovery documents.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client asked for aggregated discovery (v2).
pub fn wants_aggregated(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=APIGroupDiscoveryList") && first.contains("v=v2;"))
        || accept.contains("g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let mut v = json!({
        "resource": r.plural, "responseKind": gvk, "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": r.short_names, "categories": r.categories,
    });
    if r.status {
        v["subresources"] = json!([{"subresource": "status", "responseKind": gvk, "verbs": ["get", "patch", "update"]}]);
    }
    v
}

/// Aggregated discovery for `/api` (core) or `/apis` (every group).
pub fn aggregated(srv: &Server, core: bool) -> Response {
    let mut by_group: BTreeMap<String, Vec<Arc<ResourceInfo>>> = BTreeMap::new();
    for r in srv.registry.all() {
        if r.group.is_empty() == core {
            by_group.entry(r.group.clone()).or_default().push(r);
        }
    }
    let mut items: Vec<Value> = by_group
        .into_iter()
        .map(|(g, rs)| {
            let mut versions: Vec<String> = rs.iter().map(|r| r.version.clone()).collect();
            versions.dedup();
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
            versions.dedup();
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = rs
                        .iter()
                        .filter(|r| &r.version == v)
                        .map(|r| aggregated_resource(r))
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g}, "versions": versions})
        })
        .collect();
    if !core {
        items.extend(crate::http::auth_review::aggregated_items());
    }
    let body = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items});
    let mut resp = value_response(200, &body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(AGGREGATED),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_is_negotiated() {
        assert!(wants_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(!wants_aggregated("application/json"));
    }

    #[test]
    fn version_priority_orders_like_kubernetes() {
        let mut vs = vec!["v1alpha1", "v1beta1", "v2", "v1", "v1beta2"];
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(vs, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha1"]);
    }
}
