use controller_runtime::k8s_openapi::api::apps::v1::Deployment;

#[derive(controller_runtime::Controller)]
#[controller(owns(Deployment))]
struct NoFor;

#[derive(controller_runtime::Controller)]
struct NoAttribute;

fn main() {}
