use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(
    group = "example.com",
    version = "v1",
    kind = "Gadget",
    printcolumn(name = "Size", json_path = ".spec.size_in_bytes", type = "integr"),
    printcolumn(name = "Ready", json_path = ".status.ready", type = "boolean")
)]
#[serde(rename_all = "camelCase")]
pub struct GadgetSpec {
    size_in_bytes: u32,
}

fn main() {}
