//! --data-dir persistence: acknowledged writes survive a restart.

use crate::{cm, status};
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

#[tokio::test]
async fn state_survives_a_restart_and_a_torn_journal_line() {
    let dir = std::env::temp_dir().join(format!("envtest-it-{}", uuid::Uuid::new_v4()));
    let (uid, rv_a, first_rv, last_rv) = {
        let env = TestEnv::builder().data_dir(&dir).start().await.unwrap();
        let api: Api<ConfigMap> = Api::default_namespaced(env.client());
        let first = api
            .create(&PostParams::default(), &cm("a", &[("k", "v")], "1"))
            .await
            .unwrap();
        api.create(&PostParams::default(), &cm("b", &[], "1"))
            .await
            .unwrap();
        api.delete("b", &DeleteParams::default()).await.unwrap();
        let a = api
            .patch(
                "a",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": "2"}})),
            )
            .await
            .unwrap();
        (
            a.metadata.uid.unwrap(),
            a.metadata.resource_version.unwrap(),
            first.metadata.resource_version.unwrap(),
            env.current_revision(),
        )
    };
    let env = TestEnv::builder().data_dir(&dir).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let a = api.get("a").await.unwrap();
    assert_eq!(a.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(a.metadata.resource_version.as_deref(), Some(rv_a.as_str()));
    assert_eq!(a.data.unwrap()["v"], "2");
    assert_eq!(status(api.get("b").await.unwrap_err()).code, 404);
    assert_eq!(env.current_revision(), last_rv, "the revision carries on");
    let c = api
        .create(&PostParams::default(), &cm("c", &[], "1"))
        .await
        .unwrap();
    assert!(c.metadata.resource_version.unwrap().parse::<u64>().unwrap() > last_rv);
    // History is not persisted: resuming from before the restart is 410.
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks(), &first_rv)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(w.next().await, Some(Ok(WatchEvent::Error(e))) if e.code == 410));
    drop(env);

    // A crash mid-write leaves a torn last line; it is ignored.
    let journal = dir.join("journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str("{\"rev\": 999999, \"op\": \"pu");
    std::fs::write(&journal, text).unwrap();
    let env = TestEnv::builder().data_dir(&dir).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(names, vec!["a", "c"]);
    assert!(env.current_revision() < 999_999);
    drop(env);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn custom_resources_are_served_again_after_a_restart() {
    use crate::crd::{widget, widget_crd, widgets};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let dir = std::env::temp_dir().join(format!("envtest-it-{}", uuid::Uuid::new_v4()));
    {
        let env = TestEnv::builder().data_dir(&dir).start().await.unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(env.client());
        crds.create(&PostParams::default(), &widget_crd("Namespaced"))
            .await
            .unwrap();
        widgets(&env.client(), "v1", Some("default"))
            .create(&PostParams::default(), &widget("w", "red"))
            .await
            .unwrap();
    }
    let env = TestEnv::builder().data_dir(&dir).start().await.unwrap();
    let got = widgets(&env.client(), "v1", Some("default"))
        .get("w")
        .await
        .unwrap();
    assert_eq!(got.data["spec"]["color"], "red");
    drop(env);
    std::fs::remove_dir_all(&dir).unwrap();
}
