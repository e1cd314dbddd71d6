//! Checks on a CRD's schemas when the CRD is created or updated, as the API
//! server refuses non-structural schemas (422 with the field path): every
//! node names a `type` (unless `x-kubernetes-int-or-string` or
//! `x-kubernetes-preserve-unknown-fields` stands in for it), the root is an
//! object, arrays have `items`, `properties` and `additionalProperties` are
//! not both given, `uniqueItems: true` is forbidden, patterns compile,
//! list types are known and map lists name their keys, and the junctors
//! (`allOf`, `anyOf`, `oneOf`, `not`) hold value validations only.
//!
//! `x-kubernetes-validations` (CEL rules) are compiled by [`super::cel`]:
//! a rule that is malformed, or that calls what envtest cannot evaluate, is
//! refused with the path of the rule.

use crate::error::{ApiError, Cause};
use serde_json::Value;

fn push(causes: &mut Vec<Cause>, reason: &str, field: String, message: String) {
    causes.push(Cause {
        reason: reason.into(),
        message,
        field,
    });
}

fn node(schema: &Value, path: &str, root: bool, causes: &mut Vec<Cause>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    let ty = map.get("type").and_then(Value::as_str).unwrap_or("");
    let stands_in = schema["x-kubernetes-int-or-string"] == true
        || schema["x-kubernetes-preserve-unknown-fields"] == true;
    if root && ty != "object" {
        push(
            causes,
            "FieldValueInvalid",
            format!("{path}.type"),
            format!("Invalid value: {ty:?}: must be object at the root"),
        );
    } else if ty.is_empty() && !stands_in {
        push(
            causes,
            "FieldValueRequired",
            format!("{path}.type"),
            "Required value: must not be empty for specified object fields".into(),
        );
    }
    if map.contains_key("properties")
        && map
            .get("additionalProperties")
            .is_some_and(|a| *a != Value::Bool(false))
    {
        push(
            causes,
            "FieldValueForbidden",
            format!("{path}.additionalProperties"),
            "Forbidden: additionalProperties and properties are mutual exclusive".into(),
        );
    }
    if ty == "array" && !map.contains_key("items") {
        push(
            causes,
            "FieldValueRequired",
            format!("{path}.items"),
            "Required value: must be specified".into(),
        );
    }
    if schema["uniqueItems"] == true {
        push(
            causes,
            "FieldValueForbidden",
            format!("{path}.uniqueItems"),
            "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic".into(),
        );
    }
    if let Some(p) = schema["pattern"].as_str()
        && let Err(e) = super::constraints::compile(p)
    {
        push(
            causes,
            "FieldValueInvalid",
            format!("{path}.pattern"),
            format!("Invalid value: {p:?}: must be a valid regular expression, but isn't: {e}"),
        );
    }
    match schema["x-kubernetes-list-type"].as_str() {
        None | Some("atomic" | "set") => {}
        Some("map") => {
            if schema["x-kubernetes-list-map-keys"]
                .as_array()
                .is_none_or(Vec::is_empty)
            {
                push(
                    causes,
                    "FieldValueRequired",
                    format!("{path}.x-kubernetes-list-map-keys"),
                    "Required value: must not be empty if x-kubernetes-list-type is map".into(),
                );
            }
        }
        Some(other) => push(
            causes,
            "FieldValueNotSupported",
            format!("{path}.x-kubernetes-list-type"),
            format!("Unsupported value: {other:?}: supported values: \"atomic\", \"map\", \"set\""),
        ),
    }
    super::junctors::check_structural(schema, path, causes);
    if let Some(props) = schema["properties"].as_object() {
        for (k, sub) in props {
            node(sub, &format!("{path}.properties[{k}]"), false, causes);
        }
    }
    if schema["additionalProperties"].is_object() {
        node(
            &schema["additionalProperties"],
            &format!("{path}.additionalProperties"),
            false,
            causes,
        );
    }
    if schema["items"].is_object() {
        node(&schema["items"], &format!("{path}.items"), false, causes);
    }
}

/// Check every version's `openAPIV3Schema` of a CRD (422 listing every
/// problem).
pub fn check_crd_schemas(crd: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    let versions = crd["spec"]["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, v) in versions.iter().enumerate() {
        let schema = &v["schema"]["openAPIV3Schema"];
        if schema.is_object() {
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            node(schema, &path, true, &mut causes);
            let rules = super::cel::compile(schema, &path, true, &mut causes);
            if rules.cost() > super::cel_cost::CRD_LIMIT {
                push(
                    &mut causes,
                    "FieldValueForbidden",
                    path.clone(),
                    super::cel_cost::over_budget(
                        "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                        rules.cost(),
                        super::cel_cost::CRD_LIMIT,
                    ),
                );
            }
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    Err(ApiError::invalid_causes(
        "CustomResourceDefinition",
        name,
        causes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({"metadata": {"name": "w.example.com"}, "spec": {"versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn structural_schemas_pass() {
        let ok = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "pattern": "^[a-z]+$"}},
            "byName": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
        }}}});
        check_crd_schemas(&crd(ok)).unwrap();
    }

    #[test]
    fn non_structural_schemas_and_malformed_cel_are_refused_with_paths() {
        let bad = json!({"type": "object", "properties": {
            "spec": {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "uniqueItems": true},
            "name": {"type": "string", "pattern": "(unclosed"},
            "byName": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}},
            "checked": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() > 1"}, {"rule": "self.size( >"}]}
        }});
        let e = check_crd_schemas(&crd(bad)).unwrap_err();
        assert_eq!(e.code, 422);
        let fields: Vec<&str> = e.causes.iter().map(|c| c.field.as_str()).collect();
        let p = "spec.versions[0].schema.openAPIV3Schema.properties";
        for want in [
            format!("{p}[spec].type"),
            format!("{p}[spec].additionalProperties"),
            format!("{p}[list].items"),
            format!("{p}[list].uniqueItems"),
            format!("{p}[name].pattern"),
            format!("{p}[byName].x-kubernetes-list-map-keys"),
            format!("{p}[checked].x-kubernetes-validations[1].rule"),
        ] {
            assert!(fields.contains(&want.as_str()), "{want} not in {fields:?}");
        }
        let e = check_crd_schemas(&crd(json!({"type": "string"}))).unwrap_err();
        assert_eq!(
            e.causes[0].field,
            "spec.versions[0].schema.openAPIV3Schema.type"
        );
    }
}
