use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, sharding(mode = "lable"))]
struct BadMode;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, sharding(mdoe = "label"))]
struct BadKey;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, sharding(mode = "label"), leader_election)]
struct WithLeaderElection;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, shardnig(mode = "label"))]
struct Misspelt;

fn main() {}
