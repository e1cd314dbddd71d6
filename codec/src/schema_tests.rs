//! CustomResourceDefinitions in protobuf: the hand-written conversions of
//! their schema (`$ref`, raw JSON values, the "or" types, the status
//! subresource), each both ways, and random schema trees round-tripped.

use super::*;
use crate::bridge::Conv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresourceStatus, JSON, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, JSONSchemaPropsOrStringArray, ValidationRule,
};
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pbx;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Value, json};

fn round_trip<O, P>(o: &O) -> O
where
    O: Conv<P>,
    P: prost::Message + Default,
{
    let bytes = o.to_pb().encode_to_vec();
    let p = P::decode(bytes.as_slice()).expect("decodes");
    O::from_pb(p).expect("converts back")
}

fn schema(type_: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some(type_.into()),
        ..Default::default()
    }
}

#[test]
fn ref_is_ref_path_and_json_values_keep_their_type() {
    let s = JSONSchemaProps {
        ref_path: Some("#/definitions/port".into()),
        default: Some(JSON(json!({"a": [1, 2.5, "x", true, null]}))),
        example: Some(JSON(json!(-7))),
        enum_: Some(vec![
            JSON(json!("a")),
            JSON(json!(1)),
            JSON(json!(1.5)),
            JSON(json!(false)),
        ]),
        maximum: Some(1.5),
        minimum: Some(0.0),
        ..Default::default()
    };
    let p = s.to_pb();
    assert_eq!(p.r#ref.as_deref(), Some("#/definitions/port"));
    assert_eq!(
        p.default.as_ref().and_then(|j| j.raw.as_deref()),
        Some(br#"{"a":[1,2.5,"x",true,null]}"#.as_slice())
    );
    assert_eq!(p.r#enum.len(), 4);
    assert_eq!(round_trip(&s), s);
}

#[test]
fn json_values_that_are_not_json_are_a_typed_error() {
    let bad = pbx::Json {
        raw: Some(b"{not json".to_vec()),
    };
    assert!(matches!(
        JSON::from_pb(bad),
        Err(CodecError::Field { what: "JSON", .. })
    ));
    // An absent value is JSON null, as the API server reads it.
    assert_eq!(
        JSON::from_pb(pbx::Json { raw: None }).unwrap(),
        JSON(Value::Null)
    );
}

#[test]
fn additional_properties_false_true_and_a_schema() {
    for v in [
        JSONSchemaPropsOrBool::Bool(false),
        JSONSchemaPropsOrBool::Bool(true),
        JSONSchemaPropsOrBool::Schema(Box::new(schema("string"))),
    ] {
        assert_eq!(round_trip(&v), v);
    }
    let p = JSONSchemaPropsOrBool::Schema(Box::new(schema("string"))).to_pb();
    assert_eq!(p.allows, Some(true), "a schema allows");
    // A message with neither field set reads as `false`, as Go prints it.
    let empty = Box::new(pbx::JsonSchemaPropsOrBool::default());
    assert_eq!(
        JSONSchemaPropsOrBool::from_pb(empty).unwrap(),
        JSONSchemaPropsOrBool::Bool(false)
    );
}

#[test]
fn items_one_schema_or_a_list() {
    for v in [
        JSONSchemaPropsOrArray::Schema(Box::new(schema("integer"))),
        JSONSchemaPropsOrArray::Schemas(vec![schema("integer"), schema("string")]),
    ] {
        assert_eq!(round_trip(&v), v);
    }
    // Both set: the list wins, as the API server's Go type prints it.
    let both = Box::new(pbx::JsonSchemaPropsOrArray {
        schema: Some(Box::new(schema("integer").to_pb())),
        j_son_schemas: vec![schema("string").to_pb()],
    });
    assert_eq!(
        JSONSchemaPropsOrArray::from_pb(both).unwrap(),
        JSONSchemaPropsOrArray::Schemas(vec![schema("string")])
    );
}

#[test]
fn dependencies_a_schema_or_property_names() {
    for v in [
        JSONSchemaPropsOrStringArray::Schema(Box::new(schema("object"))),
        JSONSchemaPropsOrStringArray::Strings(vec!["a".into(), "b".into()]),
    ] {
        assert_eq!(round_trip(&v), v);
    }
}

#[test]
fn the_status_subresource_is_an_empty_object() {
    let s = CustomResourceSubresourceStatus(json!({}));
    assert_eq!(round_trip(&s), s);
}

#[test]
fn a_whole_crd_round_trips_through_the_envelope() {
    let props = json!({
      "size": {"type": "integer", "format": "int32", "default": 3, "minimum": 0.0, "maximum": 1.5e3},
      "color": {"type": "string", "enum": ["red", "blue"], "example": "red", "nullable": true},
      "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "granular"},
      "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
         "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
      "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
      "embedded": {"type": "object", "x-kubernetes-embedded-resource": true,
         "x-kubernetes-preserve-unknown-fields": true},
      "closed": {"type": "object", "additionalProperties": false},
      "tuple": {"type": "array", "items": [{"type": "string"}], "additionalItems": true},
      "not": {"type": "string", "not": {"pattern": "^x"}, "allOf": [{"maxLength": 5}], "oneOf": [{"minLength": 1}]}
    });
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
          "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                    "listKind": "GadgetList", "shortNames": ["gd"], "categories": ["all"]},
          "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
             "clientConfig": {"caBundle": "AAEC", "service": {"namespace": "ns", "name": "conv", "path": "/c", "port": 443}}}},
          "versions": [{"name": "v1", "served": true, "storage": true,
            "deprecated": true, "deprecationWarning": "use v2",
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
               "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
            "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size",
               "priority": 1, "format": "int32", "description": "how big"}],
            "selectableFields": [{"jsonPath": ".spec.color"}],
            "schema": {"openAPIV3Schema": {"type": "object", "description": "a gadget",
              "properties": {"spec": {"type": "object",
                "required": ["size"],
                "x-kubernetes-validations": [{"rule": "self.size >= 0", "message": "m",
                   "messageExpression": "'bad'", "reason": "FieldValueInvalid",
                   "fieldPath": ".size", "optionalOldSelf": true}],
                "properties": props,
                "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
                "patternProperties": {"^x-": {"type": "string"}},
                "definitions": {"port": {"type": "integer"}},
                "externalDocs": {"description": "docs", "url": "https://example.com"}},
                "status": {"type": "object", "$ref": "#/definitions/status"}}}}}]},
        "status": {"storedVersions": ["v1"],
          "acceptedNames": {"plural": "gadgets", "kind": "Gadget"},
          "conditions": [{"type": "Established", "status": "True",
             "lastTransitionTime": "2026-11-23T10:00:00Z", "reason": "InitialNamesAccepted", "message": "ok"}]}
    });
    let typed: CustomResourceDefinition = serde_json::from_value(crd.clone()).unwrap();
    let back = from_protobuf(&to_protobuf(&crd).unwrap()).unwrap();
    let back_typed: CustomResourceDefinition = serde_json::from_value(back.clone()).unwrap();
    assert_eq!(back_typed, typed);
    // Spot checks on the JSON itself (what a protobuf client reads back).
    let props = &back["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(props["spec"]["properties"]["size"]["default"], json!(3));
    assert_eq!(
        props["spec"]["properties"]["closed"]["additionalProperties"],
        json!(false)
    );
    assert_eq!(props["spec"]["dependencies"]["a"], json!(["b"]));
    assert_eq!(props["status"]["$ref"], "#/definitions/status");
    assert_eq!(
        back["spec"]["versions"][0]["subresources"]["status"],
        json!({})
    );
    assert_eq!(back["kind"], "CustomResourceDefinition");
    // And as a list.
    let list = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
        "metadata": {"resourceVersion": "7"}, "items": [crd]});
    let back = from_protobuf(&to_protobuf(&list).unwrap()).unwrap();
    let item: CustomResourceDefinition = serde_json::from_value(back["items"][0].clone()).unwrap();
    assert_eq!(item, typed);
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[ -~]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..3).prop_map(Value::from),
            btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-zA-Z0-9]{0,6}"
}

