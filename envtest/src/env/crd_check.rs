//! Whether a CRD on an existing cluster serves what a test's CRD needs, so
//! that existing-cluster mode can use it as it is: the same group, kind and
//! scope; every version the test serves served there too, with the
//! subresources the test's has, and every field of the test's schema in
//! its schema (of the same type). More (versions, fields, printer columns)
//! is fine: a deployed operator's CRD may be newer than the test's.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::Value;

/// What `cluster` lacks of `wanted`, one sentence each; empty when it
/// serves everything `wanted` does.
pub(super) fn differences(
    cluster: &CustomResourceDefinition,
    wanted: &CustomResourceDefinition,
) -> Vec<String> {
    let (have, want) = (&cluster.spec, &wanted.spec);
    let mut out = Vec::new();
    let mut same = |what: &str, have: &str, want: &str| {
        if have != want {
            out.push(format!("its {what} is {have:?}, the test's {want:?}"));
        }
    };
    same("group", &have.group, &want.group);
    same("kind", &have.names.kind, &want.names.kind);
    same("scope", &have.scope, &want.scope);
    for version in want.versions.iter().filter(|v| v.served) {
        let Some(there) = have
            .versions
            .iter()
            .find(|v| v.name == version.name && v.served)
        else {
            out.push(format!("version {} is not served", version.name));
            continue;
        };
        out.extend(
            version_differences(there, version)
                .into_iter()
                .map(|d| format!("version {}: {d}", version.name)),
        );
    }
    out
}

/// What version `there` lacks of `want`: subresources and schema fields.
fn version_differences(
    there: &CustomResourceDefinitionVersion,
    want: &CustomResourceDefinitionVersion,
) -> Vec<String> {
    let mut out = Vec::new();
    let subresources = |v: &CustomResourceDefinitionVersion| {
        let s = v.subresources.as_ref();
        (
            s.is_some_and(|s| s.status.is_some()),
            s.is_some_and(|s| s.scale.is_some()),
        )
    };
    let (have_status, have_scale) = subresources(there);
    let (want_status, want_scale) = subresources(want);
    if want_status && !have_status {
        out.push("no status subresource".into());
    }
    if want_scale && !have_scale {
        out.push("no scale subresource".into());
    }
    let schema = |v: &CustomResourceDefinitionVersion| {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or(Value::Null)
    };
    schema_differences(&schema(there), &schema(want), "", &mut out);
    out
}

/// Appends what schema `have` lacks of schema `want` at `path` (`""` for
/// the root, `.spec.replicas` below it, `[]` for array items): a field
/// `want` declares that `have` neither declares nor admits as an unknown
/// field, or a different `type`.
fn schema_differences(have: &Value, want: &Value, path: &str, out: &mut Vec<String>) {
    let shown = |path: &str| {
        if path.is_empty() {
            "the root".to_string()
        } else {
            format!("field {}", path.trim_start_matches('.'))
        }
    };
    if let (Some(h), Some(w)) = (have.get("type"), want.get("type"))
        && h != w
    {
        out.push(format!("{} is of type {h}, the test's {w}", shown(path)));
        return;
    }
    let preserves = have
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if let Some(fields) = want.get("properties").and_then(Value::as_object) {
        for (name, field) in fields {
            let at = format!("{path}.{name}");
            match have.get("properties").and_then(|p| p.get(name)) {
                Some(there) => schema_differences(there, field, &at, out),
                None if preserves => {}
                None => out.push(format!("{} is not in its schema", shown(&at))),
            }
        }
    }
    for nested in ["items", "additionalProperties"] {
        if let (Some(h), Some(w)) = (have.get(nested), want.get(nested))
            && w.is_object()
        {
            let at = if nested == "items" {
                format!("{path}[]")
            } else {
                format!("{path}.*")
            };
            schema_differences(h, w, &at, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::differences;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use serde_json::json;

    fn crd(scope: &str, versions: serde_json::Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "foos.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Foo", "plural": "foos"},
                "scope": scope,
                "versions": versions,
            }
        }))
        .unwrap()
    }

    fn version(name: &str, served: bool, spec: serde_json::Value) -> serde_json::Value {
        json!({
            "name": name, "served": served, "storage": true,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": spec},
            }}},
        })
    }

    fn test_crd() -> CustomResourceDefinition {
        crd(
            "Namespaced",
            json!([version(
                "v1",
                true,
                json!({"name": {"type": "string"}, "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}}})
            )]),
        )
    }

    #[test]
    fn a_crd_with_more_fields_and_versions_serves_the_test() {
        let more = crd(
            "Namespaced",
            json!([
                version("v1alpha1", true, json!({})),
                version(
                    "v1",
                    true,
                    json!({"name": {"type": "string"}, "extra": {"type": "string"}, "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}, "host": {"type": "string"}}}}})
                ),
            ]),
        );
        assert_eq!(differences(&more, &test_crd()), Vec::<String>::new());
        assert_eq!(differences(&test_crd(), &test_crd()), Vec::<String>::new());
    }

    #[test]
    fn every_difference_is_named() {
        let mut other = crd(
            "Cluster",
            json!([version(
                "v1",
                true,
                json!({"name": {"type": "integer"}, "ports": {"type": "array", "items": {"type": "object", "properties": {}}}})
            )]),
        );
        other.spec.group = "other.com".into();
        other.spec.names.kind = "Bar".into();
        assert_eq!(
            differences(&other, &test_crd()),
            [
                "its group is \"other.com\", the test's \"example.com\"",
                "its kind is \"Bar\", the test's \"Foo\"",
                "its scope is \"Cluster\", the test's \"Namespaced\"",
                "version v1: field spec.name is of type \"integer\", the test's \"string\"",
                "version v1: field spec.ports[].port is not in its schema",
            ]
        );
    }

    #[test]
    fn a_version_not_served_or_without_status_is_named() {
        let unserved = crd("Namespaced", json!([version("v1", false, json!({}))]));
        assert_eq!(
            differences(&unserved, &test_crd()),
            ["version v1 is not served"]
        );
        let mut no_status = test_crd();
        no_status.spec.versions[0].subresources = None;
        assert_eq!(
            differences(&no_status, &test_crd()),
            ["version v1: no status subresource"]
        );
    }

    #[test]
    fn unknown_fields_preserved_admit_any_field() {
        let open = crd(
            "Namespaced",
            json!([{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }]),
        );
        assert_eq!(differences(&open, &test_crd()), Vec::<String>::new());
    }
}
