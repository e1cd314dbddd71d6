//! Every container and field option of `CustomResource` at once.

use controller_runtime::CustomResource;
use controller_runtime::crd::merge_versions;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every container option at once.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[resource(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    plural = "foos",
    singular = "foo",
    namespaced,
    status = "FooStatus",
    shortname = "fo",
    shortname = "fos",
    category = "all",
    printcolumn(
        name = "Replicas",
        json_path = ".spec.replicas",
        type = "integer",
        format = "int32",
        description = "desired",
        priority = 0
    ),
    scale(
        spec = ".spec.replicas",
        status = ".status.availableReplicas",
        selector = ".status.selector"
    ),
    selectable = ".spec.deploymentName",
    annotation(key = "a", value = "b"),
    label(key = "c", value = "d"),
    validation(rule = "self.replicas >= 0", message = "no negative replicas"),
    deprecated,
    served = true,
    storage = true,
    derive = "Default",
    crate = "::controller_runtime"
)]
#[index(name = "by-deployment", path = ".spec.deploymentName")]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    #[resource(
        min_length = 1,
        max_length = 253,
        pattern = "^[a-z]",
        format = "hostname"
    )]
    deployment_name: String,
    #[resource(minimum = -1, maximum = 100, exclusive_maximum, multiple_of = 1, default = "1", nullable)]
    replicas: Option<i32>,
    #[resource(min_items = 0, max_items = 3, list_type = "set")]
    tags: Vec<String>,
    #[resource(min_properties = 0, max_properties = 3, map_type = "atomic")]
    labels: std::collections::BTreeMap<String, String>,
    #[resource(preserve_unknown_fields)]
    raw: serde_json::Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    available_replicas: i32,
    selector: String,
}

mod v1 {
    use super::*;

    /// The same kind, a later version.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[resource(
        group = "samplecontroller.k8s.io",
        version = "v1",
        kind = "Foo",
        namespaced,
        storage = false
    )]
    pub struct FooSpec {
        deployment_name: String,
    }
}

#[test]
fn compiles_and_holds() {
    let crd = Foo::crd().unwrap();
    assert_eq!(crd.spec.names.short_names.as_ref().map(Vec::len), Some(2));
    let merged = merge_versions(vec![Foo::crd().unwrap(), v1::Foo::crd().unwrap()]).unwrap();
    assert_eq!(merged.spec.versions.len(), 2);
    let lister = FooLister::new(controller_runtime::informer_core::lister::Lister::new(
        controller_runtime::informer_core::store::Indexer::new(),
    ));
    let _ = lister.foos("default");
    let _ = lister.by_deployment("web");
    assert_eq!(Foo::indexers().len(), 1);
    let _ = Foo::default();
}