/// A schema's scalar fields (lists and maps absent or non-empty: protobuf
/// has no empty-but-set list).
fn leaf_schema() -> impl Strategy<Value = JSONSchemaProps> {
    (
        (
            option::of(prop_oneof![
                Just("object"),
                Just("string"),
                Just("integer"),
                Just("array")
            ]),
            option::of(word()),
            option::of(word().prop_map(|w| format!("#/definitions/{w}"))),
            option::of(json_value().prop_map(JSON)),
            option::of(vec(json_value().prop_map(JSON), 1..3)),
            option::of(-1e6f64..1e6),
            option::of(0i64..100),
        ),
        (
            option::of(any::<bool>()),
            option::of(any::<bool>()),
            option::of(vec(word(), 1..3)),
            option::of(prop_oneof![Just("atomic"), Just("set"), Just("map")]),
            option::of(vec(
                (word(), option::of(word())).prop_map(|(rule, message)| ValidationRule {
                    rule,
                    message,
                    ..Default::default()
                }),
                1..2,
            )),
        ),
    )
        .prop_map(
            |((t, desc, r, default, en, max, min_len), (pres, ios, req, lt, rules))| {
                JSONSchemaProps {
                    type_: t.map(str::to_string),
                    description: desc,
                    ref_path: r,
                    default,
                    enum_: en,
                    maximum: max,
                    min_length: min_len,
                    x_kubernetes_preserve_unknown_fields: pres,
                    x_kubernetes_int_or_string: ios,
                    required: req,
                    x_kubernetes_list_type: lt.map(str::to_string),
                    x_kubernetes_validations: rules,
                    ..Default::default()
                }
            },
        )
}

