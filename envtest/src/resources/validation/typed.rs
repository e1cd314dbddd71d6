//! Built-in kinds decoded through their k8s-openapi types on every write, as
//! the API server decodes into its Go types: a JSON type mismatch is 400
//! BadRequest naming the field path (`data.n: invalid type: integer `5`,
//! expected a string`), and fields the type does not know are reported (see
//! [`super::field_validation`]) and dropped. What is stored is the typed
//! value serialized again, so every typed reader of the kind can read it.
//!
//! Custom resources get the same treatment for `metadata` (decoded as
//! `ObjectMeta`); the rest of them is the CRD schema's business.

use crate::error::{ApiError, Cause};
use crate::resources::registry::ResourceInfo;
use k8s_openapi::api::{admissionregistration, apps, batch, coordination, core, events, rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// An object after decoding: the normalized value and the unknown fields
/// that were dropped from it (dotted paths).
#[derive(Debug)]
pub struct Decoded {
    /// The object as its type serializes it.
    pub value: Value,
    /// Paths of fields the type does not know.
    pub unknown: Vec<String>,
}

/// Decode `obj` through the typed schema of `info`'s kind. None when the
/// kind has no typed schema here (custom resources).
pub fn decode(info: &ResourceInfo, obj: &Value) -> Option<Result<Decoded, ApiError>> {
    if info.custom {
        return None;
    }
    let f = match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => roundtrip::<core::v1::Namespace>,
        ("", "pods") => roundtrip::<core::v1::Pod>,
        ("", "configmaps") => roundtrip::<core::v1::ConfigMap>,
        ("", "secrets") => roundtrip::<core::v1::Secret>,
        ("", "services") => roundtrip::<core::v1::Service>,
        ("", "serviceaccounts") => roundtrip::<core::v1::ServiceAccount>,
        ("", "events") => roundtrip::<core::v1::Event>,
        ("", "nodes") => roundtrip::<core::v1::Node>,
        ("", "endpoints") => roundtrip::<core::v1::Endpoints>,
        ("", "persistentvolumeclaims") => roundtrip::<core::v1::PersistentVolumeClaim>,
        ("apps", "deployments") => roundtrip::<apps::v1::Deployment>,
        ("apps", "replicasets") => roundtrip::<apps::v1::ReplicaSet>,
        ("apps", "statefulsets") => roundtrip::<apps::v1::StatefulSet>,
        ("apps", "daemonsets") => roundtrip::<apps::v1::DaemonSet>,
        ("apps", "controllerrevisions") => roundtrip::<apps::v1::ControllerRevision>,
        ("batch", "jobs") => roundtrip::<batch::v1::Job>,
        ("batch", "cronjobs") => roundtrip::<batch::v1::CronJob>,
        ("events.k8s.io", "events") => roundtrip::<events::v1::Event>,
        ("coordination.k8s.io", "leases") => roundtrip::<coordination::v1::Lease>,
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            roundtrip::<apiext::CustomResourceDefinition>
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            roundtrip::<admissionregistration::v1::ValidatingWebhookConfiguration>
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            roundtrip::<admissionregistration::v1::MutatingWebhookConfiguration>
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            roundtrip::<admissionregistration::v1::ValidatingAdmissionPolicy>
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            roundtrip::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>
        }
        ("rbac.authorization.k8s.io", "roles") => roundtrip::<rbac::v1::Role>,
        ("rbac.authorization.k8s.io", "rolebindings") => roundtrip::<rbac::v1::RoleBinding>,
        ("rbac.authorization.k8s.io", "clusterroles") => roundtrip::<rbac::v1::ClusterRole>,
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            roundtrip::<rbac::v1::ClusterRoleBinding>
        }
        _ => return None,
    };
    Some(f(info, obj))
}

/// Decode a custom resource's `metadata` as `ObjectMeta` (paths are
/// reported from the object's root).
pub fn decode_metadata(info: &ResourceInfo, obj: &Value) -> Result<Decoded, ApiError> {
    let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
    let mut d = typed::<ObjectMeta>(info, &meta, "metadata")?;
    d.unknown = d
        .unknown
        .into_iter()
        .map(|p| format!("metadata.{p}"))
        .collect();
    Ok(d)
}

fn roundtrip<T: DeserializeOwned + Serialize>(
    info: &ResourceInfo,
    obj: &Value,
) -> Result<Decoded, ApiError> {
    typed::<T>(info, obj, "")
}

