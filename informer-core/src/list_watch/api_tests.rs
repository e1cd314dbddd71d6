//! Unit tests of the HTTP side of [`ApiListerWatcher`]: URLs and decoding.

use super::*;
use futures::executor::block_on;
use k8s_openapi::api::core::v1::ConfigMap;

const BASE: &str = "/api/v1/namespaces/default/configmaps";

fn query(url: &str) -> Vec<(String, String)> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}

fn has(url: &str, k: &str, v: &str) -> bool {
    query(url).iter().any(|(a, b)| a == k && b == v)
}

fn has_key(url: &str, k: &str) -> bool {
    query(url).iter().any(|(a, _)| a == k)
}

#[test]
fn list_url_sends_limit_together_with_resource_version_zero() {
    let req = ListRequest {
        limit: Some(500),
        resource_version: "0".into(),
        ..ListRequest::default()
    };
    let url = list_url(BASE, &ListWatchOptions::default(), &req);
    assert!(url.starts_with(BASE));
    assert!(has(&url, "limit", "500"));
    assert!(has(&url, "resourceVersion", "0"));
}

#[test]
fn list_url_with_continue_drops_resource_version() {
    let req = ListRequest {
        limit: Some(500),
        continue_token: Some("tok en".into()),
        resource_version: "12".into(),
        resource_version_match: Some(ResourceVersionMatch::NotOlderThan),
    };
    let url = list_url(BASE, &ListWatchOptions::default(), &req);
    assert!(has(&url, "continue", "tok en"));
    assert!(!has_key(&url, "resourceVersion"));
    assert!(!has_key(&url, "resourceVersionMatch"));
}

#[test]
fn list_url_empty_resource_version_is_not_sent_and_selectors_are_encoded() {
    let opts = ListWatchOptions::default()
        .labels("app in (a,b),!gone")
        .fields("metadata.name!=x");
    let url = list_url(BASE, &opts, &ListRequest::default());
    assert!(!has_key(&url, "resourceVersion"));
    assert!(!has_key(&url, "limit"));
    assert!(has(&url, "labelSelector", "app in (a,b),!gone"));
    assert!(has(&url, "fieldSelector", "metadata.name!=x"));
    assert!(!url.contains(' '), "query must be encoded: {url}");
}

#[test]
fn list_url_sends_resource_version_match() {
    let req = ListRequest {
        resource_version: "7".into(),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        ..ListRequest::default()
    };
    let url = list_url(BASE, &ListWatchOptions::default(), &req);
    assert!(has(&url, "resourceVersion", "7"));
    assert!(has(&url, "resourceVersionMatch", "Exact"));
}

#[test]
fn watch_url_carries_all_watch_parameters() {
    let req = WatchRequest {
        resource_version: "42".into(),
        timeout_seconds: Some(321),
        allow_bookmarks: true,
        send_initial_events: false,
    };
    let url = watch_url(BASE, &ListWatchOptions::default().labels("a=b"), &req);
    assert!(has(&url, "watch", "true"));
    assert!(has(&url, "resourceVersion", "42"));
    assert!(has(&url, "timeoutSeconds", "321"));
    assert!(has(&url, "allowWatchBookmarks", "true"));
    assert!(has(&url, "labelSelector", "a=b"));
    assert!(!has_key(&url, "sendInitialEvents"));
}

#[test]
fn watch_url_streaming_list_sets_match_and_bookmarks() {
    let req = WatchRequest {
        send_initial_events: true,
        ..WatchRequest::default()
    };
    let url = watch_url(BASE, &ListWatchOptions::default(), &req);
    assert!(has(&url, "sendInitialEvents", "true"));
    assert!(has(&url, "resourceVersionMatch", "NotOlderThan"));
    assert!(has(&url, "allowWatchBookmarks", "true"));
    assert!(!has_key(&url, "resourceVersion"));
}

#[test]
fn decode_list_reports_bad_items_and_keeps_the_rest() {
    let body = br#"{"kind":"ConfigMapList","apiVersion":"v1",
        "metadata":{"resourceVersion":"9","continue":"next"},
        "items":[
          {"metadata":{"name":"a","namespace":"ns","resourceVersion":"3"},"data":{"k":"v"}},
          {"metadata":{"name":"b","namespace":"ns","resourceVersion":"4"},"data":{"k":7}}
        ]}"#;
    let page = decode_list::<ConfigMap>(body).unwrap();
    assert_eq!(page.resource_version, "9");
    assert_eq!(page.continue_token.as_deref(), Some("next"));
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].metadata.name.as_deref(), Some("a"));
    assert_eq!(page.undecodable.len(), 1);
    assert_eq!(page.undecodable[0].key.as_deref(), Some("ns/b"));
    assert_eq!(page.undecodable[0].resource_version.as_deref(), Some("4"));
    assert_eq!(page.undecodable[0].event_type.as_deref(), Some("LIST"));
}

#[test]
fn decode_list_empty_continue_and_null_items() {
    let body = br#"{"metadata":{"resourceVersion":"1","continue":""},"items":null}"#;
    let page = decode_list::<ConfigMap>(body).unwrap();
    assert!(page.items.is_empty());
    assert_eq!(page.continue_token, None);
    assert!(matches!(
        decode_list::<ConfigMap>(b"not json"),
        Err(ListWatchError::DecodeList(_))
    ));
}

