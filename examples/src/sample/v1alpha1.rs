//! `samplecontroller.k8s.io/v1alpha1`: the first shape of Foo, still
//! served (deprecated) and converted to and from [`super::v1`] by the
//! manager's conversion webhook. The one difference: the Deployment's name
//! was `spec.deployment`; v1 calls it `spec.deploymentName`.
//!
//! ```
//! use controller_runtime::webhook::Convertible;
//! use informer_examples::sample::{v1, v1alpha1};
//! let old = v1alpha1::Foo::new("web", v1alpha1::FooSpec { deployment: "web-1".into(), replicas: None });
//! let hub: v1::Foo = old.clone().to_hub()?;
//! assert_eq!(hub.spec.deployment_name, "web-1");
//! assert_eq!(v1alpha1::Foo::from_hub(hub)?.spec, old.spec);
//! # Ok::<(), controller_runtime::webhook::ConversionError>(())
//! ```

#![allow(clippy::disallowed_names)]

use controller_runtime::CustomResource;
use controller_runtime::webhook::{ConversionError, Convertible};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::v1;
pub use super::v1::FooStatus;

/// What a Foo asks for, as v1alpha1 spells it.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[resource(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    shortname = "foo",
    storage = false,
    deprecated = "samplecontroller.k8s.io/v1alpha1 Foo is deprecated; use samplecontroller.k8s.io/v1 Foo",
    printcolumn(name = "Deployment", json_path = ".spec.deployment", type = "string"),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(
        name = "Available",
        json_path = ".status.availableReplicas",
        type = "integer"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// The Deployment this Foo owns (v1's `deploymentName`).
    pub deployment: String,
    /// Desired replicas (the defaulting webhook sets 1 when absent).
    #[resource(minimum = 0, maximum = 100)]
    pub replicas: Option<i32>,
}

impl Convertible<v1::Foo> for Foo {
    fn to_hub(self) -> Result<v1::Foo, ConversionError> {
        Ok(v1::Foo {
            metadata: self.metadata,
            spec: v1::FooSpec {
                deployment_name: self.spec.deployment,
                replicas: self.spec.replicas,
            },
            status: self.status,
        })
    }

    fn from_hub(hub: v1::Foo) -> Result<Self, ConversionError> {
        Ok(Foo {
            metadata: hub.metadata,
            spec: FooSpec {
                deployment: hub.spec.deployment_name,
                replicas: hub.spec.replicas,
            },
            status: hub.status,
        })
    }
}
