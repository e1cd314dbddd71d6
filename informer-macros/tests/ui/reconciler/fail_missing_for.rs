use controller_runtime::k8s_openapi::api::apps::v1::Deployment;

#[derive(controller_runtime::Reconciler)]
#[reconciler(owns(Deployment))]
struct NoFor;

#[derive(controller_runtime::Reconciler)]
struct NoAttribute;

fn main() {}
