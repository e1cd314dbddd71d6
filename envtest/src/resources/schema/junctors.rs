//! The logical junctors of a CRD schema — `allOf`, `anyOf`, `oneOf` and
//! `not` — as the API server treats them: value validations only.
//!
//! On writes of a custom resource ([`check`]) each junctor's subschemas are
//! evaluated against the value with the ordinary validation: `allOf` adds
//! every subschema's violations; `anyOf` fails unless one subschema passes
//! (`must validate at least one schema (anyOf)`, plus the violations of the
//! closest subschema); `oneOf` fails unless exactly one passes; `not` fails
//! when its subschema passes.
//!
//! When the CRD is written ([`check_structural`]) a junctor may not carry
//! what shapes the object (`type`, `default`, `description`, `nullable`,
//! `additionalProperties`, the `x-kubernetes-*` extensions including CEL
//! rules; a `type` only in the int-or-string pattern), and every property or item it mentions must
//! also be specified outside the junctors.

use crate::error::Cause;
use serde_json::Value;

const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];

fn subschemas<'a>(schema: &'a Value, junctor: &str) -> Vec<(String, &'a Value)> {
    match &schema[junctor] {
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("{junctor}[{i}]"), s))
            .collect(),
        s @ Value::Object(_) => vec![(junctor.to_string(), s)],
        _ => Vec::new(),
    }
}

/// Whether `schema` has a junctor at its own level.
pub fn present(schema: &Value) -> bool {
    schema
        .as_object()
        .is_some_and(|m| JUNCTORS.iter().any(|j| m.contains_key(*j)))
}

fn violations(schema: &Value, v: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    super::validate(schema, v, path, &mut causes);
    causes
}

fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn failed(path: &str, v: &Value, what: &str) -> Cause {
    let at = if path.is_empty() { "<root>" } else { path };
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {at} in body {what}", shown(v)),
        field: path.to_string(),
    }
}

/// Evaluate the junctors of `schema` against `v`, appending a cause per
/// violation.
pub fn check(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    for (_, sub) in subschemas(schema, "allOf") {
        causes.extend(violations(sub, v, path));
    }
    let any = subschemas(schema, "anyOf");
    if !any.is_empty() {
        let results: Vec<Vec<Cause>> = any.iter().map(|(_, s)| violations(s, v, path)).collect();
        if results.iter().all(|r| !r.is_empty()) {
            causes.push(failed(path, v, "must validate at least one schema (anyOf)"));
            causes.extend(closest(results));
        }
    }
    let one = subschemas(schema, "oneOf");
    if !one.is_empty() {
        let results: Vec<Vec<Cause>> = one.iter().map(|(_, s)| violations(s, v, path)).collect();
        match results.iter().filter(|r| r.is_empty()).count() {
            1 => {}
            0 => {
                causes.push(failed(
                    path,
                    v,
                    "must validate one and only one schema (oneOf). Found none valid",
                ));
                causes.extend(closest(results));
            }
            n => causes.push(failed(
                path,
                v,
                &format!(
                    "must validate one and only one schema (oneOf). Found {n} valid alternatives"
                ),
            )),
        }
    }
    if let Some((_, sub)) = subschemas(schema, "not").into_iter().next()
        && violations(sub, v, path).is_empty()
    {
        causes.push(failed(path, v, "must not validate the schema (not)"));
    }
}

/// The violations of the subschema that came closest to passing.
fn closest(results: Vec<Vec<Cause>>) -> Vec<Cause> {
    results.into_iter().min_by_key(Vec::len).unwrap_or_default()
}

fn forbid(causes: &mut Vec<Cause>, field: String, message: &str) {
    causes.push(Cause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {message}"),
        field,
    });
}

/// Keys a value validation may not carry, with the API server's message.
const NOT_IN_VALUE_VALIDATIONS: [(&str, &str); 12] = [
    ("type", "must be empty to be structural"),
    ("default", "must be undefined to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    (
        "x-kubernetes-preserve-unknown-fields",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-embedded-resource",
        "must be false to be structural",
    ),
    (
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    ),
    (
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    ),
    (
        "x-kubernetes-map-type",
        "must be undefined to be structural",
    ),
    (
        "x-kubernetes-int-or-string",
        "must be false to be structural",
    ),
    ("x-kubernetes-validations", "must be empty to be structural"),
];

