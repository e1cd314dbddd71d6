//! The review APIs a client asks "what may I do?" and "who am I?" with:
//! `SelfSubjectAccessReview` and `SelfSubjectRulesReview`
//! (`authorization.k8s.io/v1`) and `SelfSubjectReview`
//! (`authentication.k8s.io/v1`), behind `kubectl auth can-i`,
//! `kubectl auth can-i --list` and `kubectl auth whoami`; and the ones a
//! server asks about its own clients, `TokenReview` and
//! `SubjectAccessReview` ([`delegated`]).
//!
//! They answer from the same decision [`crate::http::authz`] enforces, for the
//! identity the request carries: a service-account client gets exactly
//! what its stored roles let it do; every other client (the default one,
//! the `--token` user) is not restricted, so it is allowed everything, as
//! a member of `system:masters` on a cluster. Nothing is stored: a review
//! is answered 201 with its `status` filled in. Bodies may be JSON, YAML or
//! protobuf (kubectl sends protobuf; it is read through the codec like
//! every other built-in kind; `TokenReview` and `SubjectAccessReview` only
//! as JSON or YAML); answers are JSON.

use crate::error::ApiError;
use crate::http::authz::{Attributes, UserInfo, rules_for};
use crate::http::state::Server;
use crate::request::Req;
use crate::resources::objects::{now_rfc3339, value_response};
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};

pub mod delegated;

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";
const ACCESS: &str = "selfsubjectaccessreviews";
const RULES: &str = "selfsubjectrulesreviews";
const WHOAMI: &str = "selfsubjectreviews";
const SUBJECT: &str = "subjectaccessreviews";
const TOKEN: &str = "tokenreviews";

/// The review resources: (group, version, plural, kind), all cluster-scoped
/// and create-only, each group's together.
pub const RESOURCES: &[(&str, &str, &str, &str)] = &[
    (AUTHORIZATION, "v1", ACCESS, "SelfSubjectAccessReview"),
    (AUTHORIZATION, "v1", RULES, "SelfSubjectRulesReview"),
    (AUTHORIZATION, "v1", SUBJECT, "SubjectAccessReview"),
    (AUTHENTICATION, "v1", WHOAMI, "SelfSubjectReview"),
    (AUTHENTICATION, "v1", TOKEN, "TokenReview"),
];

/// The kind served at `group/version/plural`, if it is a review.
pub fn kind(group: &str, version: &str, plural: &str) -> Option<&'static str> {
    RESOURCES
        .iter()
        .find(|(g, v, p, _)| (*g, *v, *p) == (group, version, plural))
        .map(|(_, _, _, k)| *k)
}

/// Legacy discovery entries (`/apis/{group}/{version}`) for the reviews of
/// one group version; empty for other group versions.
pub fn discovery_resources(group: &str, version: &str) -> Vec<Value> {
    RESOURCES
        .iter()
        .filter(|(g, v, _, _)| (*g, *v) == (group, version))
        .map(|(_, _, plural, kind)| {
            json!({"name": plural, "singularName": "", "namespaced": false, "kind": kind, "verbs": ["create"]})
        })
        .collect()
}

