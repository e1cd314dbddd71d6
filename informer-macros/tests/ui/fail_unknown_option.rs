use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(grup = "example.com", version = "v1", kind = "Gadget", namespaced)]
pub struct GadgetSpec {
    size: u32,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Widget")]
pub struct WidgetSpec {
    #[resource(min_lenght = 1)]
    name: String,
}

fn main() {}
