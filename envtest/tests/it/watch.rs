//! Watch: synthetic ADDED, exact resume, 410 beyond the window, bookmarks,
//! timeoutSeconds, selector transitions, streaming lists.

use crate::{WAIT, cm, describe, take};
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use std::time::Duration;

/// A fresh server and its `default` ConfigMaps API, with ConfigMaps `names`
/// created (no labels, `data.v = "1"`) in that order.
async fn env_with(names: &[&str]) -> (TestEnv, Api<ConfigMap>) {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    for name in names {
        api.create(&PostParams::default(), &cm(name, &[], "1"))
            .await
            .unwrap();
    }
    (env, api)
}

fn wp() -> WatchParams {
    WatchParams::default().disable_bookmarks().timeout(60)
}

#[tokio::test]
async fn rv_zero_gives_synthetic_added_then_changes() {
    let (_env, api) = env_with(&["a", "b"]).await;
    let mut w = api.watch(&wp(), "0").await.unwrap().boxed();
    let evs: Vec<_> = take(&mut w, 2).await.iter().map(describe).collect();
    assert_eq!(
        evs,
        vec![("ADDED".into(), "a".into()), ("ADDED".into(), "b".into())]
    );
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    api.delete("b", &Default::default()).await.unwrap();
    let evs: Vec<_> = take(&mut w, 2).await.iter().map(describe).collect();
    assert_eq!(
        evs,
        vec![
            ("MODIFIED".into(), "a".into()),
            ("DELETED".into(), "b".into())
        ]
    );
}

#[tokio::test]
async fn resume_from_rv_is_exact() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let start = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut rvs = Vec::new();
    for i in 0..6 {
        let c = api
            .create(&PostParams::default(), &cm(&format!("c{i}"), &[], "1"))
            .await
            .unwrap();
        rvs.push(c.metadata.resource_version.unwrap());
    }
    // From the start: all six, in order.
    let mut w = api.watch(&wp(), &start).await.unwrap().boxed();
    let got: Vec<_> = take(&mut w, 6)
        .await
        .iter()
        .map(|e| describe(e).1)
        .collect();
    assert_eq!(got, (0..6).map(|i| format!("c{i}")).collect::<Vec<_>>());
    // From the third write: exactly the last three, then live ones, nothing repeated.
    let mut w = api.watch(&wp(), &rvs[2]).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("live", &[], "1"))
        .await
        .unwrap();
    let got: Vec<_> = take(&mut w, 4)
        .await
        .iter()
        .map(|e| describe(e).1)
        .collect();
    assert_eq!(got, vec!["c3", "c4", "c5", "live"]);
    let extra = tokio::time::timeout(Duration::from_millis(300), w.next()).await;
    assert!(extra.is_err(), "no event may be repeated: {extra:?}");
    // A watch's objects carry strictly increasing RVs.
    let mut w = api.watch(&wp(), &start).await.unwrap().boxed();
    let evs = take(&mut w, 7).await;
    let nums: Vec<u64> = evs
        .iter()
        .map(|e| match e {
            WatchEvent::Added(o) => o
                .metadata
                .resource_version
                .clone()
                .unwrap()
                .parse()
                .unwrap(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert!(nums.windows(2).all(|w| w[0] < w[1]), "{nums:?}");
}

#[tokio::test]
async fn resume_beyond_the_window_gets_410_expired() {
    let env = TestEnv::builder().history_window(3).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let old = api
        .create(&PostParams::default(), &cm("a", &[], "0"))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for i in 1..10 {
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let mut w = api.watch(&wp(), &old).await.unwrap().boxed();
    match take(&mut w, 1).await.remove(0) {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.contains("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    let end = tokio::time::timeout(WAIT, w.next()).await.unwrap();
    assert!(end.is_none(), "the stream closes after the 410");
}

#[tokio::test]
async fn bookmarks_are_sent_when_allowed() {
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let rv = c.metadata.resource_version.unwrap();
    let mut w = api
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    match take(&mut w, 1).await.remove(0) {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    // Without allowWatchBookmarks none arrive.
    let mut w = api.watch(&wp(), &rv).await.unwrap().boxed();
    assert!(
        tokio::time::timeout(Duration::from_millis(400), w.next())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn timeout_seconds_closes_the_stream_cleanly() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let started = std::time::Instant::now();
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watch did not end");
    assert!(end.is_none(), "clean end of stream, got {end:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn selectors_turn_modified_into_added_and_deleted() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("a", &[("app", "x")], "1"))
        .await
        .unwrap();
    let mut w = api
        .watch(&wp().labels("app=y"), &c.metadata.resource_version.unwrap())
        .await
        .unwrap()
        .boxed();
    let pp = PatchParams::default();
    api.patch(
        "a",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    api.patch("a", &pp, &Patch::Merge(json!({"data": {"v": "2"}})))
        .await
        .unwrap();
    api.patch(
        "a",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"app": "z"}}})),
    )
    .await
    .unwrap();
    api.patch("a", &pp, &Patch::Merge(json!({"data": {"v": "3"}})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", &[("app", "y")], "1"))
        .await
        .unwrap();
    let kinds: Vec<_> = take(&mut w, 4).await.iter().map(describe).collect();
    let want: Vec<(String, String)> = [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
        ("ADDED", "b"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(kinds, want);
}

#[tokio::test]
async fn streaming_list_sends_initial_events_then_end_bookmark() {
    let (env, api) = env_with(&["a", "b"]).await;
    let mut w = api
        .watch(&WatchParams::default().initial_events().timeout(60), "")
        .await
        .unwrap()
        .boxed();
    let evs = take(&mut w, 3).await;
    assert_eq!(describe(&evs[0]).0, "ADDED");
    assert_eq!(describe(&evs[1]).0, "ADDED");
    match &evs[2] {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
            assert_eq!(
                b.metadata.resource_version,
                env.current_revision().to_string()
            );
        }
        other => panic!("expected the initial-events-end BOOKMARK, got {other:?}"),
    }
    api.create(&PostParams::default(), &cm("c", &[], "1"))
        .await
        .unwrap();
    let next = take(&mut w, 1).await;
    assert_eq!(describe(&next[0]), ("ADDED".to_string(), "c".to_string()));
}

#[tokio::test]
async fn legacy_watch_paths_and_single_object_watches() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    let text = |v: serde_json::Value| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string())
    };
    let (code, body) = crate::raw(
        &client,
        "GET",
        "/api/v1/watch/namespaces/default/configmaps?resourceVersion=0&timeoutSeconds=1",
        None,
        vec![],
    )
    .await;
    let body = text(body);
    assert_eq!(code, 200);
    assert_eq!(body.matches("\"type\":\"ADDED\"").count(), 2, "{body}");
    let (code, body) = crate::raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/a?watch=true&resourceVersion=0&timeoutSeconds=1",
        None,
        vec![],
    )
    .await;
    let body = text(body);
    assert_eq!(code, 200);
    assert_eq!(body.matches("\"type\":\"ADDED\"").count(), 1, "{body}");
    assert!(body.contains("\"name\":\"a\""), "{body}");
}
