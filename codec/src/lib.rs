//! Kubernetes protobuf for k8s-openapi types, as the API server writes it
//! for built-in kinds (`application/vnd.kubernetes.protobuf`).
//!
//! Three layers, each usable alone:
//!
//! - **The bridge** (`bridge`): every built-in kind's k8s-openapi type
//!   converted field by field to and from its k8s-pb prost message. The
//!   conversion from protobuf moves each value (strings, maps, lists) out of
//!   the message, never copies it. Fields only a newer server sends are
//!   skipped by prost, so decoding tolerates them.
//! - **Envelopes** ([`to_protobuf`], [`from_protobuf`], [`Envelope`]): the
//!   `k8s\0` magic and the `runtime.Unknown` wrapper naming `apiVersion` and
//!   `kind`; lists as `{metadata = 1, items = 2}` messages of their items'
//!   kind.
//! - **Watch streams** ([`watch_frame`], [`FrameReader`], [`WatchMessage`]):
//!   `metav1.WatchEvent` messages, each preceded by its length (4 bytes,
//!   big endian), the object inside in its own envelope.
//!
//! Two ways in: JSON values ([`to_protobuf`], [`from_protobuf`]; what
//! envtest serves from), and typed decoding straight into k8s-openapi
//! types ([`Decoder`]; what informers read with), which can drop
//! `metadata.managedFields` before converting so that their `fieldsV1`
//! (JSON inside the protobuf) is never parsed.
//!
//! ```
//! use informer_codec::{DecodeOptions, Decoder, Envelope};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! let cm = serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings"}, "data": {"mode": "fast"},
//! });
//! let bytes = informer_codec::to_protobuf(&cm)?;
//! let envelope = Envelope::read(&bytes)?;
//! let decoder = Decoder::<ConfigMap>::new().expect("ConfigMap is built in");
//! let typed = decoder.decode(&envelope.raw, DecodeOptions::default())?;
//! assert_eq!(typed.data.unwrap()["mode"], "fast");
//! # Ok::<(), informer_codec::CodecError>(())
//! ```

mod bridge;
#[doc(hidden)]
pub mod facts;
mod frames;
mod kinds;
mod proto;
mod typed;

use serde_json::Value;

pub use frames::{FrameReader, WatchMessage};
pub use proto::Envelope;
pub use typed::{DecodeOptions, Decoder, ListParts, decode_object_meta};

/// The protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every protobuf-encoded object starts with.
pub const MAGIC: &[u8] = proto::MAGIC;

