use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::prelude::*;

struct NotAKind;

#[derive(controller_runtime::Controller)]
#[controller(for = ConfigMap, owns(NotAKind))]
struct OwnsNotAKind;

impl ObjectReconciler<ConfigMap> for OwnsNotAKind {
    type Error = controller_runtime::kube_client::Error;
    async fn reconcile(&self, _cm: Arc<ConfigMap>, _ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

fn main() {}