/// The review groups and versions, for `/apis` and `/`.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = RESOURCES.iter().map(|(g, v, _, _)| (*g, *v)).collect();
    out.dedup();
    out
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`) items for the reviews.
pub fn aggregated_items() -> Vec<Value> {
    groups()
        .into_iter()
        .map(|(group, version)| {
            let resources: Vec<Value> = RESOURCES
                .iter()
                .filter(|(g, v, _, _)| (*g, *v) == (group, version))
                .map(|(g, v, plural, kind)| {
                    json!({
                        "resource": plural, "responseKind": {"group": g, "version": v, "kind": kind},
                        "scope": "Cluster", "singularResource": "", "verbs": ["create"],
                    })
                })
                .collect();
            json!({"metadata": {"name": group}, "versions": [{"version": version, "resources": resources, "freshness": "Current"}]})
        })
        .collect()
}

/// Answer a request to review resource `plural` of `group/version`.
pub fn serve(
    srv: &Server,
    group: &str,
    version: &str,
    plural: &str,
    r: &Req,
    path: &str,
) -> Result<Response, ApiError> {
    let Some(kind) = kind(group, version, plural) else {
        return Err(ApiError::no_route(path));
    };
    if r.method != Method::POST {
        return Err(ApiError::method_not_allowed(r.method.as_str(), path));
    }
    // A token of a service-account client means RBAC applies; any other
    // request that got this far is the unrestricted admin.
    let enforced = srv.authz.identify(&r.headers);
    let spec = request_spec(plural, r)?;
    let status = match plural {
        ACCESS => access(srv, enforced.as_ref(), &spec)?,
        RULES => rules(srv, enforced.as_ref(), &spec),
        SUBJECT => delegated::subject_access(srv, &spec)?,
        TOKEN => delegated::token_review(srv, &spec),
        _ => whoami(enforced.as_ref()),
    };
    let mut answer = json!({
        "kind": kind, "apiVersion": format!("{group}/{version}"),
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": status,
    });
    if plural != WHOAMI {
        answer["spec"] = spec;
    }
    Ok(value_response(201, &answer))
}

/// The request's `spec`, from a JSON, YAML or protobuf body.
fn request_spec(plural: &str, r: &Req) -> Result<Value, ApiError> {
    let ct = r.content_type().unwrap_or("application/json");
    let bad = |e: &dyn std::fmt::Display| ApiError::bad_request(format!("decoding the body: {e}"));
    let obj: Value = if ct.starts_with("application/vnd.kubernetes.protobuf") {
        proto_object(&r.body).map_err(|e| bad(&e))?
    } else if ct.starts_with("application/yaml") {
        let text = std::str::from_utf8(&r.body).map_err(|e| bad(&e))?;
        serde_saphyr::from_str(text).map_err(|e| bad(&e))?
    } else if ct.starts_with("application/json") {
        serde_json::from_slice(&r.body).map_err(|e| bad(&e))?
    } else {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!("the body of a {plural} request must be JSON, YAML or protobuf, not {ct:?}"),
        ));
    };
    Ok(obj.get("spec").cloned().unwrap_or_else(|| json!({})))
}

/// The same object as JSON would carry it, read from a protobuf body
/// through the codec's one conversion of the review kinds.
fn proto_object(body: &[u8]) -> Result<Value, crate::codec::CodecError> {
    crate::codec::from_protobuf(body)
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `SelfSubjectAccessReview`: whether the requester may do what the spec
/// describes.
fn access(srv: &Server, user: Option<&UserInfo>, spec: &Value) -> Result<Value, ApiError> {
    let resource = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let attrs = match (resource, non_resource) {
        (Some(a), None) => Attributes {
            verb: str_at(a, "verb").into(),
            group: str_at(a, "group").into(),
            resource: str_at(a, "resource").into(),
            subresource: str_at(a, "subresource").into(),
            namespace: str_at(a, "namespace").into(),
            name: str_at(a, "name").into(),
            path: String::new(),
        },
        (None, Some(a)) => Attributes {
            verb: str_at(a, "verb").into(),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: str_at(a, "path").into(),
        },
        _ => {
            return Err(ApiError::invalid(
                "SelfSubjectAccessReview",
                "",
                "spec.resourceAttributes",
                "FieldValueInvalid",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    Ok(match user {
        None => json!({"allowed": true, "reason": "RBAC is not enforced for this client"}),
        Some(user) => json!({"allowed": srv.authz.allows(&srv.store, user, &attrs)}),
    })
}

/// `SelfSubjectRulesReview`: every rule that applies to the requester in
/// `spec.namespace`.
fn rules(srv: &Server, user: Option<&UserInfo>, spec: &Value) -> Value {
    let Some(user) = user else {
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    };
    let keep = ["verbs", "apiGroups", "resources", "resourceNames"];
    let resource_rules: Vec<Value> = rules_for(&srv.store, user, str_at(spec, "namespace"))
        .into_iter()
        .filter(|rule| rule.get("resources").is_some())
        .map(|rule| {
            let fields = keep
                .iter()
                .filter_map(|k| rule.get(*k).map(|v| ((*k).to_string(), v.clone())));
            Value::Object(fields.collect())
        })
        .collect();
    json!({
        "resourceRules": resource_rules,
        // What the enforcement allows on paths outside the resource API
        // (see crate::http::authz): reads of any of them.
        "nonResourceRules": [{"verbs": ["get", "head"], "nonResourceURLs": ["*"]}],
        "incomplete": false,
    })
}

/// `SelfSubjectReview`: who the requester is.
fn whoami(user: Option<&UserInfo>) -> Value {
    let user = user.cloned().unwrap_or_else(UserInfo::admin);
    json!({"userInfo": {"username": user.name, "groups": user.groups}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_reviews_read_as_json_would() {
        for review in [
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": "team", "verb": "create",
                    "resource": "configmaps", "name": "x"}}}),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": "team"}}),
        ] {
            let body = crate::codec::to_protobuf(&review).unwrap();
            assert_eq!(proto_object(&body).unwrap()["spec"], review["spec"]);
        }
        assert!(proto_object(b"{\"spec\":{}}").is_err());
    }

    #[test]
    fn reviews_are_discovered_create_only() {
        assert_eq!(
            kind(AUTHORIZATION, "v1", ACCESS),
            Some("SelfSubjectAccessReview")
        );
        assert_eq!(kind(AUTHORIZATION, "v1", "pods"), None);
        assert_eq!(kind(AUTHENTICATION, "v1beta1", WHOAMI), None);
        let listed = discovery_resources(AUTHORIZATION, "v1");
        assert_eq!(listed.len(), 3);
        assert!(listed.iter().all(|r| r["verbs"] == json!(["create"])));
        assert_eq!(
            groups(),
            vec![(AUTHORIZATION, "v1"), (AUTHENTICATION, "v1")]
        );
        assert_eq!(aggregated_items().len(), 2);
    }
}
