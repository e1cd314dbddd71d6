//! The `admission.k8s.io/v1` AdmissionReview exchanged with a webhook: the
//! request built from a write (uid, kind, resource, subresource, the
//! request's own kind and resource, name, namespace, operation, user,
//! object, old object, dry run, options; kind, resource and objects in the
//! version the webhook's rule names when it matched through an equivalent
//! one), the same request as the CEL `request` variable, and the checks of
//! the answer (its type, a `response` naming the request's uid, a
//! `JSONPatch` patch).

use crate::http::authz::UserInfo;
use base64::Engine;
use serde_json::{Map, Value, json};

/// A write as admission sees it (everything but the object, which mutating
/// webhooks change on the way).
#[derive(Debug, Clone)]
pub struct Attributes {
    /// Group of the object's kind.
    pub group: String,
    /// Version of the object's kind (the request's version).
    pub version: String,
    /// The version a webhook's rule named when it matched the request
    /// through another version of the resource (`matchPolicy:
    /// Equivalent`): the review's `kind` and `resource` say it, its
    /// `requestKind` and `requestResource` the request's version, and its
    /// objects are in it. `None`: the request's version.
    pub webhook_version: Option<String>,
    /// Kind of the object (`Scale` for the scale subresource).
    pub kind: String,
    /// Group of the resource.
    pub resource_group: String,
    /// Plural resource name.
    pub resource: String,
    /// Subresource (`status`, `scale`), empty for the main resource.
    pub sub: String,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// Namespace of the object, empty when cluster-scoped.
    pub namespace: String,
    /// Name of the object (empty on a create with `generateName`).
    pub name: String,
    /// The stored object, on update and delete.
    pub old_object: Option<Value>,
    /// A dry-run request.
    pub dry_run: bool,
    /// CreateOptions, UpdateOptions or DeleteOptions.
    pub options: Value,
    /// Who is asking.
    pub user: UserInfo,
}

impl Attributes {
    fn gvk(&self, version: &str) -> Value {
        json!({"group": self.group, "version": version, "kind": self.kind})
    }

    fn gvr(&self, version: &str) -> Value {
        json!({"group": self.resource_group, "version": version, "resource": self.resource})
    }

    /// The `request` of an AdmissionReview (and the CEL `request`
    /// variable), without `object` and `oldObject`.
    pub fn request(&self, uid: &str) -> Value {
        let mut r = Map::new();
        r.insert("uid".into(), json!(uid));
        let version = self.webhook_version.as_deref().unwrap_or(&self.version);
        r.insert("kind".into(), self.gvk(version));
        r.insert("resource".into(), self.gvr(version));
        r.insert("requestKind".into(), self.gvk(&self.version));
        r.insert("requestResource".into(), self.gvr(&self.version));
        if !self.sub.is_empty() {
            r.insert("subResource".into(), json!(self.sub));
            r.insert("requestSubResource".into(), json!(self.sub));
        }
        if !self.name.is_empty() {
            r.insert("name".into(), json!(self.name));
        }
        if !self.namespace.is_empty() {
            r.insert("namespace".into(), json!(self.namespace));
        }
        r.insert("operation".into(), json!(self.operation));
        r.insert(
            "userInfo".into(),
            json!({"username": self.user.name, "groups": self.user.groups}),
        );
        r.insert("dryRun".into(), json!(self.dry_run));
        r.insert("options".into(), self.options.clone());
        Value::Object(r)
    }

    /// A whole AdmissionReview for one webhook call.
    pub fn review(&self, uid: &str, object: Option<&Value>) -> Value {
        let mut req = self.request(uid);
        req["object"] = object.cloned().unwrap_or(Value::Null);
        req["oldObject"] = self.old_object.clone().unwrap_or(Value::Null);
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
    }
}

/// A webhook's answer, checked.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Whether the write may go on.
    pub allowed: bool,
    /// The webhook's `status` (code, reason, message) when it denies.
    pub status: Value,
    /// The JSON patch to apply (mutating webhooks).
    pub patch: Option<json_patch::Patch>,
    /// Warnings for the client.
    pub warnings: Vec<String>,
}

/// Check an answer's body against the request `uid`; the error text is
/// what kube-apiserver says of an invalid response.
pub fn parse(body: &[u8], uid: &str) -> Result<Verdict, String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("received invalid webhook response: {e}"))?;
    if v["apiVersion"] != "admission.k8s.io/v1" || v["kind"] != "AdmissionReview" {
        return Err(format!(
            "received invalid webhook response: expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}, Kind={}",
            v["apiVersion"].as_str().unwrap_or(""),
            v["kind"].as_str().unwrap_or("")
        ));
    }
    let resp = match &v["response"] {
        Value::Object(_) => &v["response"],
        _ => return Err("received invalid webhook response: webhook response was absent".into()),
    };
    let got = resp["uid"].as_str().unwrap_or("");
    if got != uid {
        return Err(format!(
            "received invalid webhook response: expected response.uid={uid:?}, got {got:?}"
        ));
    }
    let patch = match (resp["patchType"].as_str(), resp["patch"].as_str()) {
        (_, None) => None,
        (Some("JSONPatch"), Some(b)) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("received invalid webhook response: patch: {e}"))?;
            Some(
                serde_json::from_slice(&raw)
                    .map_err(|e| format!("received invalid webhook response: patch: {e}"))?,
            )
        }
        (t, Some(_)) => {
            return Err(format!(
                "received invalid webhook response: unsupported patch type {:?}",
                t.unwrap_or("")
            ));
        }
    };
    Ok(Verdict {
        allowed: resp["allowed"].as_bool().unwrap_or(false),
        status: resp["status"].clone(),
        patch,
        warnings: resp["warnings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked() {
        let ok = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"warnings":["w"],"patchType":"JSONPatch","patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL2EiLCJ2YWx1ZSI6MX1d"}}"#;
        let v = parse(ok, "u1").unwrap();
        assert!(v.allowed);
        assert_eq!(v.warnings, ["w"]);
        assert!(v.patch.is_some());
        assert!(
            parse(ok, "u2")
                .unwrap_err()
                .contains("expected response.uid=\"u2\"")
        );
        assert!(parse(b"garbage", "u1").is_err());
        assert!(
            parse(
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                "u1"
            )
            .unwrap_err()
            .contains("absent")
        );
    }
}
