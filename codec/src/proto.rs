//! The protobuf wire form of whole objects as the API server writes it: the
//! `k8s\0` magic, then a `runtime.Unknown` envelope naming the object's
//! `apiVersion` and `kind` around the object's message; lists as
//! `{metadata = 1, items = 2}` messages of their items' kind; watch events
//! as `metav1.WatchEvent` messages, each framed by its length (4 bytes, big
//! endian), with the object inside in its own envelope. Which kinds have a
//! protobuf form is the table in this module.

use super::CodecError;
use super::bridge::Conv;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ObjectMeta};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime as pb_runtime;
use prost::Message;
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
use serde_json::Value;

/// The four bytes every protobuf-encoded object starts with.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

type Encode = fn(&Value) -> Result<Vec<u8>, CodecError>;
type Decode = fn(&[u8]) -> Result<Value, CodecError>;

/// How one kind's message is written and read.
#[derive(Clone, Copy)]
struct KindCodec {
    encode: Encode,
    decode: Decode,
}

fn encode_as<O, P>(v: &Value) -> Result<Vec<u8>, CodecError>
where
    O: serde::de::DeserializeOwned + Conv<P>,
    P: Message,
{
    let o = O::deserialize(v).map_err(|e| CodecError::Json(e.to_string()))?;
    Ok(o.to_pb().encode_to_vec())
}

fn decode_as<O, P>(b: &[u8]) -> Result<Value, CodecError>
where
    O: serde::Serialize + Conv<P>,
    P: Message + Default,
{
    let p = P::decode(b).map_err(|e| CodecError::Protobuf(e.to_string()))?;
    serde_json::to_value(O::from_pb(p)?).map_err(|e| CodecError::Json(e.to_string()))
}

macro_rules! codecs {
    (
        listed { $($av:literal $kind:literal => $($path:ident)::+;)* }
        other { $($oav:literal $okind:literal => $($opath:ident)::+;)* }
    ) => {
        /// The codec of a built-in kind (`None`: JSON only, or its
        /// messages lack fields this version's JSON has).
        fn kind_codec(api_version: &str, kind: &str) -> Option<KindCodec> {
            match (api_version, kind) {
                $(($av, $kind) if crate::bridge::json_only_fields(stringify!($($path)::+)).is_empty() => Some(KindCodec {
                    encode: encode_as::<k8s_openapi::$($path)::+, k8s_pb::$($path)::+>,
                    decode: decode_as::<k8s_openapi::$($path)::+, k8s_pb::$($path)::+>,
                }),)*
                $(($oav, $okind) if crate::bridge::json_only_fields(stringify!($($opath)::+)).is_empty() => Some(KindCodec {
                    encode: encode_as::<k8s_openapi::$($opath)::+, k8s_pb::$($opath)::+>,
                    decode: decode_as::<k8s_openapi::$($opath)::+, k8s_pb::$($opath)::+>,
                }),)*
                // Clients name the options' version as they like.
                (_, "DeleteOptions") => Some(KindCodec {
                    encode: encode_as::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions, pb_meta::DeleteOptions>,
                    decode: decode_as::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions, pb_meta::DeleteOptions>,
                }),
                _ => None,
            }
        }
    };
}

crate::kinds::builtin_kinds!(codecs);

macro_rules! kind_paths {
    (
        listed { $($av:literal $kind:literal => $($path:ident)::+;)* }
        other { $($oav:literal $okind:literal => $($opath:ident)::+;)* }
    ) => {
        /// The k8s-openapi path of a built-in kind (`api::core::v1::Pod`).
        pub(crate) fn kind_path(api_version: &str, kind: &str) -> Option<&'static str> {
            match (api_version, kind) {
                $(($av, $kind) => Some(stringify!($($path)::+)),)*
                $(($oav, $okind) => Some(stringify!($($opath)::+)),)*
                _ => None,
            }
        }
    };
}

crate::kinds::builtin_kinds!(kind_paths);

/// `PartialObjectMetadata`: an object's metadata alone (metadata-only
/// answers), a message of one field, the `ObjectMeta`.
fn encode_partial(v: &Value) -> Result<Vec<u8>, CodecError> {
    use serde::Deserialize;
    let meta = match v.get("metadata") {
        Some(m) => ObjectMeta::deserialize(m).map_err(|e| CodecError::Json(e.to_string()))?,
        None => ObjectMeta::default(),
    };
    let p = pb_meta::PartialObjectMetadata {
        metadata: Some(meta.to_pb()),
    };
    Ok(p.encode_to_vec())
}

