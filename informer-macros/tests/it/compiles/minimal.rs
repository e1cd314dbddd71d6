//! A cluster-scoped kind with no status: the least a `CustomResource` needs.

use controller_runtime::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A cluster-scoped kind with no status.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[resource(group = "example.com", version = "v1", kind = "Gadget")]
pub struct GadgetSpec {
    size: u32,
}

#[test]
fn compiles_and_holds() {
    let g = Gadget::new("g", GadgetSpec { size: 1 });
    assert!(g.status.is_none());
    let crd = Gadget::crd().unwrap();
    assert_eq!(crd.spec.scope, "Cluster");
    assert!(crd.spec.versions[0].subresources.is_none());
}