fn typed<T: DeserializeOwned + Serialize>(
    info: &ResourceInfo,
    obj: &Value,
    prefix: &str,
) -> Result<Decoded, ApiError> {
    let t: T = serde_path_to_error::deserialize(obj).map_err(|e| decode_error(info, prefix, &e))?;
    let value = serde_json::to_value(&t).map_err(|e| {
        ApiError::internal(format!("could not encode the decoded {}: {e}", info.kind))
    })?;
    let mut unknown = Vec::new();
    diff(obj, &value, "", &mut unknown);
    Ok(Decoded { value, unknown })
}

/// The path of a decode error, as the API server prints field paths.
fn path_of(e: &serde_path_to_error::Error<serde_json::Error>, prefix: &str) -> String {
    let mut out = prefix.to_string();
    for seg in e.path().iter() {
        match seg {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key }
            | serde_path_to_error::Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    out
}

fn decode_error(
    info: &ResourceInfo,
    prefix: &str,
    e: &serde_path_to_error::Error<serde_json::Error>,
) -> ApiError {
    let path = path_of(e, prefix);
    let inner = e.inner().to_string();
    let at = if path.is_empty() {
        "the object".to_string()
    } else {
        path.clone()
    };
    let mut err = ApiError::bad_request(format!(
        "{kind} in version {v:?} cannot be handled as a {kind}: {at}: {inner}",
        kind = info.kind,
        v = info.version,
    ));
    err.causes.push(Cause {
        reason: "FieldValueTypeInvalid".into(),
        message: inner,
        field: path,
    });
    err
}

/// Paths of fields present (and not null) in `sent` but absent from what
/// the type kept.
fn diff(sent: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, v) in s {
                let p = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match k.get(key) {
                    Some(kv) => diff(v, kv, &p, out),
                    None if v.is_null() => {}
                    None => out.push(p),
                }
            }
        }
        (Value::Array(s), Value::Array(k)) if s.len() == k.len() => {
            for (i, (sv, kv)) in s.iter().zip(k).enumerate() {
                diff(sv, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::registry::Registry;
    use serde_json::json;

    fn info(g: &str, plural: &str) -> std::sync::Arc<ResourceInfo> {
        Registry::with_builtins().get(g, "v1", plural).unwrap()
    }

    #[test]
    fn type_mismatches_name_the_field() {
        let cm = info("", "configmaps");
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"n": 5}});
        let e = decode(&cm, &obj).unwrap().unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(e.causes[0].field, "data.n");
        assert!(
            e.message.contains("data.n: invalid type: integer `5`"),
            "{}",
            e.message
        );

        let pod = info("", "pods");
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}});
        let e = decode(&pod, &obj).unwrap().unwrap_err();
        assert_eq!(
            e.causes[0].field,
            "spec.containers[0].ports[0].containerPort"
        );
    }

    #[test]
    fn unknown_fields_are_listed_and_dropped() {
        let cm = info("", "configmaps");
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "dta": {"a": "b"}, "data": {"x": "1"},
            "metadata": {"name": "a", "labelz": {}, "labels": {"k": "v"}, "creationTimestamp": null}});
        let d = decode(&cm, &obj).unwrap().unwrap();
        assert_eq!(d.unknown, vec!["dta", "metadata.labelz"]);
        assert!(d.value.get("dta").is_none());
        assert_eq!(d.value["data"]["x"], "1");
        assert_eq!(d.value["metadata"]["labels"]["k"], "v");
    }

    #[test]
    fn quantities_and_int_or_strings_take_either_form() {
        let pod = info("", "pods");
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                "readinessProbe": {"httpGet": {"port": "http"}}}]}});
        let d = decode(&pod, &obj).unwrap().unwrap();
        assert!(d.unknown.is_empty());
        assert_eq!(
            d.value["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }

    #[test]
    fn custom_resource_metadata_is_typed() {
        let mut cr = (*info("", "configmaps")).clone();
        cr.custom = true;
        assert!(decode(&cr, &json!({})).is_none());
        let obj = json!({"metadata": {"name": "a", "labels": {"k": 1}}});
        let e = decode_metadata(&cr, &obj).unwrap_err();
        assert_eq!(e.causes[0].field, "metadata.labels.k");
        let d = decode_metadata(&cr, &json!({"metadata": {"name": "a", "bogus": 1}})).unwrap();
        assert_eq!(d.unknown, vec!["metadata.bogus"]);
    }
}