/// A `PartialObjectMetadataList` of `api_version` straight from objects
/// (each read for its `metadata` only) and the list's metadata.
pub(crate) fn encode_partial_list(
    objects: &[&Value],
    list_meta: &Value,
    api_version: &str,
) -> Result<Vec<u8>, CodecError> {
    use serde::Deserialize;
    let kind = "PartialObjectMetadataList";
    let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta::deserialize(list_meta)
        .map_err(|e| CodecError::Json(e.to_string()))?;
    let (meta_tag, items_tag) = list_tags(api_version, kind);
    let mut raw = Vec::new();
    put_bytes(meta_tag, &meta.to_pb().encode_to_vec(), &mut raw);
    for o in objects {
        put_bytes(items_tag, &encode_partial(o)?, &mut raw);
    }
    Ok(envelope(api_version, kind, raw))
}

fn decode_partial(b: &[u8]) -> Result<Value, CodecError> {
    let p = pb_meta::PartialObjectMetadata::decode(b)
        .map_err(|e| CodecError::Protobuf(e.to_string()))?;
    let meta = ObjectMeta::from_pb(p.metadata.unwrap_or_default())?;
    let meta = serde_json::to_value(meta).map_err(|e| CodecError::Json(e.to_string()))?;
    Ok(serde_json::json!({ "metadata": meta }))
}

/// The codec of a kind: the built-in kinds' table, and the metadata-only
/// kinds of `meta.k8s.io`.
fn codec_of(api_version: &str, kind: &str) -> Option<KindCodec> {
    match (api_version, kind) {
        ("meta.k8s.io/v1" | "meta.k8s.io/v1beta1", "PartialObjectMetadata") => Some(KindCodec {
            encode: encode_partial,
            decode: decode_partial,
        }),
        _ => kind_codec(api_version, kind),
    }
}

/// The field numbers of a list message's `metadata` and `items`:
/// `meta.k8s.io/v1beta1`'s `PartialObjectMetadataList` has them the other
/// way round.
pub(crate) fn list_tags(api_version: &str, kind: &str) -> (u32, u32) {
    match (api_version, kind) {
        ("meta.k8s.io/v1beta1", "PartialObjectMetadataList") => (2, 1),
        _ => (1, 2),
    }
}

