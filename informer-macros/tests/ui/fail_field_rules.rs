use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Gadget", namespaced)]
pub struct GadgetSpec {
    #[resource(minimum = 10, maximum = 1)]
    size: u32,
    #[resource(list_type = "map")]
    items: Vec<String>,
    #[resource(default = "not json", validation(rule = "self > 0", reason = "FieldValueInvalidd"))]
    count: u32,
}

fn main() {}
