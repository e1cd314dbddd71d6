//! Unit tests of the HTTP side of [`ApiListerWatcher`]: URLs and decoding.

use super::*;
use crate::list_watch::ResourceVersionMatch;
use futures::Stream;
use futures::executor::block_on;
use k8s_openapi::api::core::v1::ConfigMap;
use std::time::Duration;

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
        event_stream::<ConfigMap, _>(chunks(&[a1, a2, &joined, "\n"]), usize::MAX)
            .collect::<Vec<_>>(),
    );
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[0], Ok(WatchEvent::Added(_))));
    assert!(matches!(&events[1], Ok(WatchEvent::Deleted(_))));
}

#[test]
fn event_stream_decodes_a_final_line_without_newline_and_drops_a_torn_one() {
    let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
    let events: Vec<_> =
        block_on(event_stream::<ConfigMap, _>(chunks(&[a]), usize::MAX).collect::<Vec<_>>());
    assert_eq!(events.len(), 1);
    let torn = &a[..30];
    let events: Vec<_> =
        block_on(event_stream::<ConfigMap, _>(chunks(&[torn]), usize::MAX).collect::<Vec<_>>());
    assert!(events.is_empty());
}

#[test]
fn event_stream_ends_after_error_event() {
    let err = r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"gone"}}"#;
    let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
    let body = format!("{err}\n{a}\n");
    let events: Vec<_> =
        block_on(event_stream::<ConfigMap, _>(chunks(&[&body]), usize::MAX).collect::<Vec<_>>());
    assert_eq!(events.len(), 1);
    assert!(matches!(&events[0], Err(e) if e.is_expired()));
}

#[test]
fn event_stream_ends_with_oversized_after_a_line_over_the_cap() {
    let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
    let endless = "x".repeat(64);
    let body = format!("{a}\n{endless}");
    let cap = a.len();
    let events: Vec<_> = block_on(
        event_stream::<ConfigMap, _>(chunks(&[&body, &endless, &endless]), cap).collect::<Vec<_>>(),
    );
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(&events[0], Ok(WatchEvent::Added(_))));
    let Err(err) = &events[1] else {
        panic!("{:?}", events[1])
    };
    assert_eq!(
        err.oversized(),
        Some(crate::list_watch::OversizedPart::WatchEvent)
    );
    assert!(
        err.to_string().contains(&format!("limit of {cap} bytes")),
        "{err}"
    );
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
        let events: Vec<_> = block_on(event_stream::<ConfigMap, _>(chunks(&parts), usize::MAX).collect::<Vec<_>>());
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

/// A scripted API server: answers LIST pages by their `continue` token and
/// counts the requests it has seen.
struct Scripted {
    lw: ApiListerWatcher<ConfigMap>,
    urls: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
    count: tokio::sync::watch::Receiver<usize>,
}

fn page(items: &[&str], token: Option<&str>) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|n| format!(r#"{{"metadata":{{"name":"{n}","namespace":"default"}}}}"#))
        .collect();
    let token = token
        .map(|t| format!(r#","continue":"{t}""#))
        .unwrap_or_default();
    format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"5"{token}}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn scripted(first_token: &'static str) -> Scripted {
    use http_body_util::Full;
    let urls = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (tx, count) = tokio::sync::watch::channel(0usize);
    let svc = tower::service_fn({
        let urls = std::sync::Arc::clone(&urls);
        move |req: Request<Body>| {
            let url = req.uri().to_string();
            urls.lock().push(url.clone());
            tx.send_modify(|n| *n += 1);
            let cont = query(&url)
                .into_iter()
                .find(|(k, _)| k == "continue")
                .map(|(_, v)| v);
            let (code, body) = match cont.as_deref() {
                _ if url.contains("watch=true") => (200, String::new()),
                None => (200, page(&["a"], Some(first_token))),
                Some("p2") => (200, page(&["b"], None)),
                Some(_) => (
                    410,
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410,"message":"continue too old"}"#.to_owned(),
                ),
            };
            let response = Response::builder()
                .status(code)
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| e.to_string());
            async move { response }
        }
    });
    let client = Client::new(svc, "default");
    let lw = ApiListerWatcher::new(
        Api::namespaced(client, "default"),
        ListWatchOptions::default(),
    );
    Scripted { lw, urls, count }
}

impl Scripted {
    /// Waits until the server has seen `n` requests.
    async fn requests(&mut self, n: usize) {
        tokio::time::timeout(Duration::from_secs(10), self.count.wait_for(|c| *c >= n))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the server saw {:?}, expected {n} requests",
                    self.urls.lock()
                )
            })
            .expect("the server is gone");
    }

    fn seen(&self) -> Vec<String> {
        self.urls.lock().clone()
    }
}

fn first_page() -> ListRequest {
    ListRequest {
        limit: Some(1),
        resource_version: "0".into(),
        ..ListRequest::default()
    }
}

fn next_page(token: &str) -> ListRequest {
    ListRequest {
        continue_token: Some(token.into()),
        ..first_page()
    }
}

fn names(page: &ListPage<ConfigMap>) -> Vec<&str> {
    page.items
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect()
}