/// Whether a kind (or a list of it) has a protobuf form.
pub(crate) fn has_protobuf(api_version: &str, kind: &str) -> bool {
    codec_of(api_version, kind).is_some()
        || kind
            .strip_suffix("List")
            .is_some_and(|k| codec_of(api_version, k).is_some())
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = pb_runtime::Unknown {
        type_meta: Some(pb_runtime::TypeMeta {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = MAGIC.to_vec();
    unknown.encode(&mut out).unwrap_or_default();
    out
}

fn type_of(v: &Value) -> Result<(&str, &str), CodecError> {
    let kind = v["kind"].as_str().unwrap_or("");
    let av = match v["apiVersion"].as_str() {
        // `/api` answers APIVersions without an apiVersion in JSON; its
        // protobuf envelope names the version its type is registered in.
        None if kind == "APIVersions" => "v1",
        av => av.unwrap_or(""),
    };
    if kind.is_empty() {
        return Err(CodecError::NoKind);
    }
    Ok((av, kind))
}

fn put_bytes(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// A JSON object (or list of objects) of a kind with a protobuf form, in
/// its enveloped protobuf form.
pub(crate) fn encode_object(v: &Value) -> Result<Vec<u8>, CodecError> {
    let (av, kind) = type_of(v)?;
    if let Some(c) = codec_of(av, kind) {
        return Ok(envelope(av, kind, (c.encode)(v)?));
    }
    let item = kind.strip_suffix("List").and_then(|k| codec_of(av, k));
    let Some(c) = item else {
        return Err(CodecError::NotProtobuf(format!("{av}, Kind={kind}")));
    };
    let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta =
        serde_json::from_value(v["metadata"].clone())
            .map_err(|e| CodecError::Json(e.to_string()))?;
    let (meta_tag, items_tag) = list_tags(av, kind);
    let mut raw = Vec::new();
    put_bytes(meta_tag, &meta.to_pb().encode_to_vec(), &mut raw);
    let item_kind = &kind[..kind.len() - 4];
    for it in v["items"].as_array().into_iter().flatten() {
        let mut it = it.clone();
        // Items of a list response carry no type of their own in JSON either.
        if let Some(m) = it.as_object_mut() {
            m.insert("apiVersion".into(), av.into());
            m.insert("kind".into(), item_kind.into());
        }
        put_bytes(items_tag, &(c.encode)(&it)?, &mut raw);
    }
    Ok(envelope(av, kind, raw))
}

/// The `runtime.Unknown` envelope of a protobuf object or list: its type
/// and its message.
///
/// ```
/// let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
/// let e = informer_codec::Envelope::read(&informer_codec::to_protobuf(&ns)?)?;
/// assert_eq!((e.api_version.as_str(), e.kind.as_str()), ("v1", "Namespace"));
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    /// The `apiVersion` of the message.
    pub api_version: String,
    /// The `kind` of the message (`...List` for a list).
    pub kind: String,
    /// The message itself.
    pub raw: Vec<u8>,
}

impl Envelope {
    /// Reads `k8s\0` and the envelope after it; fields a newer server adds
    /// to the envelope are skipped.
    pub fn read(bytes: &[u8]) -> Result<Self, CodecError> {
        let body = bytes.strip_prefix(MAGIC).ok_or(CodecError::NoMagic)?;
        let unknown =
            pb_runtime::Unknown::decode(body).map_err(|e| CodecError::Protobuf(e.to_string()))?;
        let tm = unknown.type_meta.unwrap_or_default();
        Ok(Self {
            api_version: tm.api_version.unwrap_or_default(),
            kind: tm.kind.unwrap_or_default(),
            raw: unknown.raw.unwrap_or_default(),
        })
    }

    /// The JSON form of the message (a kind or list with a protobuf form:
    /// see [`has_protobuf`](crate::has_protobuf)), `apiVersion` and `kind`
    /// set from the envelope: how a `Status` in protobuf is read.
    ///
    /// ```
    /// let status = serde_json::json!({"apiVersion": "v1", "kind": "Status",
    ///     "metadata": {}, "status": "Failure", "reason": "Expired", "code": 410});
    /// let e = informer_codec::Envelope::read(&informer_codec::to_protobuf(&status)?)?;
    /// assert_eq!(e.into_json()?["code"], 410);
    /// # Ok::<(), informer_codec::CodecError>(())
    /// ```
    pub fn into_json(self) -> Result<Value, CodecError> {
        envelope_to_json(self)
    }
}

/// An enveloped protobuf object (or list) back to its JSON form, with
/// `apiVersion` and `kind` set from the envelope.
pub(crate) fn decode_object(b: &[u8]) -> Result<Value, CodecError> {
    Envelope::read(b)?.into_json()
}

fn envelope_to_json(envelope: Envelope) -> Result<Value, CodecError> {
    let Envelope {
        api_version: av,
        kind,
        raw,
    } = envelope;
    let mut v = if let Some(c) = codec_of(&av, &kind) {
        (c.decode)(&raw)?
    } else if let Some(c) = kind.strip_suffix("List").and_then(|k| codec_of(&av, k)) {
        let mut list = decode_list(&raw, c, list_tags(&av, &kind))?;
        if av.starts_with("meta.k8s.io/") {
            // A metadata-only list's items carry their type in JSON.
            for it in list["items"].as_array_mut().into_iter().flatten() {
                it["apiVersion"] = av.as_str().into();
                it["kind"] = "PartialObjectMetadata".into();
            }
        }
        list
    } else {
        return Err(CodecError::NotProtobuf(format!("{av}, Kind={kind}")));
    };
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), av.into());
        m.insert("kind".into(), kind.into());
    }
    Ok(v)
}

fn decode_list(
    mut raw: &[u8],
    c: KindCodec,
    (meta_tag, items_tag): (u32, u32),
) -> Result<Value, CodecError> {
    let bad = |e: prost::DecodeError| CodecError::Protobuf(e.to_string());
    let mut meta = Value::Object(Default::default());
    let mut items = Vec::new();
    while !raw.is_empty() {
        let (tag, wire) = decode_key(&mut raw).map_err(bad)?;
        if wire != WireType::LengthDelimited {
            return Err(CodecError::Protobuf(format!(
                "list field {tag} is not a message"
            )));
        }
        let len = usize::try_from(decode_varint(&mut raw).map_err(bad)?).unwrap_or(usize::MAX);
        let (field, rest) = raw
            .split_at_checked(len)
            .ok_or_else(|| CodecError::Protobuf("list field runs past the end".into()))?;
        raw = rest;
        match tag {
            t if t == meta_tag => {
                let m = pb_meta::ListMeta::decode(field).map_err(bad)?;
                let m = k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta::from_pb(m)?;
                meta = serde_json::to_value(m).map_err(|e| CodecError::Json(e.to_string()))?;
            }
            // Items carry their type, as in envtest's JSON lists.
            t if t == items_tag => items.push((c.decode)(field)?),
            _ => {}
        }
    }
    Ok(serde_json::json!({"metadata": meta, "items": items}))
}

/// One object's message (no envelope) in the form of `api_version`'s
/// `kind`: what a list item is, and what a watch event's envelope wraps.
pub(crate) fn encode_message(
    api_version: &str,
    kind: &str,
    object: &Value,
) -> Result<Vec<u8>, CodecError> {
    let c = codec_of(api_version, kind)
        .ok_or_else(|| CodecError::NotProtobuf(format!("{api_version}, Kind={kind}")))?;
    (c.encode)(object)
}

