use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "example.com", version = "v1")]
pub struct GadgetSpec {
    size: u32,
}

fn main() {}
