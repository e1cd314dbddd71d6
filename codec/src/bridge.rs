//! The one place where Kubernetes objects cross between their JSON form
//! (k8s-openapi's types, which serde turns into the JSON the rest of the
//! server stores) and their protobuf form (k8s-pb's prost messages).
//!
//! [`Conv`] converts one value each way. The few types whose JSON form is not
//! the list of their message's fields (Time, MicroTime, IntOrString,
//! Quantity, byte strings, and a CRD's schema: `JSONSchemaProps` and its
//! "or" types) are written out here by hand (RawExtension and
//! FieldsV1, which may embed a whole protobuf object, in `proto`); every other message gets its `Conv` from one `bridge!` line in
//! `bridge_tables/` (`common.rs` and one file per Kubernetes version for what differs), which `gen_bridge.py`
//! writes from the two crates' sources and the compiler checks (a field
//! named wrongly on either side does not build). How a field nests differs between the two: protobuf has no
//! "absent list" (an empty list or map reads back as absent, as on a
//! cluster), and Go's embedded structs are flat in JSON but a nested message
//! in protobuf (`Volume` holds a `VolumeSource`).

use super::CodecError;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use k8s_pb::apimachinery::pkg as pb;

/// A value that has a protobuf form `P`.
pub(crate) trait Conv<P>: Sized {
    /// The protobuf form.
    fn to_pb(&self) -> P;
    /// Back from the protobuf form; fails on values JSON cannot carry.
    fn from_pb(p: P) -> Result<Self, CodecError>;
}

macro_rules! same {
    ($($t:ty),*) => {$(
        impl Conv<$t> for $t {
            fn to_pb(&self) -> $t {
                self.clone()
            }
            fn from_pb(p: $t) -> Result<Self, CodecError> {
                Ok(p)
            }
        }
    )*};
}
same!(String, bool, i32, i64, f64);

/// A protobuf value's Go zero: what Go's generated marshaller writes for a
/// non-pointer field that holds its zero value (`""`, `0`, `false`, an
/// empty message for a zero `metav1.Time`, a message of zeros for a
/// struct), and whether a value read is that zero.
pub(crate) trait GoZero: Sized {
    /// The zero Go writes.
    fn go_zero() -> Self;
    /// Whether this is the zero Go writes.
    fn is_go_zero(&self) -> bool;
}

macro_rules! go_zero_default {
    ($($t:ty),*) => {$(
        impl GoZero for $t {
            fn go_zero() -> Self {
                Self::default()
            }
            fn is_go_zero(&self) -> bool {
                *self == Self::default()
            }
        }
    )*};
}
// `metav1.Time` and `MicroTime` are written as an empty message when zero
// (apimachinery's `time_proto.go`: `Marshal` returns no bytes for a zero
// time), which prost reads as neither seconds nor nanos set.
go_zero_default!(
    String,
    bool,
    i32,
    i64,
    f64,
    Vec<u8>,
    pb::apis::meta::v1::Time,
    pb::apis::meta::v1::MicroTime,
    pb::apis::meta::v1::Verbs
);

/// A zero `resource.Quantity` is written as `"0"` (its `String()`).
impl GoZero for pb::api::resource::Quantity {
    fn go_zero() -> Self {
        Self {
            string: Some("0".into()),
        }
    }
    fn is_go_zero(&self) -> bool {
        self.string.as_deref() == Some("0")
    }
}

/// A zero `intstr.IntOrString` is the integer 0, all three fields written.
impl GoZero for pb::util::intstr::IntOrString {
    fn go_zero() -> Self {
        Self {
            r#type: Some(0),
            int_val: Some(0),
            str_val: Some(String::new()),
        }
    }
    fn is_go_zero(&self) -> bool {
        self.r#type.unwrap_or(0) == 0 && self.int_val.unwrap_or(0) == 0
    }
}

