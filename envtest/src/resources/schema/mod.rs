//! Structural-schema handling for custom resources, as the API server does
//! with a CRD version's `openAPIV3Schema`: unknown fields are pruned
//! (unless `x-kubernetes-preserve-unknown-fields` or `additionalProperties`
//! allow them), then the object is validated — `type`, `required`, `enum`,
//! `nullable`, `minimum`/`maximum`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`, and the constraints of [`constraints`] — and every
//! violation becomes a cause with its field path in one 422 Invalid answer.
//! Between pruning and validation, [`defaults`] fill in `default` values.
//! `apiVersion`, `kind` and `metadata` at the root are never pruned.
//! The junctors `allOf`/`anyOf`/`oneOf`/`not` are value validations
//! ([`junctors`]). [`structural`] checks the schema itself when its CRD is
//! written, and
//! [`cel`] compiles and evaluates its `x-kubernetes-validations` rules.

mod cel;
mod cel_cost;
mod cel_k8s;
mod cel_library;
mod cel_quantity;
mod cel_url;
mod constraints;
mod defaults;
pub mod expr;
mod junctors;
mod structural;

pub use structural::check_crd_schemas;

use crate::error::{ApiError, Cause};
use serde_json::{Map, Value};
use std::sync::Arc;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Remove fields the schema does not know (see the module docs), appending
/// the path of each removed field to `pruned`.
pub fn prune(schema: &Value, v: &mut Value, path: &str, pruned: &mut Vec<String>) {
    let root = path.is_empty();
    if schema["x-kubernetes-preserve-unknown-fields"] == true && schema.get("properties").is_none()
    {
        return;
    }
    match v {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            let additional = &schema["additionalProperties"];
            let keep_unknown = schema["x-kubernetes-preserve-unknown-fields"] == true;
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(&k)) {
                    Some(sub) => {
                        if let Some(child) = map.get_mut(&k) {
                            prune(sub, child, &join(path, &k), pruned);
                        }
                    }
                    None if additional.is_object() => {
                        if let Some(child) = map.get_mut(&k) {
                            prune(additional, child, &join(path, &k), pruned);
                        }
                    }
                    None if keep_unknown || *additional == true => {}
                    None => {
                        if map.remove(&k).is_some_and(|v| !v.is_null()) {
                            pruned.push(join(path, &k));
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (n, i) in items.iter_mut().enumerate() {
                    prune(item_schema, i, &format!("{path}[{n}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn invalid(causes: &mut Vec<Cause>, reason: &str, field: &str, message: String) {
    causes.push(Cause {
        reason: reason.into(),
        message,
        field: field.to_string(),
    });
}

/// Validate `v` against `schema`, appending a cause per violation.
pub fn validate(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() {
        if schema["nullable"] != true && schema.get("type").is_some() {
            invalid(
                causes,
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}",
                    schema["type"].as_str().unwrap_or("?")
                ),
            );
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"] == true && !(v.is_i64() || v.is_u64() || v.is_string())
    {
        let got = type_name(v);
        invalid(
            causes,
            "FieldValueTypeInvalid",
            path,
            format!(
                "Invalid value: \"{got}\": {path} in body must be of type integer,string: \"{got}\""
            ),
        );
        return;
    }
    if let Some(want) = schema["type"].as_str() {
        let got = type_name(v);
        let ok = want == got || (want == "number" && got == "integer");
        if !ok {
            invalid(
                causes,
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"{got}\": {path} in body must be of type {want}: \"{got}\""
                ),
            );
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        invalid(
            causes,
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {v}: supported values: {}",
                list.join(", ")
            ),
        );
    }
    if junctors::present(schema) {
        junctors::check(schema, v, path, causes);
    }
    match v {
        Value::Number(n) => {
            constraints::check_number(schema, n, path, causes);
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = schema["minimum"].as_f64()
                && x < min
            {
                invalid(
                    causes,
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {n}: {path} in body should be greater than or equal to {min}"
                    ),
                );
            }
            if let Some(max) = schema["maximum"].as_f64()
                && x > max
            {
                invalid(
                    causes,
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {n}: {path} in body should be less than or equal to {max}"
                    ),
                );
            }
        }
        Value::String(s) => {
            constraints::check_string(schema, s, path, causes);
            let len = s.chars().count() as u64;
            if let Some(min) = schema["minLength"].as_u64()
                && len < min
            {
                invalid(
                    causes,
                    "FieldValueInvalid",
                    path,
                    format!(
                        "Invalid value: {s:?}: {path} in body should be at least {min} chars long"
                    ),
                );
            }
            if let Some(max) = schema["maxLength"].as_u64()
                && len > max
            {
                invalid(
                    causes,
                    "FieldValueTooLong",
                    path,
                    format!("Too long: {path} may not be more than {max} bytes"),
                );
            }
        }
        Value::Array(items) => {
            constraints::check_list(schema, items, path, causes);
            let n = items.len() as u64;
            if let Some(min) = schema["minItems"].as_u64()
                && n < min
            {
                invalid(
                    causes,
                    "FieldValueInvalid",
                    path,
                    format!("Invalid value: {n}: {path} in body should have at least {min} items"),
                );
            }
            if let Some(max) = schema["maxItems"].as_u64()
                && n > max
            {
                invalid(
                    causes,
                    "FieldValueTooMany",
                    path,
                    format!("Too many: {n}: must have at most {max} items"),
                );
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => validate_object(schema, map, path, causes),
        _ => {}
    }
}

fn validate_object(schema: &Value, map: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    if !path.is_empty() {
        constraints::check_object(schema, map, path, causes);
    }
    for r in schema["required"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if let Some(k) = r.as_str()
            && map.get(k).is_none_or(Value::is_null)
        {
            invalid(
                causes,
                "FieldValueRequired",
                &join(path, k),
                "Required value".into(),
            );
        }
    }
    let props = schema["properties"].as_object();
    for (k, child) in map {
        if path.is_empty() && k == "metadata" {
            continue;
        }
        if let Some(sub) = props.and_then(|p| p.get(k)) {
            validate(sub, child, &join(path, k), causes);
        } else if schema["additionalProperties"].is_object() {
            validate(
                &schema["additionalProperties"],
                child,
                &join(path, k),
                causes,
            );
        }
    }
}

/// Schemas known to declare (true) or not declare (false) a `default`,
/// keyed by the schema's allocation; entries whose schema was dropped are
/// evicted on the next miss.
static DECLARES_DEFAULTS: parking_lot::Mutex<Vec<(std::sync::Weak<Value>, bool)>> =
    parking_lot::Mutex::new(Vec::new());

fn declares_defaults(schema: &Arc<Value>) -> bool {
    let mut cache = DECLARES_DEFAULTS.lock();
    if let Some((_, d)) = cache
        .iter()
        .find(|(w, _)| w.upgrade().is_some_and(|s| Arc::ptr_eq(&s, schema)))
    {
        return *d;
    }
    cache.retain(|(w, _)| w.strong_count() > 0);
    let d = defaults::declares_any(schema);
    cache.push((Arc::downgrade(schema), d));
    d
}

/// A stored custom resource as a reader sees it: with the `default`s of
/// `schema` filled in, as the API server defaults objects it decodes from
/// storage. `None` when nothing needs filling in (the stored bytes can be
/// served as they are). Storage is not rewritten.
pub fn default_on_read(schema: &Arc<Value>, stored: &Value) -> Option<Value> {
    if !declares_defaults(schema) {
        return None;
    }
    let mut v = stored.clone();
    defaults::apply(schema, &mut v, true).then_some(v)
}

/// Prune then validate a custom resource being created; 422 Invalid listing
/// every violation. Answers the paths of the pruned (unknown) fields.
pub fn check(schema: &Arc<Value>, obj: &mut Value, kind: &str) -> Result<Vec<String>, ApiError> {
    check_update(schema, obj, None, kind)
}

/// As [`check`], for an object replacing `old` (when there is one): CEL
/// transition rules see the old values, and unchanged values are not
/// re-checked by CEL rules.
pub fn check_update(
    schema: &Arc<Value>,
    obj: &mut Value,
    old: Option<&Value>,
    kind: &str,
) -> Result<Vec<String>, ApiError> {
    let mut pruned = Vec::new();
    prune(schema, obj, "", &mut pruned);
    let _ = defaults::apply(schema, obj, true);
    let mut causes = Vec::new();
    validate(schema, obj, "", &mut causes);
    if causes.is_empty() {
        match &*cel::rules_for(schema) {
            Ok(rules) => cel::evaluate(rules, obj, old, "", &mut causes),
            Err(refused) => causes.extend(refused.iter().cloned()),
        }
    }
    if causes.is_empty() {
        return Ok(pruned);
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let summary: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("{kind} \"{name}\" is invalid: [{}]", summary.join(", ")),
    );
    e.causes = causes;
    e.details = Some(Box::new(crate::error::Details {
        name,
        group: String::new(),
        kind: kind.to_string(),
    }));
    Err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["color"], "properties": {
                "color": {"type": "string", "enum": ["red", "blue"]},
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }})
    }

    #[test]
    fn int_or_string_takes_an_integer_or_a_string_only() {
        let s = json!({"x-kubernetes-int-or-string": true});
        for ok in [json!(8080), json!("http")] {
            let mut causes = Vec::new();
            validate(&s, &ok, "spec.port", &mut causes);
            assert!(causes.is_empty(), "{ok} refused: {causes:?}");
        }
        for bad in [json!(true), json!(1.5), json!({"a": 1}), json!([1])] {
            let mut causes = Vec::new();
            validate(&s, &bad, "spec.port", &mut causes);
            assert_eq!(causes.len(), 1, "{bad} accepted");
            assert_eq!(causes[0].field, "spec.port");
            assert!(causes[0].message.contains("must be of type integer,string"));
        }
    }

    #[test]
    fn unknown_fields_are_pruned() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a", "anything": 1},
            "spec": {"color": "red", "bogus": 1, "extra": {"free": {"form": true}}, "labels": {"a": "b"}},
            "status": {"ready": true, "unknown": 2}, "top": 1});
        let pruned = check(&Arc::new(schema()), &mut obj, "W").unwrap();
        assert_eq!(pruned, vec!["spec.bogus", "status.unknown", "top"]);
        assert!(obj.get("top").is_none());
        assert!(obj["spec"].get("bogus").is_none());
        assert_eq!(obj["spec"]["extra"]["free"]["form"], true);
        assert_eq!(obj["spec"]["labels"]["a"], "b");
        assert!(obj["status"].get("unknown").is_none());
        assert_eq!(
            obj["metadata"]["anything"], 1,
            "metadata is left to metadata validation"
        );
    }

    #[test]
    fn violations_are_listed_with_field_paths() {
        let mut obj = json!({"metadata": {"name": "a"}, "spec": {"color": "green", "size": 11, "tags": ["a", "b", 3], "labels": {"a": 1}}});
        let e = check(&Arc::new(schema()), &mut obj, "W").unwrap_err();
        assert_eq!(e.code, 422);
        let fields: Vec<&str> = e.causes.iter().map(|c| c.field.as_str()).collect();
        for f in [
            "spec.color",
            "spec.size",
            "spec.tags",
            "spec.tags[2]",
            "spec.labels.a",
        ] {
            assert!(fields.contains(&f), "{f} missing from {fields:?}");
        }
        let mut missing = json!({"metadata": {"name": "a"}, "spec": {}});
        let e = check(&Arc::new(schema()), &mut missing, "W").unwrap_err();
        assert_eq!(e.causes[0].field, "spec.color");
        assert_eq!(e.causes[0].reason, "FieldValueRequired");
    }
}
