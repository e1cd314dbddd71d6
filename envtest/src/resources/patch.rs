//! The patch types the API server accepts: JSON merge patch (RFC 7386), JSON
//! patch (RFC 6902, including `test`), and strategic merge patch for built-in
//! types. The strategic merge here merges the common keyed lists by their
//! merge key (containers, volumes, env and ports by name/port, conditions by
//! type, ownerReferences by uid), unions `finalizers`, honours the
//! `$patch: delete|replace` and `$deleteFromPrimitiveList` directives, and
//! otherwise behaves like a merge patch (lists replaced).

use crate::error::ApiError;
use serde_json::{Map, Value};

/// Which patch format a request body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchKind {
    /// From a media type; 415 for anything else.
    pub fn from_media_type(mt: &str) -> Result<Self, ApiError> {
        match mt {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
            other => Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {other:?})"
                ),
            )),
        }
    }
}

/// Apply a JSON merge patch.
pub fn merge_patch(doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request("a merge patch must be a JSON object"));
    }
    json_patch::merge(doc, patch);
    Ok(())
}

/// Apply a JSON patch; a failing operation (including `test`) is 422. The
/// caller passes a copy of the object (a failed patch leaves that copy
/// half-patched). Operation count and copied bytes are bounded (413, see
/// [`crate::resources::limits`]).
pub fn json_patch(doc: &mut Value, patch: &Value, kind: &str, name: &str) -> Result<(), ApiError> {
    if let Some(ops) = patch.as_array() {
        crate::resources::limits::check_patch_operations(ops.len())?;
    }
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("the JSON patch is malformed: {e}")))?;
    let mut budget = crate::resources::limits::CopyBudget::default();
    let applied = ops.0.iter().enumerate().try_for_each(|(i, op)| {
        if let json_patch::PatchOperation::Copy(c) = op
            && let Some(v) = doc.pointer(c.from.as_str())
        {
            budget.spend(v, c.path.count())?;
        }
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            PatchFailure::Op(e)
        })?;
        Ok::<(), PatchFailure>(())
    });
    applied.map_err(|f| match f {
        PatchFailure::Limit(e) => e,
        PatchFailure::Op(e) => op_failed(e, kind, name),
    })
}

enum PatchFailure {
    Limit(ApiError),
    Op(json_patch::PatchError),
}

impl From<ApiError> for PatchFailure {
    fn from(e: ApiError) -> Self {
        PatchFailure::Limit(e)
    }
}

fn op_failed(e: json_patch::PatchError, kind: &str, name: &str) -> ApiError {
    {
        let mut err = ApiError::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: the JSON patch could not be applied: {e}"),
        );
        err.causes.push(crate::error::Cause {
            reason: "FieldValueInvalid".into(),
            message: e.to_string(),
            field: e.path.to_string(),
        });
        err
    }
}

fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "volumeDevices"
        | "resourceClaims"
        | "readinessGates"
        | "subjects" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "hostAliases" => Some("ip"),
        "ports" => {
            if items.iter().any(|i| i.get("containerPort").is_some()) {
                Some("containerPort")
            } else {
                Some("port")
            }
        }
        _ => None,
    }
}

const PRIMITIVE_MERGE_LISTS: &[&str] = &["finalizers"];

/// Apply a strategic merge patch (see the module docs for what is covered).
pub fn strategic_merge(doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "a strategic merge patch must be a JSON object",
        ));
    }
    merge_object(doc, patch);
    Ok(())
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn merge_object(doc: &mut Value, patch: &Value) {
    let Some(pm) = patch.as_object() else {
        *doc = patch.clone();
        return;
    };
    if pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        *doc = strip_directives(patch);
        return;
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(dm) = doc.as_object_mut() else {
        return;
    };
    for (k, pv) in pm {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (dm.get_mut(field), pv.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match pv {
            Value::Null => {
                dm.remove(k);
            }
            Value::Array(items) => {
                if let Some(mk) = merge_key(k, items) {
                    let target = dm
                        .entry(k.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    merge_keyed_list(target, items, mk);
                } else if PRIMITIVE_MERGE_LISTS.contains(&k.as_str()) {
                    let target = dm
                        .entry(k.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(t) = target {
                        for i in items {
                            if !t.contains(i) {
                                t.push(i.clone());
                            }
                        }
                    } else {
                        *target = pv.clone();
                    }
                } else {
                    dm.insert(k.clone(), strip_directives(pv));
                }
            }
            Value::Object(_) => {
                let target = dm.entry(k.clone()).or_insert(Value::Null);
                if pv.get("$patch").and_then(Value::as_str) == Some("delete") {
                    dm.remove(k);
                } else {
                    merge_object(target, pv);
                }
            }
            other => {
                dm.insert(k.clone(), other.clone());
            }
        }
    }
}

fn merge_keyed_list(target: &mut Value, items: &[Value], key: &str) {
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Some(list) = target.as_array_mut() else {
        return;
    };
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *list = items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(strip_directives)
            .collect();
        return;
    }
    for item in items {
        let id = item.get(key);
        let pos = id.and_then(|id| list.iter().position(|x| x.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(p), true) => {
                list.remove(p);
            }
            (None, true) => {}
            (Some(p), false) => merge_object(&mut list[p], item),
            (None, false) => list.push(strip_directives(item)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_by_name() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}, "metadata": {"finalizers": ["f1"]}});
        let patch = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}, "metadata": {"finalizers": ["f2"]}});
        strategic_merge(&mut pod, &patch).unwrap();
        assert_eq!(pod["spec"]["containers"][0]["image"], "x");
        assert_eq!(pod["spec"]["containers"][1]["image"], "z");
        assert_eq!(pod["spec"]["containers"][2]["name"], "c");
        assert_eq!(pod["metadata"]["finalizers"], json!(["f1", "f2"]));
        let del = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}, "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}});
        strategic_merge(&mut pod, &del).unwrap();
        assert_eq!(pod["spec"]["containers"].as_array().unwrap().len(), 2);
        assert_eq!(pod["metadata"]["finalizers"], json!(["f2"]));
    }

    #[test]
    fn json_patch_test_failure_is_invalid() {
        let mut doc = json!({"a": 1});
        let err = json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/a", "value": 2}]),
            "X",
            "n",
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        json_patch(
            &mut doc,
            &json!([{"op": "replace", "path": "/a", "value": 3}]),
            "X",
            "n",
        )
        .unwrap();
        assert_eq!(doc["a"], 3);
        assert_eq!(
            json_patch(&mut doc, &json!({"op": 1}), "X", "n")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn merge_patch_removes_nulls() {
        let mut doc = json!({"a": {"b": 1, "c": 2}});
        merge_patch(&mut doc, &json!({"a": {"b": null}})).unwrap();
        assert_eq!(doc, json!({"a": {"c": 2}}));
        assert!(PatchKind::from_media_type("text/plain").is_err());
    }
}
