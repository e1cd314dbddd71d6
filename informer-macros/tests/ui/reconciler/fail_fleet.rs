use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, fleet(clusters = 3))]
struct WithArguments;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, fleet, sharding(mode = "label"))]
struct ShardedByLabel;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, fleet, fleet)]
struct Twice;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, flet)]
struct Misspelt;

fn main() {}
