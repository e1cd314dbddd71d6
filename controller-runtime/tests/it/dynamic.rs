//! Dynamic controllers on a real server: a CRD installed after the manager
//! started gets a controller built from its `ApiResource`, which joins the
//! running manager, reconciles `DynamicObject`s, owns ConfigMaps, and runs
//! under exactly the RBAC rules its builder computed.

use std::time::Duration;

use controller_runtime::kube_client::core::discovery::Scope;
use controller_runtime::kube_client::core::{ApiResource, DynamicObject, GroupVersionKind};
use controller_runtime::prelude::*;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::eventually;
use crate::fixture::{assert_nothing_forbidden, spawn_manager};

const LIMIT: Duration = Duration::from_secs(15);
const SA: &str = "gizmo-controller";

fn gizmos() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gizmo"),
        "gizmos",
    )
}

async fn install_gizmo_crd(env: &envtest::TestEnv) {
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(env.client())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
}

/// Keeps a ConfigMap `<name>-gizmo` with the Gizmo's `spec.color`, owned
/// by it; reads the Gizmo from the manager's dynamic cache.
struct Painter {
    cache: Cache,
    client: Client,
    resource: ApiResource,
}

impl Reconciler for Painter {
    type Error = kube_client::Error;

    async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
        let Some(gizmo) = self
            .cache
            .dynamic_informer(&self.resource, Scope::Namespaced)
            .get(req.namespace.as_deref(), &req.name)
        else {
            return Ok(Action::done());
        };
        let ns = req.namespace.as_deref().unwrap_or("default");
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let name = format!("{}-gizmo", req.name);
        if cms.get_opt(&name).await?.is_none() {
            let color = gizmo.data["spec"]["color"].as_str().unwrap_or("none");
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(name);
            cm.metadata.owner_references =
                gizmo.controller_owner_ref(&self.resource).map(|o| vec![o]);
            cm.data = Some([("color".to_owned(), color.to_owned())].into());
            cms.create(&PostParams::default(), &cm).await?;
        }
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_dynamic_controller_for_a_crd_installed_at_run_time_reconciles_under_its_computed_rules()
{
    let env = envtest::TestEnv::start().await.unwrap();
    // The manager starts with no rights but Events; the controller's rules
    // are granted once known, before the controller is completed.
    let none = controller_runtime::rbac::Permissions::new()
        .events()
        .cluster_role(SA);
    let client = env
        .client_with_cluster_role("default", SA, &none)
        .await
        .unwrap();
    let mgr = Manager::builder(client).build().await.unwrap();
    let (stop, task) = spawn_manager(&mgr);

    install_gizmo_crd(&env).await;
    let resource = gizmos();
    let admin: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &resource);
    eventually(LIMIT, "the Gizmo API served", || async {
        admin.list(&ListParams::default()).await.ok()
    })
    .await;

    let builder = mgr
        .dynamic_controller(resource.clone(), Scope::Namespaced)
        .owns_dynamic(ApiResource::erase::<ConfigMap>(&()), Scope::Namespaced);
    let permissions = builder.permissions();
    assert!(permissions.allows("example.com", "gizmos", "watch"));
    assert!(permissions.allows("example.com", "gizmos/status", "update"));
    assert!(permissions.allows("", "configmaps", "create"));
    assert!(!permissions.allows("", "secrets", "list"));
    env.client_with_cluster_role("default", SA, &permissions.cluster_role(SA))
        .await
        .unwrap();
    let controller = builder
        .complete(Painter {
            cache: mgr.cache().clone(),
            client: mgr.client(),
            resource: resource.clone(),
        })
        .unwrap();
    assert_eq!(controller.name(), "gizmo");

    let gizmo = DynamicObject::new("first", &resource)
        .within("default")
        .data(serde_json::json!({"spec": {"color": "blue"}}));
    admin.create(&PostParams::default(), &gizmo).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let painted = eventually(LIMIT, "the Gizmo's ConfigMap", || async {
        cms.get_opt("first-gizmo").await.unwrap()
    })
    .await;
    assert_eq!(
        painted
            .data
            .unwrap_or_default()
            .get("color")
            .map(String::as_str),
        Some("blue")
    );

    // Owned: deleting the ConfigMap reconciles the Gizmo, which recreates it.
    let first_uid = painted.metadata.uid.clone();
    cms.delete("first-gizmo", &DeleteParams::default())
        .await
        .unwrap();
    eventually(LIMIT, "the ConfigMap recreated", || async {
        cms.get_opt("first-gizmo")
            .await
            .unwrap()
            .filter(|cm| cm.metadata.uid != first_uid)
    })
    .await;

    assert_nothing_forbidden(&env, "the computed rules");
    stop.cancel();
    task.await.unwrap().unwrap();
}