#[tokio::test]
async fn the_next_page_is_requested_before_it_is_asked_for() {
    let mut s = scripted("p2");
    let first = s.lw.list(first_page()).await.unwrap();
    assert_eq!(names(&first), ["a"]);
    assert_eq!(first.continue_token.as_deref(), Some("p2"));
    // Nobody has asked for page 2 yet, but its request is on its way.
    s.requests(2).await;
    let seen = s.seen();
    assert!(
        has(&seen[1], "continue", "p2") && has(&seen[1], "limit", "1"),
        "{seen:?}"
    );
    let second = s.lw.list(next_page("p2")).await.unwrap();
    assert_eq!(names(&second), ["b"]);
    assert_eq!(second.continue_token, None);
    // Page 2 was fetched once, and the last page asks for nothing more.
    assert_eq!(s.seen().len(), 2, "{:?}", s.seen());
    assert!(!s.lw.ahead.is_pending());
}

#[tokio::test]
async fn a_page_asked_for_differently_is_fetched_anew() {
    let mut s = scripted("p2");
    s.lw.list(first_page()).await.unwrap();
    s.requests(2).await;
    let other = ListRequest {
        limit: Some(7),
        ..next_page("p2")
    };
    let second = s.lw.list(other).await.unwrap();
    assert_eq!(names(&second), ["b"]);
    let seen = s.seen();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(has(&seen[2], "limit", "7"), "{seen:?}");
    assert!(!s.lw.ahead.is_pending());
}

#[tokio::test]
async fn an_error_for_the_page_asked_ahead_reaches_the_caller() {
    let mut s = scripted("gone");
    s.lw.list(first_page()).await.unwrap();
    s.requests(2).await;
    let err = s.lw.list(next_page("gone")).await.unwrap_err();
    assert!(err.is_expired(), "{err}");
    assert_eq!(s.seen().len(), 2, "{:?}", s.seen());
}

#[tokio::test]
async fn a_watch_drops_the_page_asked_ahead() {
    let mut s = scripted("p2");
    s.lw.list(first_page()).await.unwrap();
    s.requests(2).await;
    assert!(s.lw.ahead.is_pending());
    let req = WatchRequest {
        resource_version: "5".into(),
        ..WatchRequest::default()
    };
    drop(s.lw.watch(req).await.unwrap());
    assert!(!s.lw.ahead.is_pending());
}

#[tokio::test]
async fn a_clone_has_no_page_asked_ahead() {
    let mut s = scripted("p2");
    s.lw.list(first_page()).await.unwrap();
    s.requests(2).await;
    let clone = s.lw.clone();
    assert!(!clone.ahead.is_pending());
    assert_eq!(names(&clone.list(next_page("p2")).await.unwrap()), ["b"]);
    assert_eq!(s.seen().len(), 3);
}

/// Requests the scripted server behind [`Slow`] has seen, for the decoder to wait on.
static SLOW_SERVER: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// A ConfigMap whose decoding waits (up to 10 s) until the server has seen
/// the request for the next page: it stands for a page whose decoding takes
/// long, and tells whether the next page was asked for meanwhile.
#[derive(Clone, Debug)]
struct Slow(ConfigMap, bool);

impl<'de> serde::Deserialize<'de> for Slow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let cm = <ConfigMap as serde::Deserialize>::deserialize(d)?;
        let (lock, cvar) = &SLOW_SERVER;
        let seen = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (seen, _) = cvar
            .wait_timeout_while(seen, Duration::from_secs(10), |n| *n < 2)
            .unwrap_or_else(|e| e.into_inner());
        Ok(Slow(cm, *seen >= 2))
    }
}

impl Resource for Slow {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "ConfigMap".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "configmaps".into()
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.0.metadata
    }
}

/// On a runtime with a single worker, decoding a page blocks the worker:
/// the request for the next page, spawned from inside the decoding, can
/// only go out if the worker hands its tasks on for that time.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn the_next_page_goes_out_while_a_page_decodes_on_a_single_worker() {
    use http_body_util::Full;
    let svc = tower::service_fn(|req: Request<Body>| {
        let url = req.uri().to_string();
        let (lock, cvar) = &SLOW_SERVER;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        cvar.notify_all();
        let body = if url.contains("continue=") {
            page(&["b"], None)
        } else {
            page(&["a"], Some("p2"))
        };
        let response = Response::builder()
            .status(200)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string());
        async move { response }
    });
    let client = Client::new(svc, "default");
    let lw: ApiListerWatcher<Slow> = ApiListerWatcher::new(
        Api::namespaced(client, "default"),
        ListWatchOptions::default(),
    );
    // On the worker, as a reflector runs (the test's own future does not).
    let (lw, first) = tokio::spawn(async move {
        let first = lw.list(first_page()).await;
        (lw, first)
    })
    .await
    .unwrap();
    let first = first.unwrap();
    assert_eq!(first.items.len(), 1);
    assert!(
        first.items[0].1,
        "page 2 was not asked for while page 1 decoded"
    );
    let second = lw.list(next_page("p2")).await.unwrap();
    assert_eq!(second.items[0].0.metadata.name.as_deref(), Some("b"));
    assert_eq!(*SLOW_SERVER.0.lock().unwrap_or_else(|e| e.into_inner()), 2);
}