impl Conv<Vec<u8>> for k8s_openapi::ByteString {
    fn to_pb(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn from_pb(p: Vec<u8>) -> Result<Self, CodecError> {
        Ok(Self(p))
    }
}

fn timestamp(seconds: Option<i64>, nanos: Option<i32>) -> Result<Timestamp, CodecError> {
    let (s, n) = (seconds.unwrap_or(0), nanos.unwrap_or(0));
    Timestamp::new(s, n).map_err(|e| CodecError::Field {
        what: "timestamp",
        message: e.to_string(),
    })
}

/// A `metav1.Time` carries whole seconds: Go writes `nanos` as 0 and
/// ignores it when reading (apimachinery's `time_proto.go`), as its JSON
/// form (RFC 3339 without fractions) has none.
impl Conv<pb::apis::meta::v1::Time> for Time {
    fn to_pb(&self) -> pb::apis::meta::v1::Time {
        pb::apis::meta::v1::Time {
            seconds: Some(self.0.as_second()),
            nanos: Some(0),
        }
    }
    fn from_pb(p: pb::apis::meta::v1::Time) -> Result<Self, CodecError> {
        timestamp(p.seconds, None).map(Time)
    }
}

impl Conv<pb::apis::meta::v1::MicroTime> for MicroTime {
    fn to_pb(&self) -> pb::apis::meta::v1::MicroTime {
        pb::apis::meta::v1::MicroTime {
            seconds: Some(self.0.as_second()),
            nanos: Some(self.0.subsec_nanosecond()),
        }
    }
    fn from_pb(p: pb::apis::meta::v1::MicroTime) -> Result<Self, CodecError> {
        timestamp(p.seconds, p.nanos).map(MicroTime)
    }
}

impl Conv<pb::util::intstr::IntOrString> for IntOrString {
    fn to_pb(&self) -> pb::util::intstr::IntOrString {
        match self {
            IntOrString::Int(i) => pb::util::intstr::IntOrString {
                r#type: Some(0),
                int_val: Some(*i),
                str_val: None,
            },
            IntOrString::String(s) => pb::util::intstr::IntOrString {
                r#type: Some(1),
                int_val: None,
                str_val: Some(s.clone()),
            },
        }
    }
    fn from_pb(p: pb::util::intstr::IntOrString) -> Result<Self, CodecError> {
        match p.r#type.unwrap_or(0) {
            0 => Ok(IntOrString::Int(p.int_val.unwrap_or(0))),
            1 => Ok(IntOrString::String(p.str_val.unwrap_or_default())),
            t => Err(CodecError::Field {
                what: "IntOrString",
                message: format!("unknown type {t}"),
            }),
        }
    }
}

impl Conv<pb::api::resource::Quantity> for Quantity {
    fn to_pb(&self) -> pb::api::resource::Quantity {
        pb::api::resource::Quantity {
            string: Some(self.0.clone()),
        }
    }
    fn from_pb(p: pb::api::resource::Quantity) -> Result<Self, CodecError> {
        Ok(Quantity(p.string.unwrap_or_default()))
    }
}

impl<O: Conv<P>, P> Conv<Box<P>> for Box<O> {
    fn to_pb(&self) -> Box<P> {
        Box::new((**self).to_pb())
    }
    fn from_pb(p: Box<P>) -> Result<Self, CodecError> {
        O::from_pb(*p).map(Box::new)
    }
}

/// How a field nests on each side: `opt` is `Option` on both (a Go
/// pointer: written when set, a zero kept), `req` a plain JSON field that
/// protobuf keeps optional (`reqtime` a time, which has no default to fall
/// back on when the message lacks it), `optvec`/`optmap` a JSON `Option` of
/// a list/map protobuf keeps bare (empty reads back as absent), `vec`/`map`
/// bare on both.
///
/// Three more for a JSON `Option` by its Go facts (`facts/`): `zopt` a
/// non-pointer Go field whose zero Go's JSON leaves out (`omitempty`
/// scalars, times): always written, its zero read as absent; `kopt` a
/// non-pointer Go field whose zero Go's JSON writes (a struct, a scalar
/// without `omitempty`): always written, its zero kept; `popt` a Go
/// pointer (or `[]byte`) whose zero has no JSON form (a zero time): written
/// when set, its zero read as absent.
mod nest {
    use super::{CodecError, Conv, GoZero};
    use std::collections::BTreeMap;

