use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Secret};

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, onws(Deployment))]
struct Misspelt;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, owns(Deployment), owns(Deployment))]
struct DuplicateOwns;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, predicate = generaton_changed)]
struct UnknownPredicate;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, watches(Secret))]
struct WatchWithoutMap;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, max_concurrent = 0, name = "x")]
struct NoWorkers;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, name = "a", name = "b")]
struct TwoNames;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, finalizer = "cleanup")]
struct UnqualifiedFinalizer;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap)]
#[rbac(group = "", resources(pods), verbs(gte))]
struct BadVerb;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap)]
#[rbac(group = "", resource(pods), verbs(get))]
struct BadRbacOption;

fn main() {}
