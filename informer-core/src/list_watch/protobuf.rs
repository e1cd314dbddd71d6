//! Protobuf lists and watches of built-in kinds, and the switch back to
//! JSON.
//!
//! For a `K` that is a built-in kind's k8s-openapi type (one
//! [`informer_codec::Decoder`] knows) or a metadata-only `K`, requests ask
//! for `application/vnd.kubernetes.protobuf` with JSON as the second
//! choice, as client-go's core components do. Custom resources and
//! [`DynamicObject`](kube_core::DynamicObject)s stay JSON (the API server
//! serves custom resources in JSON only). The answer's `Content-Type`
//! decides how it is read. A server that refuses protobuf (406/415),
//! answers in JSON anyway, or sends a protobuf body that does not decode
//! makes the lister-watcher ask for JSON from then on: once, logged, and
//! counted in [`InformerMetrics::protobuf_fallback`]. What a protobuf
//! answer becomes (a [`ListPage`] or [`WatchEvent`]s) is exactly what the
//! JSON answer would: the reflector, selectors, bookmarks, relists and
//! transforms are the same code for both.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use informer_codec::{
    CodecError, DecodeOptions, Decoder, Envelope, ListParts, WatchMessage, decode_object_meta,
};
use kube_core::Status;
use serde::de::DeserializeOwned;

use super::{Bookmark, ListPage, ListWatchError, WatchEvent};
use crate::metrics::InformerMetrics;

/// The protobuf media type.
pub(super) const PROTOBUF: &str = informer_codec::PROTOBUF;

/// `Accept` of a LIST or WATCH of a built-in kind: protobuf, else JSON.
pub const PROTOBUF_ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// `Accept` of a metadata-only LIST in protobuf, else JSON.
pub(super) const PROTOBUF_METADATA_LIST_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// `Accept` of a metadata-only WATCH in protobuf, else JSON.
pub(super) const PROTOBUF_METADATA_WATCH_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// How protobuf messages become `K`.
pub(super) enum Target<K> {
    /// A built-in kind's k8s-openapi type.
    Typed(Decoder<K>),
    /// A metadata-only type: each message's `ObjectMeta`.
    Metadata,
}

impl<K> Clone for Target<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Typed(d) => Self::Typed(*d),
            Self::Metadata => Self::Metadata,
        }
    }
}

impl<K: DeserializeOwned + 'static> Target<K> {
    /// The target of `K` (`None`: `K` is read from JSON only).
    pub(super) fn of(metadata: bool) -> Option<Self> {
        if metadata {
            return Some(Self::Metadata);
        }
        Decoder::<K>::new().map(Self::Typed)
    }

    /// One object's message (of type `api_version`/`kind`) as `K`.
    fn decode(
        &self,
        message: &[u8],
        api_version: &str,
        kind: &str,
        opts: DecodeOptions,
    ) -> Result<K, CodecError> {
        match self {
            Self::Typed(d) => d.decode(message, opts),
            Self::Metadata => {
                let meta = decode_object_meta(message, opts)?;
                let meta =
                    serde_json::to_value(meta).map_err(|e| CodecError::Json(e.to_string()))?;
                let object = serde_json::json!({
                    "apiVersion": api_version,
                    "kind": kind,
                    "metadata": meta,
                });
                K::deserialize(object).map_err(|e| CodecError::Json(e.to_string()))
            }
        }
    }
}

/// Whether a lister-watcher asks for protobuf, and whether it gave up on it.
#[derive(Default)]
pub(super) struct ProtobufMode {
    /// Protobuf is possible for `K` and switched on.
    wanted: bool,
    /// The server refused it, answered JSON, or sent what did not decode.
    refused: AtomicBool,
    /// Drop `managedFields` as objects are decoded (the informer's hint).
    strip_managed_fields: AtomicBool,
    /// Where the fallback is counted.
    pub(super) metrics: Option<Arc<dyn InformerMetrics>>,
}

impl ProtobufMode {
    pub(super) fn new(wanted: bool) -> Self {
        Self {
            wanted,
            ..Self::default()
        }
    }

    /// The same wish, not yet refused (for a clone of the lister-watcher).
    pub(super) fn fresh(&self) -> Self {
        Self {
            wanted: self.wanted,
            refused: AtomicBool::new(false),
            strip_managed_fields: AtomicBool::new(self.strips()),
            metrics: self.metrics.clone(),
        }
    }

    pub(super) fn set_wanted(&mut self, wanted: bool) {
        self.wanted = wanted;
    }

    /// Whether requests ask for protobuf (wanted and not given up).
    pub(super) fn active(&self) -> bool {
        self.wanted && !self.refused.load(Ordering::Relaxed)
    }