    pub(super) mod opt {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P>(o: &Option<O>) -> Option<P> {
            o.as_ref().map(Conv::to_pb)
        }
        pub(crate) fn from<O: Conv<P>, P>(p: Option<P>) -> Result<Option<O>, CodecError> {
            p.map(O::from_pb).transpose()
        }
        /// Go's zero of the field (a nil pointer).
        pub(crate) fn zero<P>() -> Option<P> {
            None
        }
    }
    /// Go's zero of a non-pointer field, as its marshaller writes it.
    pub(crate) fn written_zero<P: GoZero>() -> Option<P> {
        Some(P::go_zero())
    }
    pub(super) mod zopt {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P: GoZero>(o: &Option<O>) -> Option<P> {
            Some(o.as_ref().map_or_else(P::go_zero, Conv::to_pb))
        }
        pub(crate) fn from<O: Conv<P>, P: GoZero>(p: Option<P>) -> Result<Option<O>, CodecError> {
            p.filter(|p| !p.is_go_zero()).map(O::from_pb).transpose()
        }
        pub(crate) use super::written_zero as zero;
    }
    pub(super) mod kopt {
        pub(crate) use super::opt::from;
        pub(crate) use super::written_zero as zero;
        pub(crate) use super::zopt::to;
    }
    pub(super) mod popt {
        pub(crate) use super::opt::{to, zero};
        pub(crate) use super::zopt::from;
    }
    pub(super) mod req {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P>(o: &O) -> Option<P> {
            Some(o.to_pb())
        }
        pub(crate) fn from<O: Conv<P> + Default, P>(p: Option<P>) -> Result<O, CodecError> {
            p.map(O::from_pb).transpose().map(Option::unwrap_or_default)
        }
        pub(crate) use super::written_zero as zero;
    }
    pub(super) mod reqtime {
        pub(crate) use super::req::{to, zero};
        use super::*;
        pub(crate) fn from<O: Conv<P>, P>(p: Option<P>) -> Result<O, CodecError> {
            let p = p.ok_or(CodecError::Field {
                what: "time",
                message: "a required time is missing".into(),
            })?;
            O::from_pb(p)
        }
    }
    pub(super) mod vec {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P>(o: &[O]) -> Vec<P> {
            o.iter().map(Conv::to_pb).collect()
        }
        pub(crate) fn from<O: Conv<P>, P>(p: Vec<P>) -> Result<Vec<O>, CodecError> {
            p.into_iter().map(O::from_pb).collect()
        }
        pub(crate) fn zero<P>() -> Vec<P> {
            Vec::new()
        }
    }
    pub(super) mod optvec {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P>(o: &Option<Vec<O>>) -> Vec<P> {
            o.as_deref().map(super::vec::to).unwrap_or_default()
        }
        pub(crate) fn from<O: Conv<P>, P>(p: Vec<P>) -> Result<Option<Vec<O>>, CodecError> {
            if p.is_empty() {
                return Ok(None);
            }
            super::vec::from(p).map(Some)
        }
        pub(crate) use super::vec::zero;
    }
    pub(super) mod map {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P>(o: &BTreeMap<String, O>) -> BTreeMap<String, P> {
            o.iter().map(|(k, v)| (k.clone(), v.to_pb())).collect()
        }
        pub(crate) fn from<O: Conv<P>, P>(
            p: BTreeMap<String, P>,
        ) -> Result<BTreeMap<String, O>, CodecError> {
            p.into_iter()
                .map(|(k, v)| O::from_pb(v).map(|v| (k, v)))
                .collect()
        }
        pub(crate) fn zero<P>() -> BTreeMap<String, P> {
            BTreeMap::new()
        }
    }
    pub(super) mod optmap {
        use super::*;
        pub(crate) fn to<O: Conv<P>, P>(o: &Option<BTreeMap<String, O>>) -> BTreeMap<String, P> {
            o.as_ref().map(super::map::to).unwrap_or_default()
        }
        pub(crate) fn from<O: Conv<P>, P>(
            p: BTreeMap<String, P>,
        ) -> Result<Option<BTreeMap<String, O>>, CodecError> {
            if p.is_empty() {
                return Ok(None);
            }
            super::map::from(p).map(Some)
        }
        pub(crate) use super::map::zero;
    }
}

