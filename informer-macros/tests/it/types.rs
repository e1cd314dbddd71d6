//! Derived kinds shared by the tests.

use controller_runtime::CustomResource;
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
