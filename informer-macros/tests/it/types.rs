//! Derived kinds shared by the tests.

use controller_runtime::CustomResource;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The sample-controller's Foo: a Deployment name and a replica count.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[resource(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    shortname = "fo",
    category = "all",
    printcolumn(
        name = "Deployment",
        json_path = ".spec.deploymentName",
        type = "string"
    ),
    printcolumn(
        name = "Replicas",
        json_path = ".spec.replicas",
        type = "integer",
        priority = 1
    ),
    scale(spec = ".spec.replicas", status = ".status.availableReplicas"),
    selectable = ".spec.deploymentName"
)]
#[index(name = "by-deployment", path = ".spec.deploymentName")]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// The Deployment this Foo owns.
    #[resource(min_length = 1, max_length = 63, pattern = "^[a-z0-9-]+$")]
    pub deployment_name: String,
    /// Desired replicas.
    #[resource(minimum = 0, maximum = 10)]
    pub replicas: Option<i32>,
}

/// Foo's observed state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// Replicas available.
    pub available_replicas: i32,
}

/// A cluster-scoped kind with no status and a function index.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Gadget")]
#[index(name = "by-size", function = gadget_sizes)]
pub struct GadgetSpec {
    /// Size class.
    pub size: u32,
}

fn gadget_sizes(g: &Gadget) -> Vec<String> {
    vec![g.spec.size.to_string()]
}

/// An ingress-like route: unit and internally tagged enums, a map, an
/// int-or-string, free-form data and every kind of field rule.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[resource(
    group = "example.com",
    version = "v1",
    kind = "Route",
    namespaced,
    status = "RouteStatus",
    printcolumn(
        name = "Host",
        json_path = ".spec.host",
        type = "string",
        description = "served host"
    ),
    printcolumn(name = "Age", json_path = ".metadata.creationTimestamp", type = "date"),
    validation(
        rule = "self.host != 'forbidden'",
        message = "host is forbidden",
        reason = "FieldValueForbidden",
        field_path = ".host"
    ),
    annotation(key = "example.com/owner", value = "tests"),
    label(key = "tier", value = "edge"),
    deprecated = "example.com/v1 Route is deprecated; use v2"
)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// Host name served.
    #[resource(pattern = "^[a-z0-9.-]+$", format = "hostname")]
    pub host: String,
    /// Whether to redirect to TLS.
    #[serde(default)]
    pub policy: Policy,
    /// Where traffic goes.
    pub backend: Backend,
    /// Extra headers.
    #[serde(default)]
    #[resource(max_properties = 16, map_type = "granular")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Weight, multiple of 5, in (0, 100].
    #[resource(
        minimum = 0,
        exclusive_minimum,
        maximum = 100,
        multiple_of = 5,
        default = "50"
    )]
    pub weight: Option<u32>,
    /// Backends tried in order, unique by name.
    #[serde(default)]
    #[resource(
        list_type = "map",
        list_map_key = "name",
        max_items = 8,
        validation(
            rule = "!oldSelf.hasValue() || size(self) >= size(oldSelf.value())",
            message_expression = "'fallbacks cannot shrink'",
            optional_old_self = true
        )
    )]
    pub fallbacks: Vec<Fallback>,
    /// Anything; kept as is.
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// Redirect policy (a unit-variant enum).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub enum Policy {
    /// Always redirect.
    #[default]
    Always,
    /// Never redirect.
    Never,
}

/// Where traffic goes (an internally tagged enum).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(tag = "type")]
pub enum Backend {
    /// A Service and port (number or name).
    Service {
        /// Service name.
        name: String,
        /// Port number or name.
        port: Port,
    },
    /// A static answer.
    Static {
        /// HTTP status code.
        code: u16,
    },
}

/// A port number or name (an untagged enum: integer or string).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(untagged)]
pub enum Port {
    /// By number.
    Number(i32),
    /// By name.
    Name(String),
}

/// A named fallback.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Fallback {
    /// Unique name.
    pub name: String,
    /// Target URL.
    pub url: String,
}

/// Route's observed state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    /// Whether the route is admitted.
    pub admitted: bool,
    /// Conditions, newest last.
    #[serde(default)]
    pub messages: Vec<String>,
}

/// A worker pool: k8s-openapi types in a spec (`IntOrString`, `Quantity`,
/// alone, optional and in a map) and validation rules on the fields of
/// nested types, given with schemars' own attributes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Pool", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    /// Workers that may be down at once: a count or a percentage.
    pub max_unavailable: IntOrString,
    /// Extra workers during a rollout, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Memory per worker.
    pub memory: Quantity,
    /// Further limits by resource name.
    #[serde(default)]
    pub limits: std::collections::BTreeMap<String, Quantity>,
    /// What each worker runs (rules on its fields).
    pub worker: Worker,
    /// Autoscaling bounds, if any (a CEL rule on the nested type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<Autoscale>,
}

/// A worker template: schemars' `length`, `pattern` and `extend` on the
/// fields of a type nested in the spec.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Worker {
    /// Container image name.
    #[schemars(length(min = 1, max = 63), pattern(r"^[a-z0-9./:-]+$"))]
    pub image: String,
    /// Ports, unique by name.
    #[serde(default)]
    #[schemars(
        length(max = 4),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub ports: Vec<WorkerPort>,
    /// Working directory.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.startsWith('/')", "message": "workDir must be absolute"}
    ]))]
    pub work_dir: String,
}

/// A named port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct WorkerPort {
    /// Unique name.
    pub name: String,
    /// Port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// Autoscaling bounds: a CEL rule on the type, ranges on its fields.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas", "reason": "FieldValueInvalid"}
]))]
pub struct Autoscale {
    /// Lower bound.
    #[schemars(range(min = 1, max = 100))]
    pub min_replicas: u32,
    /// Upper bound.
    #[schemars(range(min = 1, max = 100))]
    pub max_replicas: u32,
}
