//! `samplecontroller.k8s.io/v1`: the hub version of Foo, stored by the API
//! server and read by the reconciler. Every other version converts to and
//! from it (see [`super::v1alpha1`]).

// The kind is `Foo`, as in the Go sample-controller this ports: a `foo` here
// is a Foo object, not a placeholder name.
#![allow(clippy::disallowed_names)]

use controller_runtime::CustomResource;
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use controller_runtime::webhook::Hub;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a Foo asks for.
///
/// `deploymentName` has no pattern in the schema: the validating webhook
/// checks it (see [`super::webhooks::FooValidator`]), so a bad name is
/// refused with the validator's message and a field cause.
// Two printcolumns of type "integer" trip clippy's duplicated_attributes,
// a known false positive on derive attributes (see docs/macros.md).
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[resource(
    group = "samplecontroller.k8s.io",
    version = "v1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    shortname = "foo",
    printcolumn(
        name = "Deployment",
        json_path = ".spec.deploymentName",
        type = "string"
    ),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(
        name = "Available",
        json_path = ".status.availableReplicas",
        type = "integer"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// The Deployment this Foo owns (a DNS-1123 label).
    pub deployment_name: String,
    /// Desired replicas (the defaulting webhook sets 1 when absent).
    #[resource(minimum = 0, maximum = 100)]
    pub replicas: Option<i32>,
}

/// What a Foo has (the same in every version).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// Available replicas of the Deployment.
    pub available_replicas: i32,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the Deployment exists, is controlled by this Foo and has
    /// every replica available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

impl Hub for Foo {}