/// Why a body could not be converted between JSON and protobuf.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes do not start with the `k8s\0` magic.
    #[error("the protobuf body does not start with the Kubernetes magic bytes")]
    NoMagic,
    /// The protobuf message is malformed.
    #[error("the protobuf body is not valid: {0}")]
    Protobuf(String),
    /// The JSON form does not fit the kind's type.
    #[error("the object does not fit its kind: {0}")]
    Json(String),
    /// The object carries no `kind`.
    #[error("the object has no kind")]
    NoKind,
    /// The kind has no protobuf form here.
    #[error("no protobuf form for {0}")]
    NotProtobuf(String),
    /// One value cannot be carried in the other form.
    #[error("invalid {what}: {message}")]
    Field {
        /// The type of the value.
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// A built-in object (or list) in the protobuf form the API server sends:
/// `k8s\0`, then a `runtime.Unknown` envelope around the object's message.
///
/// ```
/// let cm = serde_json::json!({
///     "apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "settings"}, "data": {"mode": "fast"},
/// });
/// let bytes = informer_codec::to_protobuf(&cm)?;
/// assert!(bytes.starts_with(b"k8s\0"));
/// assert_eq!(informer_codec::from_protobuf(&bytes)?, cm);
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
pub fn to_protobuf(object: &Value) -> Result<Vec<u8>, CodecError> {
    proto::encode_object(object)
}

/// The JSON form of a protobuf object (or list), `apiVersion` and `kind`
/// taken from its envelope. See [`to_protobuf`] for an example.
pub fn from_protobuf(bytes: &[u8]) -> Result<Value, CodecError> {
    proto::decode_object(bytes)
}

/// One watch event (`{"type": ..., "object": ...}`) as the length-prefixed
/// `WatchEvent` frame of a protobuf watch stream.
///
/// ```
/// let ev = serde_json::json!({"type": "ADDED", "object": {
///     "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}});
/// let frame = informer_codec::watch_frame(&ev)?;
/// let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
/// assert_eq!(len + 4, frame.len());
/// assert_eq!(informer_codec::from_watch_frame(&frame[4..])?, ev);
///
/// // A Namespace's `spec` and `status` are Go structs, always written:
/// // they read back as Go's JSON has them, `{}`.
/// let ns = serde_json::json!({"type": "ADDED", "object": {
///     "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}});
/// let back = informer_codec::from_watch_frame(&informer_codec::watch_frame(&ns)?[4..])?;
/// assert_eq!(back["object"]["spec"], serde_json::json!({}));
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
pub fn watch_frame(event: &Value) -> Result<Vec<u8>, CodecError> {
    proto::encode_watch_event(event)
}

/// A `WatchEvent` message (one frame without its length) back to
/// `{"type", "object"}`. See [`watch_frame`] for an example.
pub fn from_watch_frame(message: &[u8]) -> Result<Value, CodecError> {
    proto::decode_watch_event(message)
}

/// One object's message in the protobuf form of `api_version`'s `kind`,
/// without an envelope: a list item, or what a watch event wraps. A server
/// that keeps this beside each stored object answers every list page
/// ([`encode_list`]) and watch event ([`message_watch_frame`]) by copying
/// bytes, never converting again.
///
/// ```
/// let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "a"}, "data": {"k": "v"}});
/// let message = informer_codec::encode_message("v1", "ConfigMap", &cm)?;
/// let meta = serde_json::json!({"resourceVersion": "9"});
/// let list = informer_codec::encode_list("v1", "ConfigMapList", &meta, [message.as_slice()])?;
/// let back = informer_codec::from_protobuf(&list)?;
/// assert_eq!(back["items"][0]["data"]["k"], "v");
/// assert_eq!(back["metadata"]["resourceVersion"], "9");
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
pub fn encode_message(
    api_version: &str,
    kind: &str,
    object: &Value,
) -> Result<Vec<u8>, CodecError> {
    proto::encode_message(api_version, kind, object)
}

/// A `...List` (`list_kind`) of `api_version` in its enveloped protobuf
/// form, from the list's JSON metadata and its items' messages (see
/// [`encode_message`] for an example).
pub fn encode_list<'a>(
    api_version: &str,
    list_kind: &str,
    list_meta: &Value,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, CodecError> {
    proto::encode_list(api_version, list_kind, list_meta, items)
}

/// The length-prefixed `WatchEvent` frame of `event_type` (`ADDED`,
/// `MODIFIED`, ...) around one object's message of `api_version`'s `kind`
/// (see [`encode_message`]): the same bytes as [`watch_frame`] of the
/// event's JSON form.
///
/// ```
/// let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
/// let message = informer_codec::encode_message("v1", "Namespace", &ns)?;
/// let frame = informer_codec::message_watch_frame("ADDED", "v1", "Namespace", &message)?;
/// let ev = serde_json::json!({"type": "ADDED", "object": ns});
/// assert_eq!(frame, informer_codec::watch_frame(&ev)?);
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
pub fn message_watch_frame(
    event_type: &str,
    api_version: &str,
    kind: &str,
    message: &[u8],
) -> Result<Vec<u8>, CodecError> {
    proto::message_watch_frame(event_type, api_version, kind, message)
}

/// Whether a kind (or a list of it, `...List`) of `api_version` has a
/// protobuf form here: the built-in kinds, `Status`, discovery documents and
/// `meta.k8s.io`'s `PartialObjectMetadata`.
///
/// ```
/// assert!(informer_codec::has_protobuf("v1", "PodList"));
/// assert!(!informer_codec::has_protobuf("example.com/v1", "Widget"));
/// ```
pub fn has_protobuf(api_version: &str, kind: &str) -> bool {
    proto::has_protobuf(api_version, kind)
}

/// The fields only JSON has that the messages of a built-in kind (or a
/// list of it) reach under the Kubernetes version this build selects:
/// k8s-pb's messages (Kubernetes 1.35) lack them, so such a kind is read
/// in JSON ([`has_protobuf`] is `false`, no [`Decoder`]) rather than lose
/// them. Empty for every other kind. Decided when the crate is built, from
/// the generated bridge tables; `docs/protobuf.md` has the matrix.
///
/// ```
/// let lost = informer_codec::json_only_fields("v1", "Pod");
/// assert_eq!(lost.is_empty(), informer_codec::has_protobuf("v1", "Pod"));
/// assert!(informer_codec::json_only_fields("v1", "ConfigMap").is_empty());
/// ```
pub fn json_only_fields(api_version: &str, kind: &str) -> &'static [&'static str] {
    let path = proto::kind_path(api_version, kind).or_else(|| {
        kind.strip_suffix("List")
            .and_then(|k| proto::kind_path(api_version, k))
    });
    path.map_or(&[], bridge::json_only_fields)
}

/// A `PartialObjectMetadataList` of `api_version` (`meta.k8s.io/v1` or
/// `meta.k8s.io/v1beta1`) in protobuf, built straight from JSON objects
/// (each read for its `metadata` only) and the list's JSON metadata.
///
/// ```
/// let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "a"}, "data": {"k": "v"}});
/// let meta = serde_json::json!({"resourceVersion": "9"});
/// let pb = informer_codec::encode_partial_list(&[&cm], &meta, "meta.k8s.io/v1")?;
/// let back = informer_codec::from_protobuf(&pb)?;
/// assert_eq!(back["items"][0]["metadata"]["name"], "a");
/// assert!(back["items"][0].get("data").is_none());
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
pub fn encode_partial_list(
    objects: &[&Value],
    list_meta: &Value,
    api_version: &str,
) -> Result<Vec<u8>, CodecError> {
    proto::encode_partial_list(objects, list_meta, api_version)
}

#[cfg(test)]
mod go_style_tests;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod skew_tests;
#[cfg(test)]
mod tests;
