//! Typed decoding: a built-in kind's protobuf message straight into its
//! k8s-openapi type (prost into k8s-pb, then moved into k8s-openapi by the
//! bridge), with `metadata.managedFields` dropped before the conversion
//! when asked, so that their `fieldsV1` (JSON inside the protobuf) is never
//! parsed. Lists are split into their metadata and their items' messages,
//! so a reader can act on the continue token before it decodes the items.

use std::any::{Any, TypeId};
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use prost::Message;
use prost::encoding::{WireType, decode_key, decode_varint};

use crate::CodecError;
use crate::bridge::Conv;
use crate::proto::list_tags;

/// What a typed decode does beside converting.
///
/// ```
/// let opts = informer_codec::DecodeOptions { strip_managed_fields: true };
/// assert!(opts.strip_managed_fields);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Drop `metadata.managedFields` before converting (they read back as
    /// absent, and their `fieldsV1` is never parsed).
    pub strip_managed_fields: bool,
}

type Boxed = Box<dyn Any + Send>;
type TypedDecode = fn(&[u8], DecodeOptions) -> Result<Boxed, CodecError>;

/// A message with an `ObjectMeta` (every top-level kind's field 1).
trait HasMeta {
    fn meta_mut(&mut self) -> Option<&mut pb_meta::ObjectMeta>;
}

fn strip(meta: Option<&mut pb_meta::ObjectMeta>, opts: DecodeOptions) {
    if let (true, Some(m)) = (opts.strip_managed_fields, meta) {
        m.managed_fields = Vec::new();
    }
}

fn typed_as<O, P>(b: &[u8], opts: DecodeOptions) -> Result<Boxed, CodecError>
where
    O: Conv<P> + Send + 'static,
    P: Message + Default + HasMeta,
{
    let mut p = P::decode(b).map_err(|e| CodecError::Protobuf(e.to_string()))?;
    strip(p.meta_mut(), opts);
    Ok(Box::new(O::from_pb(p)?))
}

macro_rules! typed_kinds {
    (
        listed { $($av:literal $kind:literal => $($path:ident)::+;)* }
        other { $($other:tt)* }
    ) => {
        $(impl HasMeta for k8s_pb::$($path)::+ {
            fn meta_mut(&mut self) -> Option<&mut pb_meta::ObjectMeta> {
                self.metadata.as_mut()
            }
        })*

        /// The type, kind and decoder of a listed kind's k8s-openapi type
        /// (`None` when its messages lack fields this version's JSON has).
        fn by_type(t: TypeId) -> Option<(&'static str, &'static str, TypedDecode)> {
            $(if t == TypeId::of::<k8s_openapi::$($path)::+>()
                && crate::bridge::json_only_fields(stringify!($($path)::+)).is_empty()
            {
                return Some((
                    $av,
                    $kind,
                    typed_as::<k8s_openapi::$($path)::+, k8s_pb::$($path)::+>,
                ));
            })*
            None
        }

        /// Every listed kind: its `apiVersion`, `kind` and type.
        #[cfg(test)]
        pub(crate) fn listed() -> Vec<(&'static str, &'static str, TypeId)> {
            vec![$(($av, $kind, TypeId::of::<k8s_openapi::$($path)::+>()),)*]
        }

        /// Whether a type has a typed decoder.
        #[cfg(test)]
        pub(crate) fn has_typed(t: TypeId) -> Option<(&'static str, &'static str)> {
            by_type(t).map(|(av, kind, _)| (av, kind))
        }
    };
}

// The listed kinds of the one table (the others are read as JSON values).
crate::kinds::builtin_kinds!(typed_kinds);

/// Decodes one built-in kind's messages into its k8s-openapi type `K`.
///
/// ```
/// use informer_codec::Decoder;
/// use k8s_openapi::api::core::v1::Pod;
/// let d = Decoder::<Pod>::new().expect("Pod is built in");
/// assert_eq!((d.api_version(), d.kind()), ("v1", "Pod"));
/// assert!(Decoder::<String>::new().is_none());
/// ```
pub struct Decoder<K> {
    api_version: &'static str,
    kind: &'static str,
    decode: TypedDecode,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Decoder<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Decoder<K> {}

impl<K> std::fmt::Debug for Decoder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .finish()
    }
}

