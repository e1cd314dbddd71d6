//! `#[api_types]` over a module whose paths reach nested, boxed, newtype and outside types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A type from outside the module: `#[api_types]` cannot see its fields, so
/// paths into it are left to the check `crd()` makes.
#[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
pub struct Shared {
    pub note: String,
}

#[controller_runtime::api_types]
mod v1alpha1 {
    use super::Shared;
    use controller_runtime::CustomResource;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[resource(
        group = "example.com",
        version = "v1alpha1",
        kind = "Foo",
        namespaced,
        status = "FooStatus",
        printcolumn(name = "Image", json_path = ".spec.template.image", type = "string"),
        printcolumn(
            name = "Policy",
            json_path = ".spec.template.pullPolicy",
            type = "string"
        ),
        printcolumn(
            name = "Registry",
            json_path = ".spec.template.registryRef.host",
            type = "string"
        ),
        printcolumn(name = "Wrapped", json_path = ".spec.wrapped.image", type = "string"),
        printcolumn(name = "Surge", json_path = ".spec.maxSurge", type = "string"),
        printcolumn(name = "App", json_path = ".spec.labels.app", type = "string"),
        printcolumn(name = "Note", json_path = ".spec.shared.note", type = "string"),
        printcolumn(name = "Ready", json_path = ".status.readyReplicas", type = "integer"),
        printcolumn(name = "Phase", json_path = ".status.rollout.phase", type = "string"),
        scale(
            spec = ".spec.replicas",
            status = ".status.readyReplicas",
            selector = ".status.rollout.selector"
        ),
        selectable = ".spec.template.image"
    )]
    #[index(name = "by-port-name", path = ".spec.ports.name")]
    #[serde(rename_all = "camelCase")]
    pub struct FooSpec {
        pub replicas: i32,
        pub template: Option<Box<Template>>,
        pub wrapped: Wrapper,
        pub max_surge: Option<IntOrString>,
        pub labels: BTreeMap<String, String>,
        pub shared: Shared,
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

    /// A newtype serializes as what it wraps.
    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    pub struct Wrapper(pub Template);

    #[derive(Serialize, Deserialize, Clone, Debug, JsonSchema)]
    pub struct Port {
        pub name: String,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct FooStatus {
        pub ready_replicas: i32,
        pub rollout: Option<Rollout>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
    pub struct Rollout {
        pub phase: String,
        pub selector: String,
    }
}

#[test]
fn compiles_and_holds() {
    // The run-time check against the finished schema agrees.
    let crd = v1alpha1::Foo::crd().unwrap();
    assert_eq!(
        crd.spec.versions[0]
            .additional_printer_columns
            .as_ref()
            .map(Vec::len),
        Some(9)
    );
    assert_eq!(v1alpha1::Foo::indexers().len(), 1);
}