#[test]
fn decode_event_kinds() {
    let added = decode_event::<ConfigMap>(
        br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}"#,
    )
    .unwrap();
    assert!(matches!(added, WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("a")));
    let bookmark = decode_event::<ConfigMap>(
        br#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"77","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
    )
    .unwrap();
    match bookmark {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.resource_version, "77");
            assert!(b.is_initial_events_end());
        }
        other => panic!("expected bookmark, got {other:?}"),
    }
    let err = decode_event::<ConfigMap>(
        br#"{"type":"ERROR","object":{"kind":"Status","status":"Failure","code":410,"reason":"Expired","message":"too old"}}"#,
    )
    .unwrap_err();
    assert!(err.is_expired());
    assert_eq!(err.reason(), Some("Expired"));
}

#[test]
fn decode_event_undecodable_object_names_its_key() {
    let ev = decode_event::<ConfigMap>(
        br#"{"type":"MODIFIED","object":{"metadata":{"name":"x","namespace":"n","resourceVersion":"8"},"data":[1]}}"#,
    )
    .unwrap();
    match ev {
        WatchEvent::Undecodable(f) => {
            assert_eq!(f.key.as_deref(), Some("n/x"));
            assert_eq!(f.event_type.as_deref(), Some("MODIFIED"));
            assert_eq!(f.resource_version.as_deref(), Some("8"));
            assert!(f.to_string().contains("n/x"));
        }
        other => panic!("expected undecodable, got {other:?}"),
    }
    assert!(matches!(
        decode_event::<ConfigMap>(b"{garbage").unwrap(),
        WatchEvent::Undecodable(DecodeFailure {
            event_type: None,
            ..
        })
    ));
}

fn chunks(parts: &[&str]) -> impl Stream<Item = Result<Bytes, kube_client::Error>> + Unpin {
    let parts: Vec<Result<Bytes, kube_client::Error>> = parts
        .iter()
        .map(|p| Ok(Bytes::copy_from_slice(p.as_bytes())))
        .collect();
    futures::stream::iter(parts)
}

#[test]
fn event_stream_splits_lines_across_chunks() {
    let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
    let b = r#"{"type":"DELETED","object":{"metadata":{"name":"b","resourceVersion":"2"}}}"#;
    let (a1, a2) = a.split_at(20);
    let joined = format!("\n{b}\n");
    let events: Vec<_> = block_on(
        event_stream::<ConfigMap, _>(chunks(&[a1, a2, &joined, "\n"])).collect::<Vec<_>>(),
    );
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[0], Ok(WatchEvent::Added(_))));
    assert!(matches!(&events[1], Ok(WatchEvent::Deleted(_))));
}

#[test]
fn event_stream_decodes_a_final_line_without_newline_and_drops_a_torn_one() {
    let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
    let events: Vec<_> = block_on(event_stream::<ConfigMap, _>(chunks(&[a])).collect::<Vec<_>>());
    assert_eq!(events.len(), 1);
    let torn = &a[..30];
    let events: Vec<_> =
        block_on(event_stream::<ConfigMap, _>(chunks(&[torn])).collect::<Vec<_>>());
    assert!(events.is_empty());
}

#[test]
fn event_stream_ends_after_error_event() {
    let err = r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"gone"}}"#;
    let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
    let body = format!("{err}\n{a}\n");
    let events: Vec<_> =
        block_on(event_stream::<ConfigMap, _>(chunks(&[&body])).collect::<Vec<_>>());
    assert_eq!(events.len(), 1);
    assert!(matches!(&events[0], Err(e) if e.is_expired()));
}

proptest::proptest! {
    /// However the body is cut into chunks (and with blank lines between
    /// events), the same events come out in the same order.
    #[test]
    fn event_stream_is_independent_of_chunking(
        names in proptest::collection::vec("[a-z]{1,8}", 1..12),
        cuts in proptest::collection::vec(0usize..10_000, 0..20),
        blank_lines in proptest::bool::ANY,
    ) {
        let mut body = String::new();
        for (i, name) in names.iter().enumerate() {
            body.push_str(&format!(
                r#"{{"type":"ADDED","object":{{"metadata":{{"name":"{name}","resourceVersion":"{i}"}}}}}}"#
            ));
            body.push('\n');
            if blank_lines {
                body.push_str("\r\n");
            }
        }
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
        points.push(0);
        points.push(body.len());
        points.sort_unstable();
        points.dedup();
        let parts: Vec<&str> = points.windows(2).map(|w| &body[w[0]..w[1]]).collect();
        let events: Vec<_> = block_on(event_stream::<ConfigMap, _>(chunks(&parts)).collect::<Vec<_>>());
        let got: Vec<String> = events
            .into_iter()
            .map(|e| match e {
                Ok(WatchEvent::Added(cm)) => cm.metadata.name.unwrap_or_default(),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        proptest::prop_assert_eq!(got, names);
    }
}
