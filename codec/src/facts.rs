//! Go facts of every bridged type: for each field of each Go struct the
//! built-in kinds reach, what Kubernetes' own type definitions (`types.go`
//! of `k8s.io/api`, `k8s.io/apimachinery`, `k8s.io/apiextensions-apiserver`)
//! say about it: its JSON name, whether its Go type is a value, a pointer, a
//! slice or a map, its element type, whether its JSON tag has `omitempty`
//! (or `omitzero`), and its protobuf field number. `gen_facts.py` writes the
//! tables (`facts/common.rs` and one file per Kubernetes version for what
//! differs) from the Go sources of the version's release tag; each file's
//! header names the commits.
//!
//! Two uses: the bridge's zero-value rule (a Go zero value of a non-pointer
//! field whose JSON Go would omit reads back as absent; see
//! `docs/protobuf.md`), and [`normalize_json`], which gives a JSON object
//! the form Go's `encoding/json` writes for it (what envtest serves).
//!
//! ```
//! use informer_codec::facts::{self, Shape};
//! let spec = facts::go_struct("core/v1.PodSpec").expect("PodSpec is bridged");
//! let node_name = spec.field("nodeName").expect("PodSpec has nodeName");
//! assert_eq!((node_name.shape, node_name.omitempty), (Shape::Value, true));
//! let pod = facts::go_kind("v1", "Pod").expect("Pod is bridged");
//! assert_eq!(pod.openapi, "api::core::v1::Pod");
//! ```

use serde_json::{Map, Value};

/// How a field's Go type holds its value (the outermost layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A plain value (a scalar, or a struct that is always there).
    Value,
    /// A pointer (`*T`): nil is absent, a zero it points to is kept.
    Pointer,
    /// A slice (`[]T`, including `[]byte`).
    Slice,
    /// A map (`map[K]V`).
    Map,
}

/// The innermost element type of a field (under its pointer, slice or map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    /// A string, or a named type over one (`PodPhase`, `types.UID`).
    String,
    /// An integer of any width, or a named type over one.
    Int,
    /// A boolean.
    Bool,
    /// A float.
    Float,
    /// A byte (`[]byte` is a slice of them).
    Byte,
    /// `metav1.Time`: JSON `null` when zero, an empty message in protobuf.
    Time,
    /// `metav1.MicroTime`: as `Time`, with microseconds.
    MicroTime,
    /// `metav1.Duration` (a string in JSON).
    Duration,
    /// `metav1.FieldsV1` (raw JSON).
    FieldsV1,
    /// `resource.Quantity` (a string in JSON).
    Quantity,
    /// `intstr.IntOrString`.
    IntOrString,
    /// `runtime.RawExtension` (an embedded object; JSON `null` when empty).
    RawExtension,
    /// apiextensions' `JSON` (a raw JSON value).
    Json,
    /// apiextensions' `JSONSchemaPropsOrArray`.
    SchemaOrArray,
    /// apiextensions' `JSONSchemaPropsOrBool`.
    SchemaOrBool,
    /// apiextensions' `JSONSchemaPropsOrStringArray`.
    SchemaOrStringArray,
    /// A struct of the tables, by its key (see [`go_struct`]).
    Struct(&'static str),
    /// Not in the Go sources the table was made from (a field k8s-openapi
    /// has from a newer commit): assumed optional, a pointer with
    /// `omitempty`, as Kubernetes' API conventions write one.
    Unknown,
}

/// One field of a Go struct (fields of embedded structs are flattened in,
/// as Go's JSON has them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoField {
    /// The Go field name (empty for an [`Elem::Unknown`] field).
    pub go_name: &'static str,
    /// The JSON name (the same as k8s-openapi's serde name).
    pub json: &'static str,
    /// The k8s-openapi field name (empty when k8s-openapi lacks the field).
    pub rust: &'static str,
    /// Value, pointer, slice or map.
    pub shape: Shape,
    /// The element type.
    pub elem: Elem,
    /// The JSON tag has `omitempty`.
    pub omitempty: bool,
    /// The JSON tag has `omitzero` (Go 1.24+: a zero value is left out).
    pub omitzero: bool,
    /// The protobuf field number (0: none).
    pub proto_tag: u32,
    /// The Go type as written in the source.
    pub go_type: &'static str,
    /// The embedded Go field this one comes from (empty: the struct's own).
    pub via: &'static str,
}

impl GoField {
    /// Whether Go's `encoding/json` leaves this field out when it holds its
    /// Go zero value (`""`, `0`, `false`, nil, an empty slice or map, a
    /// zero time). A zero `metav1.Time` is written as `null`, which
    /// k8s-openapi reads as absent, so times count as left out whatever
    /// the tag; other non-pointer structs are always written.
    pub fn zero_reads_absent(&self) -> bool {
        match (self.shape, self.elem) {
            (Shape::Value, Elem::Time | Elem::MicroTime | Elem::RawExtension) => true,
            (Shape::Value, Elem::String | Elem::Int | Elem::Bool | Elem::Float) => {
                self.omitempty || self.omitzero
            }
            (Shape::Value, _) => self.omitzero,
            (Shape::Pointer, _) => self.omitempty || self.omitzero,
            (Shape::Slice | Shape::Map, _) => self.omitempty,
        }
    }
}

