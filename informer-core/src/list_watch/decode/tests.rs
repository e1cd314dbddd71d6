//! Unit tests of decoding LIST pages and watch events.

use super::*;
use k8s_openapi::api::core::v1::ConfigMap;

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

thread_local! {
    static SEEN: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn seen(what: impl Into<String>) {
    SEEN.with(|s| s.borrow_mut().push(what.into()));
}

fn take_seen() -> Vec<String> {
    SEEN.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// An item that notes when it is decoded.
#[derive(Debug)]
struct Probe;

impl<'de> Deserialize<'de> for Probe {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        seen("item");
        Ok(Probe)
    }
}

#[test]
fn the_continue_token_is_handed_on_before_the_items_are_decoded() {
    take_seen();
    let body = br#"{"kind":"ConfigMapList","metadata":{"resourceVersion":"9","continue":"p2"},"items":[{},{}]}"#;
    let page = decode_list_then::<Probe>(body, |token| seen(format!("continue {token}"))).unwrap();
    assert_eq!(take_seen(), ["continue p2", "item", "item"]);
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.continue_token.as_deref(), Some("p2"));
    assert_eq!(page.resource_version, "9");

    // Metadata after the items: still handed on, once, after them.
    let body = br#"{"items":[{}],"metadata":{"continue":"p3"}}"#;
    decode_list_then::<Probe>(body, |token| seen(format!("continue {token}"))).unwrap();
    assert_eq!(take_seen(), ["item", "continue p3"]);
}

#[test]
fn no_continue_token_is_handed_on_for_the_last_page() {
    take_seen();
    for body in [
        &br#"{"metadata":{"resourceVersion":"9"},"items":[]}"#[..],
        br#"{"metadata":{"continue":""},"items":[]}"#,
        br#"{"metadata":null,"items":[]}"#,
        br#"{"items":[]}"#,
    ] {
        decode_list_then::<Probe>(body, |token| seen(format!("continue {token}"))).unwrap();
    }
    assert!(take_seen().is_empty());
}

#[test]
fn a_page_with_an_undecodable_item_hands_its_token_on_once() {
    let body = br#"{"metadata":{"continue":"p2"},
        "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"data":{"k":7}}]}"#;
    let mut tokens = Vec::new();
    let page = decode_list_then::<ConfigMap>(body, |t| tokens.push(t.to_owned())).unwrap();
    assert_eq!(tokens, ["p2"]);
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.undecodable.len(), 1);
}

#[test]
fn trailing_characters_after_a_list_are_an_error() {
    assert!(matches!(
        decode_list::<ConfigMap>(br#"{"metadata":{},"items":[]} x"#),
        Err(ListWatchError::DecodeList(_))
    ));
}
