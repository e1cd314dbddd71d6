//! Derived kinds against envtest over real HTTP: the generated CRD is
//! accepted, and objects of the generated type are stored and read back.

use ::envtest::TestEnv;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, PostParams};

use crate::types::{Foo, FooSpec, FooStatus};

/// Installs `crd` and returns once the server reports it Established.
pub async fn install(client: &Client, crd: &CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds.create(&PostParams::default(), crd).await.unwrap();
    let established = created
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    assert!(established, "the CRD is not Established");
}

#[tokio::test]
async fn derived_crd_is_accepted_and_objects_round_trip() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, &Foo::crd().unwrap()).await;

    let api: Api<Foo> = Api::namespaced(client.clone(), "default");
    let spec = FooSpec {
        deployment_name: "web".into(),
        replicas: Some(3),
    };
    let created = api
        .create(&PostParams::default(), &Foo::new("one", spec.clone()))
        .await
        .unwrap();
    assert_eq!(created.spec, spec);
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));

    let mut with_status = api.get("one").await.unwrap();
    assert_eq!(with_status.spec, spec);
    with_status.status = Some(FooStatus {
        available_replicas: 2,
    });
    let updated = api
        .replace_status("one", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(
        updated.status,
        Some(FooStatus {
            available_replicas: 2
        })
    );
}
