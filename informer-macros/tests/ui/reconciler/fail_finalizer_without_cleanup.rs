use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::prelude::*;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, finalizer = "example.com/cleanup")]
struct NoCleanup;

impl ObjectReconciler<ConfigMap> for NoCleanup {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

fn main() {}
