//! Lists namespaces through the current kubeconfig (`KUBECONFIG`), with
//! controller-runtime's default features only.

use controller_runtime::k8s_openapi::api::core::v1::Namespace;
use controller_runtime::kube_client::{Api, Client};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::try_default().await?;
    let namespaces = Api::<Namespace>::all(client).list(&Default::default()).await?;
    for ns in &namespaces.items {
        println!("{}", ns.metadata.name.as_deref().unwrap_or_default());
    }
    if namespaces.items.is_empty() {
        return Err("no namespaces listed".into());
    }
    Ok(())
}
