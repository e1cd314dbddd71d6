#[controller_runtime::api_types]
mod v1 {
    use controller_runtime::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[resource(
        group = "example.com",
        version = "v1",
        kind = "Bar",
        status = "BarStatus",
        // a nested spec typo, through Option<Box<_>>
        printcolumn(name = "Image", json_path = ".spec.template.imag", type = "string"),
        // the Rust name of a field serde renames
        printcolumn(name = "Policy", json_path = ".spec.template.pull_policy", type = "string"),
        printcolumn(name = "Registry", json_path = ".spec.template.registry.host", type = "string"),
        // a string has no fields
        printcolumn(name = "Tag", json_path = ".spec.template.image.tag", type = "string"),
        // a status typo
        printcolumn(name = "Ready", json_path = ".status.readyReplica", type = "integer"),
        // a dotted path cannot go into a list's items
        printcolumn(name = "Reason", json_path = ".status.conditions.reason", type = "string"),
        // a first-level typo: reported once, by the derive
        printcolumn(name = "Other", json_path = ".spec.templte.image", type = "string"),
        selectable = ".spec.template.imge"
    )]
    #[index(name = "by-port", path = ".spec.ports.nmae")]
    pub struct BarSpec {
        pub template: Option<Box<Template>>,
        pub ports: Vec<Port>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct Template {
        pub image: String,
        pub pull_policy: Option<String>,
        #[serde(rename = "registryRef")]
        pub registry: Option<Registry>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    pub struct Registry {
        pub host: String,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    pub struct Port {
        pub name: String,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct BarStatus {
        pub ready_replicas: i32,
        pub conditions: Vec<Condition>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
    pub struct Condition {
        pub reason: String,
    }
}

fn main() {}
