//! Fault injection and the request log.

use crate::{WAIT, cm, status};
use envtest::{FailureRule, TestEnv};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use std::time::Duration;

#[tokio::test]
async fn fail_next_injects_statuses_and_the_log_records_them() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    env.faults().fail_next(
        FailureRule::new(2, 429)
            .method(http::Method::GET)
            .path_contains("configmaps")
            .retry_after(3),
    );
    // A POST does not match the rule.
    api.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    for _ in 0..2 {
        let e = status(api.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
        assert_eq!(e.details.unwrap().retry_after_seconds, 3);
    }
    api.list(&ListParams::default()).await.unwrap();
    for (code, reason) in [
        (500, "InternalError"),
        (409, "Conflict"),
        (504, "Timeout"),
        (410, "Expired"),
    ] {
        env.faults().fail_next(FailureRule::new(1, code));
        let e = status(api.get("a").await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (code, reason));
    }
    let log = env.request_log();
    let statuses: Vec<u16> = log
        .iter()
        .filter(|r| r.path.ends_with("/configmaps"))
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![201, 429, 429, 200]);
    assert!(log.iter().all(|r| !r.is_watch()));
}

#[tokio::test]
async fn retry_after_header_is_sent_with_429() {
    let env = TestEnv::start().await.unwrap();
    env.faults()
        .fail_next(FailureRule::new(1, 429).retry_after(7));
    let req = http::Request::get("/api/v1/namespaces")
        .body(kube_client::client::Body::empty())
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers().get(http::header::RETRY_AFTER).unwrap(), "7");
}

#[tokio::test]
async fn drop_watches_and_compact_force_a_relist() {
    let env = TestEnv::start().await.unwrap();
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
    env.faults().drop_watches();
    let end = tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watch not dropped");
    assert!(end.is_none());
    // A new watch still works after a drop.
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    assert!(matches!(
        tokio::time::timeout(WAIT, w.next()).await.unwrap(),
        Some(Ok(WatchEvent::Added(_)))
    ));
    env.faults().compact();
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(WAIT, w.next()).await.unwrap() {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    let log = env.request_log();
    assert_eq!(log.iter().filter(|r| r.is_watch()).count(), 3);
}

#[tokio::test]
async fn latency_and_pause_hold_requests() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    env.faults().set_latency(Duration::from_millis(200));
    let t = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200));
    env.faults().set_latency(Duration::ZERO);

    env.faults().pause();
    let api2 = api.clone();
    let pending = tokio::spawn(async move {
        api2.list(&ListParams::default())
            .await
            .map(|l| l.items.len())
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(300), async {
            while !pending.is_finished() {
                tokio::task::yield_now().await
            }
        })
        .await
        .is_err(),
        "paused requests wait"
    );
    env.faults().resume();
    assert_eq!(
        tokio::time::timeout(WAIT, pending)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        0
    );
}
