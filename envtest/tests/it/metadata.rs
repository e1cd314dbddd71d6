//! Metadata rules: label and annotation syntax, the annotation size limit,
//! and fields only the server (or DELETE) may change.

use crate::{cm, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeMap;

#[tokio::test]
async fn label_and_annotation_syntax_is_checked() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let pp = PostParams::default();
    let e = status(
        api.create(&pp, &cm("a", &[("-bad/key/x", "v")], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let causes = e.details.unwrap().causes;
    assert_eq!(causes[0].field, "metadata.labels");
    assert!(
        causes[0].message.contains("\"-bad/key/x\""),
        "{}",
        causes[0].message
    );

    let mut c = cm("b", &[], "1");
    c.metadata.annotations = Some(BTreeMap::from([("not a key".to_string(), "v".to_string())]));
    let e = status(api.create(&pp, &c).await.unwrap_err());
    assert_eq!(e.details.unwrap().causes[0].field, "metadata.annotations");

    // 300 KB of annotations: over the 256 KiB limit.
    c.metadata.annotations = Some(BTreeMap::from([("note".to_string(), "x".repeat(300_000))]));
    let e = status(api.create(&pp, &c).await.unwrap_err());
    assert_eq!(e.code, 422);
    let cause = &e.details.unwrap().causes[0];
    assert_eq!(
        (cause.field.as_str(), cause.reason.as_str()),
        ("metadata.annotations", "FieldValueTooLong")
    );

    let ok = api
        .create(&pp, &cm("c", &[("example.com/App_1", "v.1")], "1"))
        .await
        .unwrap();
    let e = status(
        api.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "bad value!"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        api.get("c").await.unwrap().metadata.labels,
        ok.metadata.labels
    );
}

#[tokio::test]
async fn uid_and_deletion_timestamp_are_immutable() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let created = api
        .create(&PostParams::default(), &cm("c", &[], "1"))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let pp = PatchParams::default();
    let e = status(
        api.patch(
            "c",
            &pp,
            &Patch::Merge(json!({"metadata": {"uid": "not-the-uid"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(e.message.contains("metadata.uid"), "{}", e.message);
    assert!(e.message.contains("field is immutable"), "{}", e.message);

    let mut changed = created.clone();
    changed.metadata.uid = Some("another".into());
    let e = status(
        api.replace("c", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);

    let e = status(
        api.patch(
            "c",
            &pp,
            &Patch::Merge(json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        e.details.unwrap().causes[0].field,
        "metadata.deletionTimestamp"
    );
    let now = api.get("c").await.unwrap();
    assert_eq!(now.metadata.uid.as_deref(), Some(uid.as_str()));
    assert!(now.metadata.deletion_timestamp.is_none());

    // Omitting the uid keeps it.
    let mut no_uid = now.clone();
    no_uid.metadata.uid = None;
    let updated = api
        .replace("c", &PostParams::default(), &no_uid)
        .await
        .unwrap();
    assert_eq!(updated.metadata.uid.as_deref(), Some(uid.as_str()));
}