/// `Conv` for a message: `bridge!(openapi path => pb path [(pb field,
/// openapi field, nesting), ...] [(embedded pb field, its message path,
/// [(pb field, openapi field, nesting), ...]), ...] Default?);`. Fields only
/// one side knows (a newer Kubernetes version's) keep their default; a
/// trailing `Default` marks a JSON type with such fields.
macro_rules! bridge {
    ($($oa:ident)::+ => $($pb:ident)::+
        [$(($pf:ident, $of:ident, $m:ident)),*]
        [$(($ef:ident, $($ep:ident)::+, [$(($epf:ident, $eof:ident, $em:ident)),*])),*]
        $($rest:ident)?) => {
        /// Go's zero of a struct: each of its non-pointer fields' zeros.
        #[allow(clippy::needless_update)]
        impl GoZero for k8s_pb::$($pb)::+ {
            fn go_zero() -> Self {
                k8s_pb::$($pb)::+ {
                    $($pf: nest::$m::zero(),)*
                    $($ef: Some(k8s_pb::$($ep)::+ {
                        $($epf: nest::$em::zero(),)*
                        ..Default::default()
                    }),)*
                    ..Default::default()
                }
            }
            fn is_go_zero(&self) -> bool {
                *self == Self::go_zero()
            }
        }

        #[allow(clippy::needless_update)]
        impl Conv<k8s_pb::$($pb)::+> for k8s_openapi::$($oa)::+ {
            fn to_pb(&self) -> k8s_pb::$($pb)::+ {
                k8s_pb::$($pb)::+ {
                    $($pf: nest::$m::to(&self.$of),)*
                    $($ef: Some(k8s_pb::$($ep)::+ {
                        $($epf: nest::$em::to(&self.$eof),)*
                        ..Default::default()
                    }),)*
                    ..Default::default()
                }
            }
            fn from_pb(p: k8s_pb::$($pb)::+) -> Result<Self, CodecError> {
                $(let $ef = p.$ef.unwrap_or_default();)*
                Ok(Self {
                    $($of: nest::$m::from(p.$pf)?,)*
                    $($($eof: nest::$em::from($ef.$epf)?,)*)*
                    $(..$rest::default())?
                })
            }
        }
    };
}

/// `json_only!([(k8s-openapi path of a kind, [fields only JSON has that its
/// messages reach]), ...])`: the kinds read in JSON under this version.
macro_rules! json_only {
    ($list:expr) => {
        pub(crate) const JSON_ONLY: &[(&str, &[&str])] = &$list;
    };
}

/// The fields only JSON has that a kind's messages reach under this
/// version (its k8s-openapi path, `api::core::v1::Pod`): empty when the
/// kind is read in protobuf.
pub(crate) fn json_only_fields(path: &str) -> &'static [&'static str] {
    let path: String = path.split_whitespace().collect();
    JSON_ONLY
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(&[], |(_, fields)| fields)
}

// The lines every Kubernetes version k8s-openapi can be built for shares,
// then one table per version for what differs (the JSON types gain fields
// from version to version).
include!("bridge_tables/common.rs");
k8s_openapi::k8s_if_1_33! { include!("bridge_tables/v1_33.rs"); }
k8s_openapi::k8s_if_1_34! { include!("bridge_tables/v1_34.rs"); }
k8s_openapi::k8s_if_1_35! { include!("bridge_tables/v1_35.rs"); }
k8s_openapi::k8s_if_1_36! { include!("bridge_tables/v1_36.rs"); }
k8s_openapi::k8s_if_1_37! { include!("bridge_tables/v1_37.rs"); }

// A CRD's `openAPIV3Schema`, by hand: `$ref` is `ref` in protobuf but
// `ref_path` in k8s-openapi, `default`/`example`/`enum` values are raw JSON
// bytes in protobuf, and each "or" type is one JSON value of either shape in
// JSON but a message holding both in protobuf (read back the way the API
// server's Go types print it).
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as oax;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pbx;

