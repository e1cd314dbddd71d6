use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Gadget", status = "GadgetStatus")]
pub struct GadgetSpec {
    size: u32,
}

/// Serde, but no JsonSchema.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct GadgetStatus {
    ready: bool,
}

fn main() {}
