//! `ApiListerWatcher` against envtest: pages, selectors, namespace scope,
//! watch events and bookmarks, errors with their Status, dynamic objects
//! and objects that do not decode.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use envtest::{FailureRule, TestEnv};
use futures::StreamExt;
use informer_core::list_watch::{
    ApiListerWatcher, ListRequest, ListWatchOptions, ListerWatcher, WatchEvent, WatchRequest,
};
use informer_core::reflector::Reflector;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_core::{
    ApiResource, DynamicObject, GroupVersionKind, NamespaceResourceScope, ObjectMeta, Resource,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::common::*;

fn lw(api: Api<ConfigMap>) -> ApiListerWatcher<ConfigMap> {
    ApiListerWatcher::new(api, ListWatchOptions::default())
}

#[tokio::test]
async fn list_pages_with_limit_and_continue_from_one_snapshot() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, "cm", 5).await;
    let lw = lw(api.clone());
    let mut req = ListRequest {
        limit: Some(2),
        ..ListRequest::default()
    };
    let mut sizes = Vec::new();
    let mut rvs = Vec::new();
    let mut names = Vec::new();
    loop {
        let page = lw.list(req.clone()).await.unwrap();
        sizes.push(page.items.len());
        rvs.push(page.resource_version.clone());
        names.extend(page.items.iter().map(|o| o.metadata.name.clone().unwrap()));
        // A write between pages does not show up: pages come from one snapshot.
        api.create(
            &PostParams::default(),
            &cm(&format!("zz-{}", sizes.len()), "x"),
        )
        .await
        .unwrap();
        match page.continue_token {
            Some(token) => req.continue_token = Some(token),
            None => break,
        }
    }
    assert_eq!(sizes, vec![2, 2, 1]);
    assert!(rvs.windows(2).all(|w| w[0] == w[1]), "{rvs:?}");
    assert_eq!(names.len(), 5);
    assert!(names.iter().all(|n| n.starts_with("cm-")));
}

#[tokio::test]
async fn selectors_and_namespace_scope_filter_lists_and_watches() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    create_namespace(&client, "other").await;
    let default: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    let labelled = |name: &str, app: &str| {
        let mut o = cm(name, "1");
        o.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        o
    };
    for (api, name, app) in [
        (&default, "a", "web"),
        (&default, "b", "db"),
        (&other, "c", "web"),
    ] {
        api.create(&PostParams::default(), &labelled(name, app))
            .await
            .unwrap();
    }
    let all: Api<ConfigMap> = Api::all(client.clone());
    let web = ApiListerWatcher::new(all, ListWatchOptions::default().labels("app in (web)"));
    let page = web.list(ListRequest::default()).await.unwrap();
    let mut names: Vec<_> = page
        .items
        .iter()
        .map(informer_core::key::object_key)
        .collect();
    names.sort();
    assert_eq!(names, ["default/a", "other/c"]);

    let only_default = ApiListerWatcher::new(
        default.clone(),
        ListWatchOptions::default().fields("metadata.name!=a"),
    );
    let page = only_default.list(ListRequest::default()).await.unwrap();
    let names: Vec<_> = page
        .items
        .iter()
        .map(informer_core::key::object_key)
        .collect();
    assert_eq!(names, ["default/b"]);

    // The watch applies the same scope: only default/b changes are seen.
    let mut events = only_default
        .watch(WatchRequest {
            resource_version: page.resource_version.clone(),
            timeout_seconds: Some(30),
            ..WatchRequest::default()
        })
        .await
        .unwrap();
    let patch = Patch::Merge(serde_json::json!({"data": {"v": "2"}}));
    for (api, name) in [(&other, "c"), (&default, "a"), (&default, "b")] {
        api.patch(name, &PatchParams::default(), &patch)
            .await
            .unwrap();
    }
    let first = tokio::time::timeout(LIMIT, events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match first {
        WatchEvent::Modified(o) => assert_eq!(o.metadata.name.as_deref(), Some("b")),
        other => panic!("expected b modified, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_streams_typed_events_and_bookmarks_and_ends_at_its_timeout() {
    let env = TestEnv::builder()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let lw = lw(api.clone());
    let rv = lw
        .list(ListRequest::default())
        .await
        .unwrap()
        .resource_version;
    let mut stream = lw
        .watch(WatchRequest {
            resource_version: rv,
            timeout_seconds: Some(2),
            allow_bookmarks: true,
            send_initial_events: false,
        })
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("w", "1"))
        .await
        .unwrap();
    let patch = Patch::Merge(serde_json::json!({"data": {"v": "2"}}));
    api.patch("w", &PatchParams::default(), &patch)
        .await
        .unwrap();
    delete(&api, "w").await;
    let mut kinds = Vec::new();
    let collect = async {
        while let Some(ev) = stream.next().await {
            kinds.push(match ev.unwrap() {
                WatchEvent::Added(_) => "added",
                WatchEvent::Modified(_) => "modified",
                WatchEvent::Deleted(_) => "deleted",
                WatchEvent::Bookmark(b) => {
                    assert!(!b.resource_version.is_empty());
                    "bookmark"
                }
                WatchEvent::Undecodable(f) => panic!("undecodable: {f}"),
            });
        }
    };
    tokio::time::timeout(LIMIT, collect)
        .await
        .expect("the watch ends after timeoutSeconds");
    let changes: Vec<_> = kinds.iter().copied().filter(|k| *k != "bookmark").collect();
    assert_eq!(changes, ["added", "modified", "deleted"]);
    assert!(kinds.contains(&"bookmark"), "{kinds:?}");
}

#[tokio::test]
async fn errors_keep_the_status_reason_and_retry_after() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let lw = lw(api.clone());
    env.faults()
        .fail_next(FailureRule::new(1, 429).retry_after(3));
    let err = lw.list(ListRequest::default()).await.unwrap_err();
    assert!(err.is_too_many_requests(), "{err}");
    assert_eq!(err.reason(), Some("TooManyRequests"));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));

    // Resuming from compacted history: 410 Expired (as an ERROR event).
    let old = lw
        .list(ListRequest::default())
        .await
        .unwrap()
        .resource_version;
    api.create(&PostParams::default(), &cm("x", "1"))
        .await
        .unwrap();
    env.faults().compact();
    let result = lw
        .watch(WatchRequest {
            resource_version: old,
            timeout_seconds: Some(10),
            ..WatchRequest::default()
        })
        .await;
    let err = match result {
        Err(e) => e,
        Ok(mut stream) => tokio::time::timeout(LIMIT, stream.next())
            .await
            .unwrap()
            .expect("an error event")
            .unwrap_err(),
    };
    assert!(err.is_expired(), "{err}");
    assert_eq!(err.code(), Some(410));

    // A resource version from the future is "too large".
    let err = lw
        .list(ListRequest {
            resource_version: "999999".into(),
            ..ListRequest::default()
        })
        .await
        .unwrap_err();
    assert!(err.is_too_large_resource_version(), "{err}");
}