/// One Go struct of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoStruct {
    /// Its key: the Go package path after `k8s.io/api/` or `k8s.io/`, a
    /// dot, the type name (`core/v1.PodSpec`,
    /// `apimachinery/pkg/apis/meta/v1.ObjectMeta`).
    pub go: &'static str,
    /// The k8s-openapi type's path under the crate (empty: none).
    pub openapi: &'static str,
    /// Its fields, in the Go source's order.
    pub fields: &'static [GoField],
}

impl GoStruct {
    /// The field of a JSON name.
    pub fn field(&self, json: &str) -> Option<&'static GoField> {
        self.fields.iter().find(|f| f.json == json)
    }
}

#[allow(clippy::too_many_arguments)]
const fn field(
    go_name: &'static str,
    json: &'static str,
    rust: &'static str,
    shape: Shape,
    elem: Elem,
    flags: (bool, bool),
    proto_tag: u32,
    go_type: &'static str,
    via: &'static str,
) -> GoField {
    GoField {
        go_name,
        json,
        rust,
        shape,
        elem,
        omitempty: flags.0,
        omitzero: flags.1,
        proto_tag,
        go_type,
        via,
    }
}

macro_rules! go_struct {
    ($go:literal, $oa:literal, [$(($gn:literal, $json:literal, $rust:literal, $shape:ident,
        $elem:ident $(($sub:literal))?, $flags:tt, $tag:literal, $gt:literal, $via:literal)),* $(,)?]) => {
        GoStruct {
            go: $go,
            openapi: $oa,
            fields: &[$(field($gn, $json, $rust, Shape::$shape, Elem::$elem $(($sub))?,
                go_struct!(@flags $flags), $tag, $gt, $via)),*],
        }
    };
    (@flags _) => { (false, false) };
    (@flags E) => { (true, false) };
    (@flags Z) => { (false, true) };
    (@flags EZ) => { (true, true) };
}

/// The structs every version shares, sorted by key.
const COMMON: &[GoStruct] = include!("facts/common.rs");

// The structs of the selected Kubernetes version that differ, sorted by key.
k8s_openapi::k8s_if_1_33! { const VERSION: &[GoStruct] = include!("facts/v1_33.rs"); }
k8s_openapi::k8s_if_1_34! { const VERSION: &[GoStruct] = include!("facts/v1_34.rs"); }
k8s_openapi::k8s_if_1_35! { const VERSION: &[GoStruct] = include!("facts/v1_35.rs"); }
k8s_openapi::k8s_if_1_36! { const VERSION: &[GoStruct] = include!("facts/v1_36.rs"); }
k8s_openapi::k8s_if_1_37! { const VERSION: &[GoStruct] = include!("facts/v1_37.rs"); }

/// Every struct of the selected Kubernetes version.
pub fn all() -> impl Iterator<Item = &'static GoStruct> {
    COMMON.iter().chain(VERSION.iter())
}

/// The struct of a key (`core/v1.PodSpec`).
pub fn go_struct(key: &str) -> Option<&'static GoStruct> {
    [VERSION, COMMON].into_iter().find_map(|table| {
        table
            .binary_search_by(|s| s.go.cmp(key))
            .ok()
            .map(|i| &table[i])
    })
}

/// The struct of a k8s-openapi type path (`api::core::v1::PodSpec`).
pub fn by_openapi(path: &str) -> Option<&'static GoStruct> {
    all().find(|s| s.openapi == path)
}

/// The Go package of an `apiVersion`'s group (the key's part before the
/// dot), for the groups the tables hold.
fn package(api_version: &str, kind: &str) -> String {
    const META: &[&str] = &[
        "Status",
        "DeleteOptions",
        "APIVersions",
        "APIGroupList",
        "APIGroup",
        "APIResourceList",
        "ListMeta",
    ];
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    match group {
        "" if META.contains(&kind) => format!("apimachinery/pkg/apis/meta/{version}"),
        "" => format!("core/{version}"),
        "meta.k8s.io" => format!("apimachinery/pkg/apis/meta/{version}"),
        "apiextensions.k8s.io" => {
            format!("apiextensions-apiserver/pkg/apis/apiextensions/{version}")
        }
        g => format!("{}/{version}", g.split('.').next().unwrap_or(g)),
    }
}

/// The struct of a kind (`"v1"`, `"Pod"`), when the tables hold it.
pub fn go_kind(api_version: &str, kind: &str) -> Option<&'static GoStruct> {
    go_struct(&format!("{}.{kind}", package(api_version, kind)))
}

