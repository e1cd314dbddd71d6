//! The test-only admin endpoints (`--admin`): compact and drop watches over HTTP.

use crate::{WAIT, cm};
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, PostParams, WatchEvent, WatchParams};

/// Send `method path` with an empty body; the status code.
async fn call(env: &TestEnv, method: http::Method, path: &str) -> u16 {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .body(kube_client::client::Body::empty())
        .unwrap();
    env.client().send(req).await.unwrap().status().as_u16()
}

#[tokio::test]
async fn admin_endpoints_are_absent_unless_enabled() {
    let env = TestEnv::start().await.unwrap();
    for path in ["/envtest/v1/compact", "/envtest/v1/drop-watches"] {
        assert_eq!(call(&env, http::Method::POST, path).await, 404, "{path}");
    }
}

#[tokio::test]
async fn drop_watches_over_http_closes_open_watches() {
    let env = TestEnv::builder().admin_endpoints().start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let rv = c.metadata.resource_version.unwrap();
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        call(&env, http::Method::POST, "/envtest/v1/drop-watches").await,
        200
    );
    let end = tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watch not dropped");
    assert!(end.is_none());
}

#[tokio::test]
async fn compact_over_http_makes_a_resume_get_410() {
    let env = TestEnv::builder().admin_endpoints().start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let rv = c.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    assert_eq!(
        call(&env, http::Method::POST, "/envtest/v1/compact").await,
        200
    );
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(WAIT, w.next()).await.unwrap() {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn admin_endpoints_take_post_only_and_known_names() {
    let env = TestEnv::builder().admin_endpoints().start().await.unwrap();
    assert_eq!(
        call(&env, http::Method::GET, "/envtest/v1/compact").await,
        405
    );
    assert_eq!(
        call(&env, http::Method::POST, "/envtest/v1/nothing").await,
        404
    );
}
