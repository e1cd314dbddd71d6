//! The reviews a server asks about someone else, as delegated
//! authentication and authorization do (a metrics endpoint guarded like
//! kubebuilder's, an extension API server): `TokenReview`
//! (`authentication.k8s.io/v1`, who does this bearer token belong to?) and
//! `SubjectAccessReview` (`authorization.k8s.io/v1`, may this user do
//! that?).
//!
//! A TokenReview knows the tokens of [`crate::TestEnv::service_account_client`]
//! and [`crate::TestEnv::service_account_token`] (their service account)
//! and the server's own bearer token (the unrestricted admin); any other
//! token is not authenticated. A SubjectAccessReview is decided by the
//! stored RBAC for exactly the user and groups in its spec: `system:masters`
//! may do anything; resource attributes match the rules of the user's
//! bindings in the namespace (as requests of a restricted client are
//! enforced); non-resource attributes match the `nonResourceURLs` rules of
//! ClusterRoles bound by ClusterRoleBindings (a trailing `*` matches any
//! suffix), plus what every cluster grants `system:authenticated` by default
//! (`system:discovery` and `system:public-info-viewer`: `get` on `/api`,
//! `/apis`, `/openapi` and below, `/healthz`, `/livez`, `/readyz`,
//! `/version`). So `get /metrics` needs a binding, as on a cluster.

use crate::error::ApiError;
use crate::http::authz::{Attributes, UserInfo, rule_allows, rules_for};
use crate::http::state::Server;
use serde_json::{Value, json};

/// Why an unknown token is not authenticated (what a cluster says for it).
const INVALID_TOKEN: &str = "invalid bearer token";

/// Non-resource URLs every authenticated user may `get` on a cluster
/// (`system:discovery` and `system:public-info-viewer`).
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `TokenReview`: the user `spec.token` belongs to, if any.
pub fn token_review(srv: &Server, spec: &Value) -> Value {
    let token = str_at(spec, "token");
    let user = if token.is_empty() {
        None
    } else if srv.config.bearer_token.as_deref() == Some(token) {
        Some(UserInfo::admin())
    } else {
        srv.authz.user(token)
    };
    let mut status = match user {
        Some(user) => json!({
            "authenticated": true,
            "user": {"username": user.name, "groups": user.groups},
        }),
        None => json!({"authenticated": false, "user": {}, "error": INVALID_TOKEN}),
    };
    let audiences = strings(spec, "audiences");
    if !audiences.is_empty() {
        status["audiences"] = json!(audiences);
    }
    status
}

/// Whether a `nonResourceURLs` pattern matches `path`.
fn url_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

/// Whether `user` may `verb` the non-resource URL `path`.
fn non_resource_allowed(srv: &Server, user: &UserInfo, verb: &str, path: &str) -> bool {
    let authenticated = user.groups.iter().any(|g| g == "system:authenticated");
    if authenticated && verb == "get" && DISCOVERY_URLS.iter().any(|p| url_matches(p, path)) {
        return true;
    }
    rules_for(&srv.store, user, "").iter().any(|rule| {
        let verb_ok = strings(rule, "verbs").iter().any(|v| v == "*" || v == verb);
        verb_ok
            && strings(rule, "nonResourceURLs")
                .iter()
                .any(|p| url_matches(p, path))
    })
}

/// `SubjectAccessReview`: whether the user of the spec may do what it
/// describes.
pub fn subject_access(srv: &Server, spec: &Value) -> Result<Value, ApiError> {
    let invalid = |field: &str, message: &str| {
        ApiError::invalid(
            "SubjectAccessReview",
            "",
            field,
            "FieldValueRequired",
            message,
        )
    };
    let user = UserInfo {
        name: str_at(spec, "user").to_owned(),
        groups: strings(spec, "groups"),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(invalid(
            "spec.user",
            "at least one of user or group must be specified",
        ));
    }
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let allowed = match (resource, non_resource) {
        _ if user.groups.iter().any(|g| g == "system:masters") => true,
        (Some(a), None) => {
            let attrs = Attributes {
                verb: str_at(a, "verb").into(),
                group: str_at(a, "group").into(),
                resource: str_at(a, "resource").into(),
                subresource: str_at(a, "subresource").into(),
                namespace: str_at(a, "namespace").into(),
                name: str_at(a, "name").into(),
                path: String::new(),
            };
            rules_for(&srv.store, &user, &attrs.namespace)
                .iter()
                .any(|rule| rule_allows(rule, &attrs))
        }
        (None, Some(a)) => non_resource_allowed(srv, &user, str_at(a, "verb"), str_at(a, "path")),
        _ => {
            return Err(ApiError::invalid(
                "SubjectAccessReview",
                "",
                "spec.resourceAttributes",
                "FieldValueInvalid",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    Ok(json!({"allowed": allowed}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_resource_patterns_match_exactly_or_by_prefix() {
        assert!(url_matches("/metrics", "/metrics"));
        assert!(!url_matches("/metrics", "/metrics/extra"));
        assert!(!url_matches("/metrics", "/metric"));
        assert!(url_matches("/apis/*", "/apis/apps/v1"));
        assert!(url_matches("*", "/anything"));
        assert!(!url_matches("/apis/*", "/apis"));
    }
}