/// A subschema of a junctor at `path` (`outer` is the schema node the
/// junctor belongs to): no structure of its own, and nothing it mentions
/// that `outer` does not specify.
fn value_validation(sub: &Value, outer: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(map) = sub.as_object() else {
        return;
    };
    // The int-or-string pattern: anyOf [{type: integer}, {type: string}].
    let int_or_string = outer["x-kubernetes-int-or-string"] == true
        && matches!(
            map.get("type").and_then(Value::as_str),
            Some("integer" | "string")
        );
    for (key, message) in NOT_IN_VALUE_VALIDATIONS {
        if key == "type" && int_or_string {
            continue;
        }
        let set = match map.get(key) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        };
        if set {
            forbid(causes, format!("{path}.{key}"), message);
        }
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            let at = format!("{path}.properties[{k}]");
            match outer["properties"].get(k) {
                Some(o) => value_validation(p, o, &at, causes),
                None if outer["additionalProperties"].is_object() => {
                    value_validation(p, &outer["additionalProperties"], &at, causes)
                }
                None => causes.push(Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: must have a corresponding property outside of value validations".into(),
                    field: at,
                }),
            }
        }
    }
    if let Some(items) = map.get("items") {
        let at = format!("{path}.items");
        if outer["items"].is_object() {
            value_validation(items, &outer["items"], &at, causes);
        } else {
            causes.push(Cause {
                reason: "FieldValueRequired".into(),
                message:
                    "Required value: must have a corresponding items outside of value validations"
                        .into(),
                field: at,
            });
        }
    }
    for j in JUNCTORS {
        for (name, nested) in subschemas(sub, j) {
            value_validation(nested, outer, &format!("{path}.{name}"), causes);
        }
    }
}

/// Check the junctors of one schema node (at `path`) when its CRD is
/// written.
pub fn check_structural(schema: &Value, path: &str, causes: &mut Vec<Cause>) {
    for j in JUNCTORS {
        if !schema[j].is_null() && !schema[j].is_array() && !schema[j].is_object() {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: must be a schema or a list of schemas",
                    schema[j]
                ),
                field: format!("{path}.{j}"),
            });
        }
        for (name, sub) in subschemas(schema, j) {
            value_validation(sub, schema, &format!("{path}.{name}"), causes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(c: &[Cause]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{} {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn junctors_are_evaluated_as_value_validations() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string"}, "n": {"type": "integer"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
            "oneOf": [{"properties": {"n": {"minimum": 10}}}, {"properties": {"n": {"maximum": 5}}}],
            "not": {"required": ["a", "b"]},
            "allOf": [{"properties": {"a": {"maxLength": 3}}}]
        });
        let mut c = Vec::new();
        check(&schema, &json!({"a": "x", "n": 1}), "spec", &mut c);
        assert!(c.is_empty(), "{:?}", fields(&c));

        let mut c = Vec::new();
        check(&schema, &json!({"n": 7}), "spec", &mut c);
        let f = fields(&c);
        assert!(
            f.iter()
                .any(|m| m.contains("spec in body must validate at least one schema (anyOf)")),
            "{f:?}"
        );
        assert!(
            f.iter().any(|m| m.starts_with("spec.a Required value")),
            "closest branch listed: {f:?}"
        );
        assert!(
            f.iter().any(|m| m.contains("(oneOf). Found none valid")),
            "{f:?}"
        );

        let mut c = Vec::new();
        check(
            &schema,
            &json!({"a": "long", "b": "y", "n": 1}),
            "spec",
            &mut c,
        );
        let f = fields(&c);
        assert!(
            f.iter()
                .any(|m| m.contains("must not validate the schema (not)")),
            "{f:?}"
        );
        assert!(
            f.iter()
                .any(|m| m.starts_with("spec.a ") && m.contains("Too long")),
            "allOf: {f:?}"
        );

        let both = json!({"oneOf": [{"minimum": 0}, {"maximum": 10}]});
        let mut c = Vec::new();
        check(&both, &json!(5), "spec.n", &mut c);
        assert!(
            fields(&c)[0].contains("Found 2 valid alternatives"),
            "{:?}",
            fields(&c)
        );
    }

    #[test]
    fn junctors_may_not_shape_the_object() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"},
            "port": {"x-kubernetes-int-or-string": true,
                "anyOf": [{"type": "integer"}, {"type": "string"}]}},
            "anyOf": [{"type": "object", "properties": {"a": {"default": "x"}, "ghost": {"minLength": 1}}}],
            "not": {"nullable": true, "items": {"maxLength": 1},
                "x-kubernetes-validations": [{"rule": "true"}]}
        });
        let mut c = Vec::new();
        check_structural(&schema, "s", &mut c);
        let mut f: Vec<String> = c.iter().map(|c| c.field.clone()).collect();
        f.sort();
        assert_eq!(
            f,
            vec![
                "s.anyOf[0].properties[a].default",
                "s.anyOf[0].properties[ghost]",
                "s.anyOf[0].type",
                "s.not.items",
                "s.not.nullable",
                "s.not.x-kubernetes-validations",
            ]
        );
        let mut c = Vec::new();
        check_structural(&schema["properties"]["port"], "s.properties[port]", &mut c);
        assert!(
            c.is_empty(),
            "int-or-string pattern allowed: {:?}",
            fields(&c)
        );
    }
}
