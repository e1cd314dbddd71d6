//! Protobuf answers from each stored object's cached message: a list page
//! or a watch event of a built-in kind in protobuf copies the message its
//! object keeps (encoded once, the first time any reader asks for
//! protobuf; see `StoredObject::protobuf`) instead of converting the JSON
//! answer again for every request, so protobuf costs the server about
//! what JSON does.

use super::{Answer, PROTOBUF, negotiate};
use crate::resources::objects::read_view;
use crate::resources::registry::ResourceInfo;
use crate::storage::StoredObject;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, header};
use serde_json::Value;

/// The media type of a protobuf watch stream.
pub(crate) const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether answers to `accept` for this resource are whole objects in
/// protobuf (not metadata-only, not a custom resource, not a table), which
/// this module builds from cached messages.
pub(crate) fn wants_protobuf(info: &ResourceInfo, accept: &str) -> bool {
    if info.custom || crate::resources::table::wants_table(accept) {
        return false;
    }
    negotiate(info, accept).is_ok_and(|n| {
        n.encoding == Answer::Protobuf
            && n.metadata.is_none()
            && informer_codec::has_protobuf(&info.api_version(), &info.kind)
    })
}

/// The object's message as a reader of `info` sees it: the cached one,
/// unless the reader sees another view of it (then encoded for this answer
/// alone). `None` when it has no protobuf form (logged once per object).
fn message(obj: &StoredObject, info: &ResourceInfo) -> Option<Bytes> {
    let av = info.api_version();
    let encode = |v: &Value| {
        #[cfg(test)]
        tests::ENCODED.with(|n| n.set(n.get() + 1));
        informer_codec::encode_message(&av, &info.kind, v)
            .inspect_err(|e| tracing::warn!("object not encoded as protobuf: {e}"))
            .ok()
            .map(Bytes::from)
    };
    match read_view(obj, info) {
        Some(view) => encode(&view),
        None => obj.protobuf.get_or_init(|| encode(&obj.value)).clone(),
    }
}

/// A list page in protobuf, when `accept` asks for whole objects in
/// protobuf: the list's metadata (`meta`) and the objects' cached
/// messages. `None` (the JSON answer is built instead) otherwise, or when
/// an object has no protobuf form.
pub(crate) fn list(
    info: &ResourceInfo,
    accept: &str,
    objects: &[&std::sync::Arc<StoredObject>],
    meta: &Value,
) -> Option<Response> {
    if !wants_protobuf(info, accept) {
        return None;
    }
    let messages: Vec<Bytes> = objects
        .iter()
        .map(|o| message(o, info))
        .collect::<Option<_>>()?;
    let list_kind = format!("{}List", info.kind);
    let body = informer_codec::encode_list(
        &info.api_version(),
        &list_kind,
        meta,
        messages.iter().map(|m| m.as_ref()),
    )
    .inspect_err(|e| tracing::warn!("list not built as protobuf: {e}"))
    .ok()?;
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROTOBUF));
    Some(resp)
}

/// The watch frame of `event_type` for `obj` from its cached message
/// (`None`: it has no protobuf form).
pub(crate) fn watch_event(
    event_type: &str,
    obj: &StoredObject,
    info: &ResourceInfo,
) -> Option<Bytes> {
    let m = message(obj, info)?;
    informer_codec::message_watch_frame(event_type, &info.api_version(), &info.kind, &m)
        .inspect_err(|e| tracing::warn!("watch event not sent as protobuf: {e}"))
        .ok()
        .map(Bytes::from)
}

/// A JSON watch line (`{"type", "object"}` and a newline) as a protobuf
/// frame: bookmarks, errors and lines a fault has spoiled. `None` (the
/// line is dropped, with a warning) when it does not convert, as the
/// re-encoding stream does.
pub(crate) fn line_as_frame(line: &[u8]) -> Option<Bytes> {
    serde_json::from_slice::<Value>(line)
        .map_err(|e| informer_codec::CodecError::Json(e.to_string()))
        .and_then(|ev| informer_codec::watch_frame(&ev))
        .inspect_err(|e| tracing::warn!("watch event not sent as protobuf: {e}"))
        .ok()
        .map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::Arc;

    thread_local! {
        /// Objects encoded to protobuf on this thread.
        pub(super) static ENCODED: Cell<usize> = const { Cell::new(0) };
    }

    const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

    fn info() -> ResourceInfo {
        crate::resources::registry::Registry::with_builtins()
            .get("", "v1", "configmaps")
            .map(|i| (*i).clone())
            .expect("configmaps are built in")
    }

    fn stored(name: &str, rev: u64) -> Arc<StoredObject> {
        let value = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": rev.to_string()},
            "data": {"k": name}});
        let json = Bytes::from(value.to_string());
        Arc::new(StoredObject::from_parts(value, json, rev))
    }

    async fn body(resp: Response) -> Bytes {
        axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("an in-memory body")
    }

    #[tokio::test]
    async fn each_object_is_encoded_once_for_every_list_and_watch_event() {
        let info = info();
        let objects = [stored("a", 2), stored("b", 3)];
        let refs: Vec<&Arc<StoredObject>> = objects.iter().collect();
        let meta = serde_json::json!({"resourceVersion": "3"});
        let first = list(&info, ACCEPT, &refs, &meta).expect("a protobuf list");
        let first = body(first).await;
        let second = body(list(&info, ACCEPT, &refs, &meta).expect("a protobuf list")).await;
        let frame = watch_event("MODIFIED", &objects[0], &info).expect("a frame");
        assert_eq!(ENCODED.with(Cell::get), 2, "one encoding per object");
        // The same bytes as converting the JSON answers.
        assert_eq!(first, second);
        let items: Vec<Value> = objects.iter().map(|o| o.value.clone()).collect();
        let json_list = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": meta, "items": items});
        assert_eq!(
            first,
            informer_codec::to_protobuf(&json_list).expect("encodes")
        );
        let ev = serde_json::json!({"type": "MODIFIED", "object": objects[0].value});
        assert_eq!(frame, informer_codec::watch_frame(&ev).expect("encodes"));
    }

    #[test]
    fn json_tables_metadata_and_custom_resources_are_not_built_here() {
        let mut info = info();
        assert!(wants_protobuf(&info, ACCEPT));
        assert!(!wants_protobuf(&info, "application/json"));
        let meta_only =
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert!(!wants_protobuf(&info, meta_only));
        info.custom = true;
        assert!(!wants_protobuf(&info, ACCEPT));
    }
}
