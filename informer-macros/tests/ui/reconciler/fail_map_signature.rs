use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use controller_runtime::prelude::*;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, watches(Secret, map = Self::by_value))]
struct WrongMap;

impl WrongMap {
    fn by_value(_secret: Secret) -> Vec<Request> {
        Vec::new()
    }
}

impl ObjectReconciler<ConfigMap> for WrongMap {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

fn main() {}
