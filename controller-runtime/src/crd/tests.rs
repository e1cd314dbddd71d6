//! Unit tests: the structural rewriting of schemars output for the shapes
//! serde can produce, and CRD assembly.

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::*;

/// The structural schema of `T` (or the error).
fn structural_of<T: JsonSchema>() -> Result<Value, SchemaError> {
    let mut g = generator();
    let s = g.subschema_for::<T>();
    let defs = g.take_definitions(true);
    schema::structural(s.to_value(), &defs)
}

#[derive(Serialize, Deserialize, JsonSchema)]
enum Unit {
    Fast,
    Slow,
}

#[derive(Serialize, Deserialize, JsonSchema)]
enum External {
    Http { port: u16 },
    Tcp { port: u16, tls: bool },
}

#[derive(Serialize, Deserialize, JsonSchema)]
enum Mixed {
    Off,
    Http { port: u16 },
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type")]
enum Internal {
    Http { port: u16 },
    Tcp { port: u16, tls: bool },
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    Http { port: u16 },
    Tcp { tls: bool },
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum UntaggedObjects {
    A { a: String },
    B { b: i32 },
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum IntOrStr {
    Int(i32),
    Str(String),
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum Unrelated {
    B(bool),
    S(String),
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Recursive {
    children: Vec<Recursive>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Inner {
    x: i64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Flattened {
    name: String,
    #[serde(flatten)]
    inner: Inner,
    #[serde(flatten)]
    mode: External,
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Everything {
    /// How fast.
    mode: Option<Unit>,
    replicas: Option<u32>,
    labels: BTreeMap<String, String>,
    raw: serde_json::Value,
    raw_map: BTreeMap<String, serde_json::Value>,
    inner: Option<Inner>,
    tags: std::collections::BTreeSet<String>,
    #[schemars(range(min = 0, max = 10), extend("exclusiveMinimum" = 0))]
    ratio: f64,
}

/// Checks the structural-schema rules the API server enforces, everywhere
/// in the tree; returns the first violation.
pub(super) fn check_structural(v: &Value, path: &str) -> Result<(), String> {
    let Some(o) = v.as_object() else {
        return Err(format!("{path}: not an object"));
    };
    for k in [
        "$ref",
        "$schema",
        "$defs",
        "definitions",
        "const",
        "title",
        "examples",
        "prefixItems",
        "uniqueItems",
    ] {
        if o.contains_key(k) {
            return Err(format!("{path}: keyword {k}"));
        }
    }
    let typed = o.get("type").is_some_and(Value::is_string);
    let special = o.get("x-kubernetes-int-or-string") == Some(&json!(true))
        || o.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if !typed && !special {
        return Err(format!("{path}: no type"));
    }
    if o.contains_key("properties") && o.contains_key("additionalProperties") {
        return Err(format!("{path}: properties and additionalProperties"));
    }
    if o.get("additionalProperties").is_some_and(Value::is_boolean) {
        return Err(format!("{path}: boolean additionalProperties"));
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(members) = o.get(key) {
            for m in members.as_array().into_iter().flatten() {
                let mo = m.as_object().ok_or(format!("{path}: {key} member"))?;
                if mo.keys().any(|k| {
                    !["required", "not", "minProperties", "maxProperties"].contains(&k.as_str())
                }) {
                    return Err(format!("{path}: {key} member with {m}"));
                }
            }
        }
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            check_structural(p, &format!("{path}.{name}"))?;
        }
    }
    if let Some(items) = o.get("items") {
        check_structural(items, &format!("{path}[*]"))?;
    }
    if let Some(ap) = o.get("additionalProperties") {
        check_structural(ap, &format!("{path}.*"))?;
    }
    Ok(())
}

fn ok<T: JsonSchema>() -> Value {
    let v = structural_of::<T>().unwrap();
    check_structural(&v, "").unwrap();
    v
}

#[test]
fn options_refs_maps_and_any_values_become_structural() {
    let v = ok::<Everything>();
    let p = &v["properties"];
    assert_eq!(
        p["mode"],
        json!({"description": "How fast.", "type": "string", "enum": ["Fast", "Slow"], "nullable": true})
    );
    assert_eq!(
        p["replicas"],
        json!({"type": "integer", "minimum": 0, "nullable": true})
    );
    assert_eq!(p["inner"]["nullable"], json!(true));
    assert_eq!(
        p["inner"]["properties"]["x"],
        json!({"type": "integer", "format": "int64"})
    );
    assert_eq!(
        p["labels"],
        json!({"type": "object", "additionalProperties": {"type": "string"}})
    );
    assert_eq!(
        p["raw"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(
        p["rawMap"],
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
    );
    assert_eq!(
        p["tags"],
        json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"})
    );
    assert_eq!(
        p["ratio"],
        json!({"type": "number", "format": "double", "minimum": 0, "exclusiveMinimum": true, "maximum": 10})
    );
    assert_eq!(
        v["required"],
        json!(["labels", "raw", "rawMap", "tags", "ratio"])
    );
}

#[test]
fn externally_tagged_struct_variants_keep_exactly_one_variant() {
    let v = ok::<External>();
    assert_eq!(v["type"], "object");
    assert_eq!(
        v["oneOf"],
        json!([{"required": ["Http"]}, {"required": ["Tcp"]}])
    );
    assert_eq!(v["properties"]["Tcp"]["required"], json!(["port", "tls"]));
    assert!(v.get("required").is_none());
}

#[test]
fn unit_and_struct_variants_together_become_an_untyped_preserved_node() {
    /// How it listens.
    #[derive(JsonSchema)]
    struct Holder {
        mode: Mixed,
        /// Maybe.
        fallback: Option<Mixed>,
    }
    let v = structural_of::<Holder>().unwrap();
    assert_eq!(
        v["properties"]["mode"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    let fallback = &v["properties"]["fallback"];
    assert_eq!(
        fallback["x-kubernetes-preserve-unknown-fields"], true,
        "{fallback}"
    );
    assert!(fallback.get("type").is_none(), "{fallback}");
    assert_eq!(v["required"], json!(["mode"]));
    // A CRD holding it builds.
    let info = CrdVersionInfo::new("example.com", "v1", "Listener", "listeners");
    let crd = version_crd(&info, |g| g.subschema_for::<Holder>(), None, None).unwrap();
    assert_eq!(crd.spec.versions.len(), 1);
}

#[test]
fn unrelated_scalars_are_still_refused_with_the_path() {
    #[derive(JsonSchema)]
    struct Holder {
        flag: Unrelated,
    }
    match structural_of::<Holder>() {
        Err(SchemaError::NonStructural { path, reason }) => {
            assert_eq!(path, ".flag");
            assert!(reason.contains("different JSON types"), "{reason}");
        }
        other => panic!("expected NonStructural, got {other:?}"),
    }
}

#[test]
fn internally_tagged_enums_merge_variants_and_enumerate_the_tag() {
    let v = ok::<Internal>();
    assert_eq!(
        v["properties"]["type"],
        json!({"type": "string", "enum": ["Http", "Tcp"]})
    );
    assert_eq!(v["properties"]["tls"], json!({"type": "boolean"}));
    assert_eq!(v["required"], json!(["type", "port"]));
    assert!(v.get("oneOf").is_none());
}

#[test]
fn adjacently_tagged_enums_merge_the_content_objects() {
    let v = ok::<Adjacent>();
    assert_eq!(
        v["properties"]["t"],
        json!({"type": "string", "enum": ["Http", "Tcp"]})
    );
    let c = &v["properties"]["c"];
    assert_eq!(c["type"], "object");
    assert!(c["properties"].get("port").is_some() && c["properties"].get("tls").is_some());
    assert!(
        c.get("required").is_none(),
        "neither field is in every variant: {c}"
    );
    assert!(c.get("x-kubernetes-preserve-unknown-fields").is_none());
    assert_eq!(v["required"], json!(["t", "c"]));
}

#[test]
fn untagged_enums_of_objects_merge_and_int_or_string_is_recognised() {
    let v = ok::<UntaggedObjects>();
    assert_eq!(v["properties"]["a"], json!({"type": "string"}));
    assert_eq!(
        v["properties"]["b"],
        json!({"type": "integer", "format": "int32"})
    );
    assert_eq!(
        ok::<IntOrStr>(),
        json!({"x-kubernetes-int-or-string": true})
    );
    assert!(matches!(
        structural_of::<Unrelated>(),
        Err(SchemaError::NonStructural { .. })
    ));
}

#[test]
fn flattened_structs_and_enums_join_the_outer_object() {
    let v = ok::<Flattened>();
    let props = v["properties"].as_object().unwrap();
    let mut names: Vec<&str> = props.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["Http", "Tcp", "name", "x"]);
    assert_eq!(v["required"], json!(["name", "x"]));
    assert_eq!(
        v["oneOf"],
        json!([{"required": ["Http"]}, {"required": ["Tcp"]}])
    );
}

#[test]
fn recursion_and_tuples_are_typed_errors() {
    assert!(matches!(
        structural_of::<Recursive>(),
        Err(SchemaError::Recursive { name, .. }) if name == "Recursive"
    ));
    #[derive(JsonSchema)]
    struct Pair {
        p: (i32, String),
    }
    match structural_of::<Pair>() {
        Err(SchemaError::NonStructural { path, .. }) => assert_eq!(path, ".p"),
        other => panic!("{other:?}"),
    }
    let defs = Map::new();
    assert!(matches!(
        schema::structural(json!({"$ref": "#/$defs/Nope"}), &defs),
        Err(SchemaError::UnresolvedRef { .. })
    ));
}

#[derive(JsonSchema)]
struct SpecA {
    /// Name of the deployment.
    deployment_name: String,
    replicas: Option<i32>,
}

#[derive(JsonSchema)]
struct StatusA {
    available_replicas: i32,
}

fn info_a() -> CrdVersionInfo {
    CrdVersionInfo {
        short_names: &["fa"],
        categories: &["all"],
        status_subresource: true,
        scale: Some(ScaleSubresource {
            spec_replicas_path: ".spec.replicas",
            status_replicas_path: ".status.available_replicas",
            label_selector_path: None,
        }),
        printer_columns: &[PrinterColumn {
            name: "Replicas",
            type_: "integer",
            json_path: ".spec.replicas",
            format: None,
            description: Some("desired"),
            priority: Some(1),
        }],
        selectable_fields: &[".spec.deployment_name"],
        deprecated: true,
        deprecation_warning: Some("use v2"),
        annotations: &[("a", "b")],
        labels: &[("l", "m")],
        ..CrdVersionInfo::new("example.com", "v1", "FooA", "fooas")
    }
}

#[test]
fn version_crd_carries_every_option() {
    let crd = version_crd(
        &info_a(),
        |g| g.subschema_for::<SpecA>(),
        Some(|g| g.subschema_for::<StatusA>()),
        Some(json!({"properties": {"replicas": {"minimum": 1}}, "self": {"x-kubernetes-validations": [{"rule": "true"}]}})),
    )
    .unwrap();
    let v = serde_json::to_value(&crd).unwrap();
    assert_eq!(
        v["metadata"],
        json!({"name": "fooas.example.com", "annotations": {"a": "b"}, "labels": {"l": "m"}})
    );
    assert_eq!(
        v["spec"]["names"],
        json!({"kind": "FooA", "listKind": "FooAList", "plural": "fooas", "singular": "fooa", "shortNames": ["fa"], "categories": ["all"]})
    );
    assert_eq!(v["spec"]["scope"], "Namespaced");
    let ver = &v["spec"]["versions"][0];
    assert_eq!(ver["deprecated"], true);
    assert_eq!(ver["deprecationWarning"], "use v2");
    assert_eq!(ver["subresources"]["status"], json!({}));
    assert_eq!(
        ver["subresources"]["scale"]["specReplicasPath"],
        ".spec.replicas"
    );
    assert_eq!(ver["additionalPrinterColumns"][0]["priority"], 1);
    assert_eq!(
        ver["selectableFields"],
        json!([{"jsonPath": ".spec.deployment_name"}])
    );
    let root = &ver["schema"]["openAPIV3Schema"];
    check_structural(root, "").unwrap();
    assert_eq!(root["required"], json!(["spec"]));
    assert_eq!(root["properties"]["metadata"], json!({"type": "object"}));
    let spec = &root["properties"]["spec"];
    assert_eq!(spec["properties"]["replicas"]["minimum"], json!(1.0));
    assert_eq!(spec["x-kubernetes-validations"], json!([{"rule": "true"}]));
    assert_eq!(
        spec["properties"]["deployment_name"]["description"],
        "Name of the deployment."
    );
    assert_eq!(
        root["properties"]["status"]["required"],
        json!(["available_replicas"])
    );
}

#[test]
fn schema_errors_name_the_kind_version_and_part() {
    let err = version_crd(&info_a(), |g| g.subschema_for::<Recursive>(), None, None).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("FooA v1: spec schema:"), "{text}");
}

#[test]
fn merge_requires_one_storage_version_and_agreement() {
    let spec: SchemaFn = |g| g.subschema_for::<SpecA>();
    let v1 = CrdVersionInfo::new("example.com", "v1", "Foo", "foos");
    let v1beta1 = CrdVersionInfo {
        storage: false,
        ..CrdVersionInfo::new("example.com", "v1beta1", "Foo", "foos")
    };
    let crd = |i: &CrdVersionInfo| version_crd(i, spec, None, None).unwrap();

    let merged = merge_versions(vec![crd(&v1beta1), crd(&v1)]).unwrap();
    let names: Vec<&str> = merged
        .spec
        .versions
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(names, ["v1beta1", "v1"]);
    assert!(merged.spec.versions[1].storage);

    let none = CrdVersionInfo {
        storage: false,
        ..v1
    };
    assert!(matches!(
        merge_versions(vec![crd(&v1beta1), crd(&none)]),
        Err(CrdError::StorageVersions(0, _))
    ));
    let two = CrdVersionInfo {
        storage: true,
        ..v1beta1
    };
    assert!(matches!(
        merge_versions(vec![crd(&two), crd(&v1)]),
        Err(CrdError::StorageVersions(2, _))
    ));
    assert!(
        matches!(merge_versions(vec![crd(&v1), crd(&v1)]), Err(CrdError::DuplicateVersion(v)) if v == "v1")
    );
    let other_group = CrdVersionInfo {
        group: "other.com",
        ..v1beta1
    };
    assert!(matches!(
        merge_versions(vec![crd(&other_group), crd(&v1)]),
        Err(CrdError::Disagree { what: "group", .. })
    ));
    let cluster = CrdVersionInfo {
        namespaced: false,
        ..v1beta1
    };
    assert!(matches!(
        merge_versions(vec![crd(&cluster), crd(&v1)]),
        Err(CrdError::Disagree { what: "scope", .. })
    ));
    assert!(matches!(merge_versions(vec![]), Err(CrdError::NoVersions)));
}

#[test]
fn paths_missing_from_the_schema_are_typed_errors_with_a_suggestion() {
    let info = CrdVersionInfo {
        printer_columns: &[PrinterColumn {
            name: "Ready",
            type_: "integer",
            json_path: ".status.availableReplica",
            format: None,
            description: None,
            priority: None,
        }],
        ..info_a()
    };
    let err = version_crd(
        &info,
        |g| g.subschema_for::<SpecA>(),
        Some(|g| g.subschema_for::<StatusA>()),
        None,
    )
    .unwrap_err();
    match &err {
        CrdError::UnknownPath {
            what,
            missing,
            parent,
            suggestion,
            ..
        } => {
            assert_eq!(*what, "printer column");
            assert_eq!(missing, "availableReplica");
            assert_eq!(parent, ".status");
            assert_eq!(suggestion.as_deref(), Some("available_replicas"));
        }
        other => panic!("{other:?}"),
    }
    let info = CrdVersionInfo {
        selectable_fields: &[".spec.deployment_nme"],
        ..info_a()
    };
    let err = version_crd(
        &info,
        |g| g.subschema_for::<SpecA>(),
        Some(|g| g.subschema_for::<StatusA>()),
        None,
    )
    .unwrap_err();
    assert!(
        err.to_string().ends_with("did you mean `deployment_name`?"),
        "{err}"
    );
    // Below a map or free-form node anything may exist.
    #[derive(JsonSchema)]
    struct Free {
        labels: BTreeMap<String, String>,
        raw: serde_json::Value,
    }
    let info = CrdVersionInfo {
        selectable_fields: &[".spec.labels.app", ".spec.raw.x.y", ".metadata.name"],
        scale: None,
        printer_columns: &[],
        ..info_a()
    };
    assert!(version_crd(&info, |g| g.subschema_for::<Free>(), None, None).is_ok());
}

/// The case: an adjacently tagged enum whose variants carry content
/// of different JSON types (a string and an object).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "via", content = "to")]
enum Notify {
    Email(String),
    Webhook { url: String },
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "via", content = "to")]
enum NotifyScalars {
    Count(u32),
    Name(String),
    Flag(bool),
    List(Vec<String>),
}

#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind")]
enum SameFieldOtherTypes {
    A {
        value: String,
        n: Option<Vec<u32>>,
    },
    B {
        value: Inner,
        n: Option<Vec<String>>,
    },
}

#[test]
fn adjacently_tagged_content_of_different_types_keeps_unknown_fields() {
    #[derive(JsonSchema)]
    struct Holder {
        notify: Notify,
        scalars: Option<NotifyScalars>,
    }
    let v = ok::<Holder>();
    let n = &v["properties"]["notify"];
    assert_eq!(
        n["properties"]["via"],
        json!({"type": "string", "enum": ["Email", "Webhook"]})
    );
    // The content is untyped: the API server keeps whatever each variant
    // writes (a string or an object); the tag is still validated.
    assert_eq!(
        n["properties"]["to"]["x-kubernetes-preserve-unknown-fields"],
        json!(true)
    );
    assert!(n["properties"]["to"].get("type").is_none(), "{n}");
    assert_eq!(n["required"], json!(["via", "to"]));
    let s = &v["properties"]["scalars"];
    assert_eq!(s["nullable"], json!(true));
    assert_eq!(
        s["properties"]["via"]["enum"],
        json!(["Count", "Name", "Flag", "List"])
    );
    assert_eq!(
        s["properties"]["to"]["x-kubernetes-preserve-unknown-fields"],
        json!(true)
    );
}

#[test]
fn one_field_of_different_types_in_two_variants_is_widened_not_refused() {
    let v = ok::<SameFieldOtherTypes>();
    assert_eq!(
        v["properties"]["value"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    // Two arrays whose items differ: still an array, items widened.
    assert_eq!(v["properties"]["n"]["type"], "array");
    assert_eq!(v["properties"]["n"]["nullable"], json!(true));
    assert_eq!(
        v["properties"]["n"]["items"],
        json!({"x-kubernetes-int-or-string": true})
    );
}