    /// Whether the lister-watcher gave up on protobuf.
    pub(super) fn was_refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// Whether objects lose `managedFields` as they are decoded.
    pub(super) fn strips(&self) -> bool {
        self.strip_managed_fields.load(Ordering::Relaxed)
    }

    pub(super) fn set_strip(&self, strip: bool) {
        self.strip_managed_fields.store(strip, Ordering::Relaxed);
    }

    pub(super) fn options(&self) -> DecodeOptions {
        DecodeOptions {
            strip_managed_fields: self.strips(),
        }
    }

    /// Switches to JSON for good (once: logged and counted).
    pub(super) fn give_up(&self, name: &str, reason: &'static str, detail: &dyn std::fmt::Display) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                informer = %name,
                reason,
                detail = %detail,
                "protobuf is not usable for this informer; reading JSON from now on"
            );
            if let Some(metrics) = &self.metrics {
                metrics.protobuf_fallback(name, reason);
            }
        }
    }

    /// Whether `err` is the server refusing a protobuf request (one sent
    /// with `accept`); if so, switches to JSON and the caller asks again.
    pub(super) fn refused_by(&self, accept: &str, err: &ListWatchError, name: &str) -> bool {
        if !accept.starts_with(PROTOBUF) || !matches!(err.code(), Some(406 | 415)) {
            return false;
        }
        self.give_up(name, "refused", err);
        true
    }
}

/// Whether a `Content-Type` is protobuf.
pub(super) fn is_protobuf(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.trim_start().starts_with(PROTOBUF))
}

/// A protobuf LIST answer as a page of `K`, handing the continue token to
/// `on_continue` before the items are decoded. Any item that does not
/// decode fails the whole page (the caller reads it again in JSON, which
/// then reports exactly what JSON reports).
pub(super) fn decode_list_then<K: DeserializeOwned + 'static>(
    body: &[u8],
    target: &Target<K>,
    opts: DecodeOptions,
    on_continue: impl FnOnce(&str),
) -> Result<ListPage<K>, CodecError> {
    let envelope = Envelope::read(body)?;
    let parts = ListParts::read(&envelope)?;
    let token = parts.continue_token.filter(|c| !c.is_empty());
    if let Some(token) = token.as_deref() {
        on_continue(token);
    }
    let item_kind = envelope.kind.strip_suffix("List").unwrap_or(&envelope.kind);
    let items = parts
        .items
        .iter()
        .map(|m| target.decode(m, &envelope.api_version, item_kind, opts))
        .collect::<Result<Vec<K>, _>>()?;
    Ok(ListPage {
        items,
        resource_version: parts.resource_version.unwrap_or_default(),
        continue_token: token,
        undecodable: Vec::new(),
    })
}

/// One protobuf watch frame as a watch event: `Err(Ok(_))` for a server
/// `ERROR` event (the stream ends), `Err(Err(_))` when it does not decode.
pub(super) fn decode_event<K: DeserializeOwned + 'static>(
    frame: &[u8],
    target: &Target<K>,
    opts: DecodeOptions,
) -> Result<WatchEvent<K>, Result<ListWatchError, CodecError>> {
    let msg = WatchMessage::read(frame).map_err(Err)?;
    let obj = msg.object;
    let decode = |o: &Envelope| target.decode(&o.raw, &o.api_version, &o.kind, opts);
    match msg.event_type.as_str() {
        "ADDED" => decode(&obj).map(WatchEvent::Added).map_err(Err),
        "MODIFIED" => decode(&obj).map(WatchEvent::Modified).map_err(Err),
        "DELETED" => decode(&obj).map(WatchEvent::Deleted).map_err(Err),
        "BOOKMARK" => {
            let meta = decode_object_meta(&obj.raw, DecodeOptions::default()).map_err(Err)?;
            Ok(WatchEvent::Bookmark(Bookmark {
                resource_version: meta.resource_version.unwrap_or_default(),
                annotations: meta.annotations.unwrap_or_default(),
            }))
        }
        "ERROR" => Err(Ok(api_error(status_of(obj).map_err(Err)?))),
        other => Err(Err(CodecError::Protobuf(format!(
            "unknown watch event type {other:?}"
        )))),
    }
}

/// A `Status` in protobuf (an error answer or an `ERROR` event's object).
pub(super) fn status_of(envelope: Envelope) -> Result<Status, CodecError> {
    let v = envelope.into_json()?;
    serde_json::from_value(v).map_err(|e| CodecError::Json(e.to_string()))
}

fn api_error(status: Status) -> ListWatchError {
    ListWatchError::Api {
        status: Box::new(status),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests;
