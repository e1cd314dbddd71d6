use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "example.com", group = "example.org", version = "v1", kind = "Gadget")]
pub struct GadgetSpec {
    size: u32,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    scale(spec = ".spec.replicas", status = ".status.replicas")
)]
#[index(name = "by-namespace", path = ".metadata.namespace")]
pub struct WidgetSpec {
    replicas: i32,
}

fn main() {}
