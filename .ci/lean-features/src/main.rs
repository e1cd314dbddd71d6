//! A derived custom resource and controller (finalizer, owned kind,
//! leader election) with controller-runtime's optional parts off (no
//! `sharding`, `manifests` or `webhook`), serving its metrics over HTTPS
//! (the TLS stack and certificates are built without `webhook`).

use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::metrics::SecureMetrics;
use controller_runtime::prelude::*;
use controller_runtime::tls::ServerLimits;
use controller_runtime::CustomResource;
use serde::{Deserialize, Serialize};

/// A widget: what its ConfigMap should hold.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[resource(group = "lean.example.com", version = "v1", kind = "Widget", namespaced)]
pub struct WidgetSpec {
    /// The value its ConfigMap holds.
    pub value: String,
}

/// Writes each Widget's ConfigMap.
#[derive(Controller)]
#[controller(for = Widget, owns(ConfigMap), finalizer = "lean.example.com/cleanup", leader_election)]
struct Widgets;

impl ObjectReconciler<Widget> for Widgets {
    type Error = controller_runtime::kube_client::Error;

    async fn reconcile(&self, _: Arc<Widget>, _: &ObjectContext<Widget>) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

impl Cleanup<Widget> for Widgets {
    async fn cleanup(&self, _: Arc<Widget>, _: &ObjectContext<Widget>) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::try_default().await?;
    let mgr = Manager::builder(client)
        .metrics_addr("0.0.0.0:8443".parse()?)
        .metrics_secure(SecureMetrics::new())
        .metrics_server_limits(ServerLimits::new().max_connections(64))
        .build()
        .await?;
    Widgets.setup(&mgr)?;
    let _role = Widgets::rbac();
    let _crd = Widget::crd();
    mgr.run_until_signal().await?;
    Ok(())
}