/// Gives a JSON object (or list) of a kind the tables hold the form Go's
/// `encoding/json` writes for it, as kube-apiserver serves it: fields
/// Go's `omitempty` leaves out when zero (`""`, `0`, `false`, empty or
/// `null` lists and maps, `null` pointers) are removed, zero times are
/// removed (Go writes `null`), and non-pointer fields without `omitempty`
/// are written with their zero value (a non-pointer struct as an object,
/// its own fields normalized). Fields the tables do not know are kept.
/// Returns whether the kind is in the tables (`false`: left alone).
///
/// ```
/// let mut d = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
///     "metadata": {"name": "d", "namespace": ""},
///     "spec": {"template": {"spec": {"tolerations": [], "nodeName": "",
///         "containers": [{"name": "c", "ports": null}]}}}});
/// assert!(informer_codec::facts::normalize_json(&mut d));
/// assert!(d["metadata"].get("namespace").is_none());
/// let pod = &d["spec"]["template"]["spec"];
/// assert!(pod.get("tolerations").is_none() && pod.get("nodeName").is_none());
/// assert!(pod["containers"][0].get("ports").is_none());
/// ```
pub fn normalize_json(object: &mut Value) -> bool {
    let av = object["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = object["kind"].as_str().unwrap_or("").to_string();
    if let Some(s) = go_kind(&av, &kind) {
        normalize_struct(object, s);
        return true;
    }
    let Some(item) = kind.strip_suffix("List").and_then(|k| go_kind(&av, k)) else {
        return false;
    };
    for it in object["items"].as_array_mut().into_iter().flatten() {
        normalize_struct(it, item);
    }
    if let (Some(meta), Some(s)) = (
        object.get_mut("metadata"),
        go_struct("apimachinery/pkg/apis/meta/v1.ListMeta"),
    ) {
        normalize_struct(meta, s);
    }
    true
}

/// Normalizes one object of struct `s` (see [`normalize_json`]).
pub fn normalize_struct(object: &mut Value, s: &GoStruct) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    for f in s.fields {
        normalize_field(map, f);
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn zero_of(elem: Elem) -> Option<Value> {
    match elem {
        Elem::String => Some(Value::String(String::new())),
        Elem::Int => Some(Value::from(0)),
        Elem::Float => Some(Value::from(0.0)),
        Elem::Bool => Some(Value::Bool(false)),
        Elem::Struct(_) => Some(Value::Object(Map::new())),
        // Structs with a JSON form of their own: Go writes their zero.
        Elem::IntOrString => Some(Value::from(0)),
        Elem::Quantity => Some(Value::String("0".into())),
        _ => None,
    }
}

const SCHEMA: &str = "apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaProps";

fn normalize_elem(v: &mut Value, elem: Elem) {
    let key = match elem {
        Elem::Struct(key) => key,
        // A CRD schema's "or" types: a schema (or a list of them), or a
        // boolean or list of names left as they are.
        Elem::SchemaOrArray | Elem::SchemaOrBool | Elem::SchemaOrStringArray => SCHEMA,
        _ => return,
    };
    let Some(s) = go_struct(key) else {
        return;
    };
    match v {
        Value::Array(items) if elem == Elem::SchemaOrArray => {
            for it in items {
                normalize_struct(it, s);
            }
        }
        _ => normalize_struct(v, s),
    }
}

fn normalize_field(map: &mut Map<String, Value>, f: &GoField) {
    let present = map.get(f.json).is_some_and(|v| !v.is_null());
    let zero = map.get(f.json).is_none_or(is_zero);
    match f.shape {
        Shape::Pointer if !present => {
            map.remove(f.json);
        }
        Shape::Slice | Shape::Map if zero && f.omitempty => {
            map.remove(f.json);
        }
        // Built-in objects are stored in protobuf, which has no empty list
        // or map apart from an absent one: Go reads an empty one back as
        // nil, which its JSON writes as `null` without `omitempty`.
        Shape::Slice | Shape::Map if zero => {
            map.insert(f.json.to_string(), Value::Null);
        }
        Shape::Slice => {
            for it in map
                .get_mut(f.json)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                normalize_elem(it, f.elem);
            }
        }
        Shape::Map => {
            for it in map
                .get_mut(f.json)
                .and_then(Value::as_object_mut)
                .into_iter()
                .flatten()
            {
                normalize_elem(it.1, f.elem);
            }
        }
        Shape::Pointer => {
            if let Some(v) = map.get_mut(f.json) {
                normalize_elem(v, f.elem);
            }
        }
        Shape::Value => match f.elem {
            Elem::Struct(_) if !f.omitzero || present => {
                let v = map
                    .entry(f.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if v.is_null() {
                    *v = Value::Object(Map::new());
                }
                normalize_elem(v, f.elem);
            }
            _ if zero && f.zero_reads_absent() => {
                map.remove(f.json);
            }
            _ if zero => {
                if let Some(z) = zero_of(f.elem) {
                    map.insert(f.json.to_string(), z);
                }
            }
            _ => {}
        },
    }
}

#[cfg(test)]
mod tests;