/// A `...List` of `api_version` from its JSON metadata and its items'
/// messages, already encoded (see [`encode_message`]), in their order.
pub(crate) fn encode_list<'a>(
    api_version: &str,
    list_kind: &str,
    list_meta: &Value,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, CodecError> {
    use serde::Deserialize;
    if !has_protobuf(api_version, list_kind) {
        return Err(CodecError::NotProtobuf(format!(
            "{api_version}, Kind={list_kind}"
        )));
    }
    let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta::deserialize(list_meta)
        .map_err(|e| CodecError::Json(e.to_string()))?;
    let (meta_tag, items_tag) = list_tags(api_version, list_kind);
    let mut raw = Vec::new();
    put_bytes(meta_tag, &meta.to_pb().encode_to_vec(), &mut raw);
    for item in items {
        put_bytes(items_tag, item, &mut raw);
    }
    Ok(envelope(api_version, list_kind, raw))
}

/// A length-prefixed `WatchEvent` frame of `event_type` around one
/// object's message, already encoded (see [`encode_message`]).
pub(crate) fn message_watch_frame(
    event_type: &str,
    api_version: &str,
    kind: &str,
    message: &[u8],
) -> Result<Vec<u8>, CodecError> {
    frame(
        Some(event_type),
        envelope(api_version, kind, message.to_vec()),
    )
}

fn frame(event_type: Option<&str>, object: Vec<u8>) -> Result<Vec<u8>, CodecError> {
    let ev = pb_meta::WatchEvent {
        r#type: event_type.map(str::to_string),
        object: Some(pb_runtime::RawExtension { raw: Some(object) }),
    };
    let msg = ev.encode_to_vec();
    let len = u32::try_from(msg.len())
        .map_err(|_| CodecError::Protobuf("watch event larger than 4 GiB".into()))?;
    let mut out = Vec::with_capacity(msg.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&msg);
    Ok(out)
}

/// One watch event (`{"type", "object"}`) as a length-prefixed
/// `WatchEvent` frame.
pub(crate) fn encode_watch_event(event: &Value) -> Result<Vec<u8>, CodecError> {
    let object = encode_object(&event["object"])?;
    frame(event["type"].as_str(), object)
}

/// One `WatchEvent` message (without its length prefix) back to
/// `{"type", "object"}`.
pub(crate) fn decode_watch_event(msg: &[u8]) -> Result<Value, CodecError> {
    let ev = pb_meta::WatchEvent::decode(msg).map_err(|e| CodecError::Protobuf(e.to_string()))?;
    let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
    Ok(serde_json::json!({"type": ev.r#type, "object": decode_object(&raw)?}))
}

/// Embedded JSON as bytes: `null` is absent.
fn json_bytes(v: &serde_json::Value) -> Option<Vec<u8>> {
    (!v.is_null()).then(|| v.to_string().into_bytes())
}

/// Bytes of an embedded object: JSON, or a whole protobuf object (its
/// `k8s\0` envelope) as a client that speaks protobuf sends it.
fn embedded(raw: Option<Vec<u8>>, what: &'static str) -> Result<serde_json::Value, CodecError> {
    match raw {
        None => Ok(serde_json::Value::Null),
        Some(b) if b.is_empty() => Ok(serde_json::Value::Null),
        Some(b) if b.starts_with(MAGIC) => decode_object(&b),
        Some(b) => serde_json::from_slice(&b).map_err(|e| CodecError::Field {
            what,
            message: e.to_string(),
        }),
    }
}

/// A non-pointer `runtime.RawExtension` is written as an empty message
/// when it holds nothing, which Go's JSON writes as `null`.
impl super::bridge::GoZero for pb_runtime::RawExtension {
    fn go_zero() -> Self {
        Self { raw: None }
    }
    fn is_go_zero(&self) -> bool {
        self.raw.as_deref().is_none_or(<[u8]>::is_empty)
    }
}

impl Conv<pb_runtime::RawExtension> for RawExtension {
    fn to_pb(&self) -> pb_runtime::RawExtension {
        pb_runtime::RawExtension {
            raw: json_bytes(&self.0),
        }
    }
    fn from_pb(p: pb_runtime::RawExtension) -> Result<Self, CodecError> {
        embedded(p.raw, "RawExtension").map(RawExtension)
    }
}

impl Conv<pb_meta::FieldsV1> for FieldsV1 {
    fn to_pb(&self) -> pb_meta::FieldsV1 {
        pb_meta::FieldsV1 {
            raw: json_bytes(&self.0),
        }
    }
    fn from_pb(p: pb_meta::FieldsV1) -> Result<Self, CodecError> {
        embedded(p.raw, "FieldsV1").map(FieldsV1)
    }
}
