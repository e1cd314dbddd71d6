use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "Example", version = "1.0", kind = "gadget")]
pub struct GadgetSpec {
    size: u32,
}

fn main() {}