#[tokio::test]
async fn dynamic_objects_list_and_watch() {
    let env = TestEnv::start().await.unwrap();
    let typed: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&typed, "dyn", 3).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ar);
    let lw = ApiListerWatcher::new(api.clone(), ListWatchOptions::default());
    let mirror = Mirror::new();
    let reflector = Reflector::builder(lw, mirror.clone()).build();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    eventually("the dynamic list is stored", || {
        mirror.snapshot().len() == 3
    })
    .await;
    typed
        .create(&PostParams::default(), &cm("dyn-late", "1"))
        .await
        .unwrap();
    eventually_async("the dynamic mirror equals a LIST", || async {
        mirror.snapshot() == list_snapshot(&api).await
    })
    .await;
    assert_eq!(mirror.snapshot().len(), 4);
    cancel.cancel();
    task.await.unwrap();
}

/// A ConfigMap whose data values must be numbers: ConfigMaps with other
/// values do not decode as this type.
#[derive(Debug, Clone, Deserialize)]
struct NumericConfigMap {
    metadata: ObjectMeta,
    #[serde(default)]
    data: BTreeMap<String, u32>,
}

impl Resource for NumericConfigMap {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "ConfigMap".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "configmaps".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[tokio::test]
async fn objects_that_do_not_decode_are_counted_and_skipped() {
    let env = TestEnv::start().await.unwrap();
    let typed: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    typed
        .create(&PostParams::default(), &cm("good", "1"))
        .await
        .unwrap();
    typed
        .create(&PostParams::default(), &cm("bad", "not-a-number"))
        .await
        .unwrap();
    // data values are strings on the wire; "1" is not a JSON number either,
    // so make "good" decode by giving it no data at all.
    let patch = Patch::Merge(serde_json::json!({"data": null}));
    typed
        .patch("good", &PatchParams::default(), &patch)
        .await
        .unwrap();

    let api: Api<NumericConfigMap> = Api::namespaced(env.client(), "default");
    let page = ApiListerWatcher::new(api.clone(), ListWatchOptions::default())
        .list(ListRequest::default())
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(page.items[0].data.is_empty());
    assert_eq!(page.undecodable.len(), 1);
    assert_eq!(page.undecodable[0].key.as_deref(), Some("default/bad"));

    let mirror = Mirror::new();
    let metrics = Counting::new();
    let reflector = Reflector::builder(
        ApiListerWatcher::new(api, ListWatchOptions::default()),
        mirror.clone(),
    )
    .metrics(metrics.clone())
    .build();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    eventually("the list is stored", || mirror.replaces() == 1).await;
    assert_eq!(metrics.count("decode_failure"), 1);
    // A bad watch event is skipped and the watch goes on.
    typed
        .create(&PostParams::default(), &cm("bad-2", "nope"))
        .await
        .unwrap();
    let mut fine = cm("fine", "");
    fine.data = None;
    typed.create(&PostParams::default(), &fine).await.unwrap();
    eventually("the good object after the bad one arrives", || {
        mirror.snapshot().contains_key("default/fine")
    })
    .await;
    assert_eq!(metrics.count("decode_failure"), 2);
    assert!(!mirror.snapshot().contains_key("default/bad-2"));
    cancel.cancel();
    task.await.unwrap();
}