bridge!(apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps => apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps [(id, id, zopt), (schema, schema, zopt), (r#ref, ref_path, opt), (description, description, zopt), (r#type, type_, zopt), (format, format, zopt), (title, title, zopt), (default, default, opt), (maximum, maximum, opt), (exclusive_maximum, exclusive_maximum, zopt), (minimum, minimum, opt), (exclusive_minimum, exclusive_minimum, zopt), (max_length, max_length, opt), (min_length, min_length, opt), (pattern, pattern, zopt), (max_items, max_items, opt), (min_items, min_items, opt), (unique_items, unique_items, zopt), (multiple_of, multiple_of, opt), (r#enum, enum_, optvec), (max_properties, max_properties, opt), (min_properties, min_properties, opt), (required, required, optvec), (items, items, opt), (all_of, all_of, optvec), (one_of, one_of, optvec), (any_of, any_of, optvec), (not, not, opt), (properties, properties, optmap), (additional_properties, additional_properties, opt), (pattern_properties, pattern_properties, optmap), (dependencies, dependencies, optmap), (additional_items, additional_items, opt), (definitions, definitions, optmap), (external_docs, external_docs, opt), (example, example, opt), (nullable, nullable, zopt), (x_kubernetes_preserve_unknown_fields, x_kubernetes_preserve_unknown_fields, opt), (x_kubernetes_embedded_resource, x_kubernetes_embedded_resource, zopt), (x_kubernetes_int_or_string, x_kubernetes_int_or_string, zopt), (x_kubernetes_list_map_keys, x_kubernetes_list_map_keys, optvec), (x_kubernetes_list_type, x_kubernetes_list_type, opt), (x_kubernetes_map_type, x_kubernetes_map_type, opt), (x_kubernetes_validations, x_kubernetes_validations, optvec)] []);

impl Conv<pbx::Json> for oax::JSON {
    fn to_pb(&self) -> pbx::Json {
        pbx::Json {
            raw: Some(self.0.to_string().into_bytes()),
        }
    }
    fn from_pb(p: pbx::Json) -> Result<Self, CodecError> {
        match p.raw {
            None => Ok(Self(serde_json::Value::Null)),
            Some(raw) => serde_json::from_slice(&raw)
                .map(Self)
                .map_err(|e| CodecError::Field {
                    what: "JSON",
                    message: e.to_string(),
                }),
        }
    }
}

/// `items`: one schema, or a list of them (the list wins when both are set).
impl Conv<Box<pbx::JsonSchemaPropsOrArray>> for oax::JSONSchemaPropsOrArray {
    fn to_pb(&self) -> Box<pbx::JsonSchemaPropsOrArray> {
        Box::new(match self {
            Self::Schema(s) => pbx::JsonSchemaPropsOrArray {
                schema: Some(s.to_pb()),
                j_son_schemas: Vec::new(),
            },
            Self::Schemas(v) => pbx::JsonSchemaPropsOrArray {
                schema: None,
                j_son_schemas: v.iter().map(Conv::to_pb).collect(),
            },
        })
    }
    fn from_pb(p: Box<pbx::JsonSchemaPropsOrArray>) -> Result<Self, CodecError> {
        let p = *p;
        match p.schema {
            Some(s) if p.j_son_schemas.is_empty() => Box::from_pb(s).map(Self::Schema),
            _ => nest::vec::from(p.j_son_schemas).map(Self::Schemas),
        }
    }
}

/// `additionalProperties`/`additionalItems`: `true`, `false` or a schema
/// (a schema allows, as the API server writes it).
impl Conv<Box<pbx::JsonSchemaPropsOrBool>> for oax::JSONSchemaPropsOrBool {
    fn to_pb(&self) -> Box<pbx::JsonSchemaPropsOrBool> {
        Box::new(match self {
            Self::Bool(b) => pbx::JsonSchemaPropsOrBool {
                allows: Some(*b),
                schema: None,
            },
            Self::Schema(s) => pbx::JsonSchemaPropsOrBool {
                allows: Some(true),
                schema: Some(s.to_pb()),
            },
        })
    }
    fn from_pb(p: Box<pbx::JsonSchemaPropsOrBool>) -> Result<Self, CodecError> {
        let p = *p;
        match p.schema {
            Some(s) => Box::from_pb(s).map(Self::Schema),
            None => Ok(Self::Bool(p.allows.unwrap_or(false))),
        }
    }
}

/// `dependencies` values: a schema or a list of property names (the list
/// wins when both are set).
impl Conv<pbx::JsonSchemaPropsOrStringArray> for oax::JSONSchemaPropsOrStringArray {
    fn to_pb(&self) -> pbx::JsonSchemaPropsOrStringArray {
        match self {
            Self::Schema(s) => pbx::JsonSchemaPropsOrStringArray {
                schema: Some((**s).to_pb()),
                property: Vec::new(),
            },
            Self::Strings(v) => pbx::JsonSchemaPropsOrStringArray {
                schema: None,
                property: v.clone(),
            },
        }
    }
    fn from_pb(p: pbx::JsonSchemaPropsOrStringArray) -> Result<Self, CodecError> {
        match p.schema {
            Some(s) if p.property.is_empty() => {
                oax::JSONSchemaProps::from_pb(s).map(|s| Self::Schema(Box::new(s)))
            }
            _ => Ok(Self::Strings(p.property)),
        }
    }
}

/// `subresources.status`: an empty object in JSON, an empty message in
/// protobuf.
impl Conv<pbx::CustomResourceSubresourceStatus> for oax::CustomResourceSubresourceStatus {
    fn to_pb(&self) -> pbx::CustomResourceSubresourceStatus {
        pbx::CustomResourceSubresourceStatus {}
    }
    fn from_pb(_: pbx::CustomResourceSubresourceStatus) -> Result<Self, CodecError> {
        Ok(Self(serde_json::Value::Object(serde_json::Map::new())))
    }
}

// Discovery documents (`/api`, `/apis`, `/apis/{group}`, `/api/v1`,
// `/apis/{group}/{version}`), which client-go and kubectl ask for in
// protobuf. No served kind reaches them, so gen_bridge.py does not write
// them; their lines are here by hand.
impl Conv<pb::apis::meta::v1::Verbs> for Vec<String> {
    fn to_pb(&self) -> pb::apis::meta::v1::Verbs {
        pb::apis::meta::v1::Verbs {
            items: self.clone(),
        }
    }
    fn from_pb(p: pb::apis::meta::v1::Verbs) -> Result<Self, CodecError> {
        Ok(p.items)
    }
}
// `UserInfo.extra` values: a bare list in JSON, a message in protobuf.
impl Conv<k8s_pb::api::authentication::v1::ExtraValue> for Vec<String> {
    fn to_pb(&self) -> k8s_pb::api::authentication::v1::ExtraValue {
        k8s_pb::api::authentication::v1::ExtraValue {
            items: self.clone(),
        }
    }
    fn from_pb(p: k8s_pb::api::authentication::v1::ExtraValue) -> Result<Self, CodecError> {
        Ok(p.items)
    }
}
bridge!(apimachinery::pkg::apis::meta::v1::APIVersions => apimachinery::pkg::apis::meta::v1::APIVersions [(versions, versions, vec), (server_address_by_client_cid_rs, server_address_by_client_cidrs, vec)] []);
bridge!(apimachinery::pkg::apis::meta::v1::ServerAddressByClientCIDR => apimachinery::pkg::apis::meta::v1::ServerAddressByClientCIDR [(client_cidr, client_cidr, req), (server_address, server_address, req)] []);
bridge!(apimachinery::pkg::apis::meta::v1::APIGroupList => apimachinery::pkg::apis::meta::v1::APIGroupList [(groups, groups, vec)] []);
bridge!(apimachinery::pkg::apis::meta::v1::APIGroup => apimachinery::pkg::apis::meta::v1::APIGroup [(name, name, req), (versions, versions, vec), (preferred_version, preferred_version, kopt), (server_address_by_client_cid_rs, server_address_by_client_cidrs, optvec)] []);
bridge!(apimachinery::pkg::apis::meta::v1::GroupVersionForDiscovery => apimachinery::pkg::apis::meta::v1::GroupVersionForDiscovery [(group_version, group_version, req), (version, version, req)] []);
bridge!(apimachinery::pkg::apis::meta::v1::APIResourceList => apimachinery::pkg::apis::meta::v1::APIResourceList [(group_version, group_version, req), (resources, resources, vec)] []);
bridge!(apimachinery::pkg::apis::meta::v1::APIResource => apimachinery::pkg::apis::meta::v1::APIResource [(name, name, req), (singular_name, singular_name, req), (namespaced, namespaced, req), (group, group, zopt), (version, version, zopt), (kind, kind, req), (verbs, verbs, req), (short_names, short_names, optvec), (categories, categories, optvec), (storage_version_hash, storage_version_hash, zopt)] []);
