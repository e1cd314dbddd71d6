//! create_or_update, create_or_patch and status conditions on a real server:
//! a write happens only when something changed (the resourceVersion says
//! so), and conditions round-trip through `/status` unchanged.

use controller_runtime::CustomResource;
use controller_runtime::client::{OperationResult, create_or_patch, create_or_update};
use controller_runtime::conditions::{ConditionExt, Conditions, condition, observed_generation};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube_client::Api;
use kube_client::api::PostParams;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config_map;

/// A kind with a status subresource holding conditions.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[resource(
    group = "helpers.example.com",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct GadgetSpec {
    /// Anything.
    pub size: i32,
}

/// What a Gadget has.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GadgetStatus {
    /// The generation the status describes.
    pub observed_generation: Option<i64>,
    /// Its conditions.
    pub conditions: Option<Vec<Condition>>,
}

fn rv<K: kube_core::Resource>(obj: &K) -> String {
    obj.meta().resource_version.clone().unwrap_or_default()
}

#[tokio::test]
async fn create_or_update_writes_only_when_something_changed() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let set = |value: &'static str| {
        move |cm: &mut ConfigMap| {
            cm.data
                .get_or_insert_default()
                .insert("mode".into(), value.into());
            Ok(())
        }
    };

    let (created, result) = create_or_update(&api, config_map("default", "cfg"), set("fast"))
        .await
        .unwrap();
    assert_eq!(result, OperationResult::Created);

    let (same, result) = create_or_update(&api, config_map("default", "cfg"), set("fast"))
        .await
        .unwrap();
    assert_eq!(result, OperationResult::Unchanged);
    assert_eq!(rv(&same), rv(&created));
    let stored = api.get("cfg").await.unwrap();
    assert_eq!(rv(&stored), rv(&created), "no write happened");

    let (updated, result) = create_or_update(&api, config_map("default", "cfg"), set("slow"))
        .await
        .unwrap();
    assert_eq!(result, OperationResult::Updated);
    assert_ne!(rv(&updated), rv(&created));
    let stored = api.get("cfg").await.unwrap();
    assert_eq!(stored.data.unwrap()["mode"], "slow");
}

fn gadget(name: &str) -> Gadget {
    Gadget::new(name, GadgetSpec { size: 1 })
}

/// Sets the gadget's Ready condition and observed generation.
fn mark_ready(g: &mut Gadget, ready: bool, message: &str) {
    let generation = observed_generation(g);
    let status = g.status.get_or_insert_default();
    status.observed_generation = generation;
    status.conditions.set_condition(
        condition("Ready", ready, "Checked", message).observed_generation(generation),
    );
}

#[tokio::test]
async fn create_or_patch_writes_status_conditions_once_and_keeps_their_time() {
    let env = TestEnv::start().await.unwrap();
    Api::<CustomResourceDefinition>::all(env.client())
        .create(&PostParams::default(), &Gadget::crd().unwrap())
        .await
        .unwrap();
    let api: Api<Gadget> = Api::namespaced(env.client(), "default");

    let (created, result) = create_or_patch(&api, gadget("g"), |g| {
        g.spec.size = 2;
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Created);

    let (patched, result) = create_or_patch(&api, gadget("g"), |g| {
        mark_ready(g, false, "starting");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::UpdatedStatusOnly);
    let first = patched.status.clone().unwrap().conditions.unwrap()[0].clone();
    assert_eq!(first.observed_generation, created.metadata.generation);

    // The same condition again: nothing to write, the time read back equal.
    let (same, result) = create_or_patch(&api, gadget("g"), |g| {
        mark_ready(g, false, "starting");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Unchanged);
    assert_eq!(rv(&same), rv(&patched));

    // Spec and status together: two patches, the status one to /status.
    let (both, result) = create_or_patch(&api, gadget("g"), |g| {
        g.spec.size = 3;
        mark_ready(g, true, "up");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::UpdatedStatus);
    let stored = api.get("g").await.unwrap();
    assert_eq!(stored.spec.size, 3);
    let conditions = stored.status.unwrap().conditions.unwrap();
    assert!(conditions.is_condition_true("Ready"));
    assert_eq!(rv(&both), rv(&api.get("g").await.unwrap()));
}
