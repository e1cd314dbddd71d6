//! `TestEnvBuilder::crds` / `crd_dir`: CRDs installed at start and served
//! by the time `start` returns.

use crate::crd::{widget_crd, widgets};
use envtest::TestEnv;
use kube_client::api::{ListParams, PostParams};
use serde_json::json;

/// A fresh, empty directory under the system temp dir.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "envtest-crd-{tag}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gadget_crd_yaml() -> &'static str {
    r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
"#
}

#[tokio::test]
async fn crds_are_served_when_start_returns() {
    let env = TestEnv::builder()
        .crds([widget_crd("Namespaced")])
        .start()
        .await
        .unwrap();
    // No waiting: both served versions answer at once.
    for version in ["v1", "v1beta1"] {
        let list = widgets(&env.client(), version, Some("default"))
            .list(&ListParams::default())
            .await
            .unwrap();
        assert!(list.items.is_empty());
    }
    let w: kube_client::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"}, "spec": {"color": "red"}
    }))
    .unwrap();
    widgets(&env.client(), "v1", Some("default"))
        .create(&PostParams::default(), &w)
        .await
        .unwrap();
}

#[tokio::test]
async fn crd_dir_reads_yaml_documents_and_json_and_skips_other_kinds() {
    let dir = temp_dir("ok");
    std::fs::write(dir.join("a-gadget.yaml"), gadget_crd_yaml()).unwrap();
    std::fs::write(
        dir.join("b-widget.json"),
        serde_json::to_vec(&widget_crd("Cluster")).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("README.md"), "not read").unwrap();
    let env = TestEnv::builder().crd_dir(&dir).start().await.unwrap();

    let gadgets = kube_client::Api::<kube_client::api::DynamicObject>::namespaced_with(
        env.client(),
        "default",
        &kube_client::api::ApiResource::from_gvk_with_plural(
            &kube_client::api::GroupVersionKind::gvk("example.com", "v1", "Gadget"),
            "gadgets",
        ),
    );
    assert!(gadgets.list(&ListParams::default()).await.is_ok());
    assert!(
        widgets(&env.client(), "v1", None)
            .list(&ListParams::default())
            .await
            .is_ok()
    );
    // The ConfigMap document was skipped, not created.
    let cms: kube_client::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube_client::Api::namespaced(env.client(), "default");
    assert!(cms.get_opt("not-a-crd").await.unwrap().is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_broken_crd_file_fails_start_naming_the_file() {
    let dir = temp_dir("broken");
    std::fs::write(
        dir.join("broken.yaml"),
        "kind: CustomResourceDefinition\nspec: [unclosed\n",
    )
    .unwrap();
    let err = TestEnv::builder().crd_dir(&dir).start().await.unwrap_err();
    assert!(err.to_string().contains("broken.yaml"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_crd_the_server_rejects_fails_start() {
    let mut crd = widget_crd("Namespaced");
    crd.spec.versions.clear();
    let err = TestEnv::builder().crds([crd]).start().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("installing CRD widgets.example.com"),
        "{err}"
    );
}