fn schema_tree() -> impl Strategy<Value = JSONSchemaProps> {
    leaf_schema().prop_recursive(3, 24, 3, |inner| {
        (
            leaf_schema(),
            option::of(btree_map(word(), inner.clone(), 1..3)),
            option::of(prop_oneof![
                inner
                    .clone()
                    .prop_map(|s| JSONSchemaPropsOrArray::Schema(Box::new(s))),
                vec(inner.clone(), 0..2).prop_map(JSONSchemaPropsOrArray::Schemas),
            ]),
            option::of(prop_oneof![
                any::<bool>().prop_map(JSONSchemaPropsOrBool::Bool),
                inner
                    .clone()
                    .prop_map(|s| JSONSchemaPropsOrBool::Schema(Box::new(s))),
            ]),
            option::of(vec(inner.clone(), 1..3)),
            option::of(inner.clone().prop_map(Box::new)),
            option::of(btree_map(
                word(),
                prop_oneof![
                    vec(word(), 0..2).prop_map(JSONSchemaPropsOrStringArray::Strings),
                    inner.prop_map(|s| JSONSchemaPropsOrStringArray::Schema(Box::new(s))),
                ],
                1..3,
            )),
        )
            .prop_map(|(mut s, props, items, extra, any_of, not, deps)| {
                s.properties = props;
                s.items = items;
                s.additional_properties = extra;
                s.any_of = any_of;
                s.not = not;
                s.dependencies = deps;
                s
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_schemas_round_trip(s in schema_tree()) {
        // What Go's JSON writes of the schema: its non-pointer `omitempty`
        // fields (`nullable: false`, `type: ""`) left out when zero.
        let mut go = serde_json::to_value(&s).unwrap();
        let facts = crate::facts::go_struct("apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaProps").unwrap();
        crate::facts::normalize_struct(&mut go, facts);
        let go_form: JSONSchemaProps = serde_json::from_value(go).unwrap();
        // (Through JSON, which reads a `null` default as absent, as Go's
        // `*JSON` reads it.)
        let back: JSONSchemaProps = serde_json::from_value(serde_json::to_value(round_trip(&s)).unwrap()).unwrap();
        prop_assert_eq!(back, go_form.clone());
        // And through the JSON the server stores: protobuf reads back what
        // the JSON reads as (k8s-openapi reads a `null` default as absent).
        let v = serde_json::to_value(&s).unwrap();
        let want = go_form;
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "a.b"},
            "spec": {"group": "b", "scope": "Cluster", "names": {"plural": "a", "kind": "A"},
              "versions": [{"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": v}}]}});
        let back = from_protobuf(&to_protobuf(&crd).unwrap()).unwrap();
        let got: JSONSchemaProps = serde_json::from_value(
            back["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()).unwrap();
        prop_assert_eq!(got, want);
    }
}
