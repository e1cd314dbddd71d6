//! Bad input: every error is a Status body and the server state survives.

use crate::{cm, raw, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, PostParams};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn malformed_bodies_get_status_answers_and_leave_state_intact() {
    let env = TestEnv::builder()
        .max_body_bytes(64 * 1024)
        .start()
        .await
        .unwrap();
    let client = env.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("keep", &[], "1"))
        .await
        .unwrap();
    let json = Some("application/json");
    type Case<'a> = (&'a str, String, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            CMS.into(),
            json,
            b"{not json".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            b"[1,2]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{"name":"x","namespace":"other"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{"name":"x","labels":{"a":"bad value"}}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            CMS.into(),
            json,
            format!("{}1{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            vec![b' '; 100 * 1024],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "POST",
            CMS.into(),
            Some("text/plain"),
            br#"{"metadata":{"name":"x"}}"#.to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PATCH",
            format!("{CMS}/keep"),
            Some("application/x-unknown-patch"),
            b"{}".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PUT",
            format!("{CMS}/keep"),
            json,
            br#"{"metadata":{"name":"other"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            format!("{CMS}/keep"),
            json,
            b"{}".to_vec(),
            405,
            "MethodNotAllowed",
        ),
        (
            "GET",
            "/api/v1/nothings".into(),
            None,
            vec![],
            404,
            "NotFound",
        ),
        (
            "GET",
            format!("{CMS}?labelSelector=a%20in%20b"),
            None,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{CMS}?watch=true&resourceVersion=abc"),
            None,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{CMS}?watch=true&sendInitialEvents=true"),
            None,
            vec![],
            400,
            "BadRequest",
        ),
    ];
    for (method, path, ct, body, code, reason) in cases {
        let (got, v) = raw(&client, method, &path, ct, body).await;
        assert_eq!(got, code, "{method} {path}: {v}");
        assert_eq!(v["kind"], "Status", "{method} {path}: {v}");
        assert_eq!(v["code"], code);
        assert_eq!(v["reason"], reason, "{method} {path}: {v}");
        assert!(!v["message"].as_str().unwrap_or("").is_empty());
    }
    let (_, v) = raw(
        &client,
        "POST",
        CMS,
        json,
        br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
    )
    .await;
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    let items = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(items.len(), 1, "state intact after bad input");
    assert_eq!(items[0].metadata.name.as_deref(), Some("keep"));
}

#[tokio::test]
async fn not_found_names_the_resource() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let e = status(api.get("ghost").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"ghost\" not found");
    assert_eq!(e.details.unwrap().name, "ghost");
}