impl<K: 'static> Decoder<K> {
    /// The decoder of `K`, when `K` is a built-in kind's k8s-openapi type
    /// (`None` for any other type: custom resources, dynamic objects).
    pub fn new() -> Option<Self> {
        by_type(TypeId::of::<K>()).map(|(api_version, kind, decode)| Self {
            api_version,
            kind,
            decode,
            _kind: PhantomData,
        })
    }

    /// The `apiVersion` of `K`.
    pub fn api_version(&self) -> &'static str {
        self.api_version
    }

    /// The `kind` of `K`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// One object's message (an [`Envelope`](crate::Envelope)'s `raw`, or a
    /// list item) as `K`. See the [crate docs](crate) for an example.
    pub fn decode(&self, message: &[u8], opts: DecodeOptions) -> Result<K, CodecError> {
        let any = (self.decode)(message, opts)?;
        any.downcast::<K>().map(|k| *k).map_err(|_| {
            CodecError::NotProtobuf(format!("{}, Kind={}", self.api_version, self.kind))
        })
    }
}

/// The `ObjectMeta` of any object's message (field 1 of every top-level
/// kind and of `PartialObjectMetadata`), the rest of the message skipped:
/// what a bookmark or a metadata-only answer carries.
///
/// ```
/// use informer_codec::{DecodeOptions, Envelope, decode_object_meta};
/// let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
///     "metadata": {"name": "p", "resourceVersion": "7"}});
/// let e = Envelope::read(&informer_codec::to_protobuf(&pod)?)?;
/// let meta = decode_object_meta(&e.raw, DecodeOptions::default())?;
/// assert_eq!(meta.resource_version.as_deref(), Some("7"));
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
pub fn decode_object_meta(message: &[u8], opts: DecodeOptions) -> Result<ObjectMeta, CodecError> {
    let mut p = pb_meta::PartialObjectMetadata::decode(message)
        .map_err(|e| CodecError::Protobuf(e.to_string()))?;
    strip(p.metadata.as_mut(), opts);
    ObjectMeta::from_pb(p.metadata.unwrap_or_default())
}

/// A list message split into its metadata and its items' messages (not yet
/// decoded).
///
/// ```
/// use informer_codec::{Envelope, ListParts};
/// let list = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMapList",
///     "metadata": {"resourceVersion": "9", "continue": "t"},
///     "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]});
/// let e = Envelope::read(&informer_codec::to_protobuf(&list)?)?;
/// let parts = ListParts::read(&e)?;
/// assert_eq!(parts.resource_version.as_deref(), Some("9"));
/// assert_eq!(parts.continue_token.as_deref(), Some("t"));
/// assert_eq!(parts.items.len(), 2);
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParts<'a> {
    /// The list's `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// The list's `metadata.continue`.
    pub continue_token: Option<String>,
    /// Each item's message.
    pub items: Vec<&'a [u8]>,
}

impl<'a> ListParts<'a> {
    /// Splits the list message of `envelope` (a `...List` kind); unknown
    /// fields are skipped.
    pub fn read(envelope: &'a crate::Envelope) -> Result<Self, CodecError> {
        let (meta_tag, items_tag) = list_tags(&envelope.api_version, &envelope.kind);
        let bad = |e: prost::DecodeError| CodecError::Protobuf(e.to_string());
        let mut raw = envelope.raw.as_slice();
        let mut out = ListParts::default();
        while !raw.is_empty() {
            let (tag, wire) = decode_key(&mut raw).map_err(bad)?;
            if wire != WireType::LengthDelimited {
                // A field this reader does not know: skip it.
                prost::encoding::skip_field(wire, tag, &mut raw, Default::default())
                    .map_err(bad)?;
                continue;
            }
            let len = usize::try_from(decode_varint(&mut raw).map_err(bad)?).unwrap_or(usize::MAX);
            let (field, rest) = raw
                .split_at_checked(len)
                .ok_or_else(|| CodecError::Protobuf("list field runs past the end".into()))?;
            raw = rest;
            match tag {
                t if t == meta_tag => {
                    let m = pb_meta::ListMeta::decode(field).map_err(bad)?;
                    out.resource_version = m.resource_version;
                    out.continue_token = m.r#continue;
                }
                t if t == items_tag => out.items.push(field),
                _ => {}
            }
        }
        Ok(out)
    }
}
