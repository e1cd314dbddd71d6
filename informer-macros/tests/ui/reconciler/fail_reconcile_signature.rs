use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::prelude::*;

/// No typed reconcile at all.
#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap)]
struct Missing;

/// A reconcile taking the object by value instead of `Arc<ConfigMap>`.
#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap)]
struct ByValue;

impl ObjectReconciler<ConfigMap> for ByValue {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(&self, _cm: ConfigMap, _ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

fn main() {}
