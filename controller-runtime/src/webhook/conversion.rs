//! Hub-and-spoke conversion between the versions of one kind, served to the
//! API server as a CRD conversion webhook (`/convert`).
//!
//! One version is the [`Hub`]; every other version is [`Convertible`] to and
//! from it. A [`Conversion`] knows the hub and its spokes and converts any
//! served version to any other through the hub (spoke -> hub -> spoke), as
//! controller-runtime's `conversion` package does. A conversion may change
//! the labels and annotations (the usual place to keep a field one version
//! cannot hold, so it survives a round trip) and nothing else of the
//! metadata, as kube-apiserver enforces: the rest is kept exactly as the
//! API server sent it, and a conversion that changed it (a name, a UID, an
//! owner) is refused with [`ConversionError::Metadata`] naming the field.
//! An object that cannot be converted fails the whole ConversionReview
//! with a message naming it.
//!
//! Part of the manager layer's webhook server; this module turns a
//! `ConversionRequest` into a `ConversionResponse` and knows nothing of
//! HTTP.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::core::Resource;
use kube_client::core::Status;
use kube_client::core::conversion::{ConversionRequest, ConversionResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversionError {
    /// A conversion function refused the object.
    #[error("{0}")]
    Refused(String),
    /// The object's `apiVersion` (or the desired one) is not a version this
    /// conversion knows.
    #[error("no conversion registered for {api_version} {kind} (known: {known})")]
    UnknownVersion {
        /// The unknown `apiVersion`.
        api_version: String,
        /// The kind converted.
        kind: String,
        /// The versions registered.
        known: String,
    },
    /// The object is of another kind than the hub's.
    #[error("cannot convert a {found}: this conversion is for {expected}")]
    WrongKind {
        /// The hub's kind.
        expected: String,
        /// The object's kind.
        found: String,
    },
    /// The conversion changed metadata other than labels and annotations.
    #[error(
        "converting {name} changed metadata.{field}; a conversion may change only metadata.labels and metadata.annotations"
    )]
    Metadata {
        /// The object's name.
        name: String,
        /// The changed field of `metadata` (e.g. `name`).
        field: String,
    },
    /// The object does not decode as its version's type (or does not
    /// encode back).
    #[error("{api_version} {kind} {name}: {message}")]
    Codec {
        /// The version it was decoded as.
        api_version: String,
        /// The kind.
        kind: String,
        /// The object's name.
        name: String,
        /// serde's message.
        message: String,
    },
}

impl ConversionError {
    /// A conversion function's refusal with `message`.
    pub fn refused(message: impl Into<String>) -> Self {
        ConversionError::Refused(message.into())
    }
}

/// The version every other version converts to and from (controller-runtime's
/// `conversion.Hub`). Usually the storage version.
///
/// ```
/// # mod v1 { use controller_runtime::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[resource(group = "example.com", version = "v1", kind = "Widget", namespaced)]
/// # pub struct WidgetSpec { pub size: u32 } }
/// impl controller_runtime::webhook::Hub for v1::Widget {}
/// ```
pub trait Hub:
    Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static
{
}

/// A version that converts to and from the hub `H` (controller-runtime's
/// `conversion.Convertible`).
///
/// ```
/// use controller_runtime::webhook::{Convertible, ConversionError, Hub};
/// # mod v1 { use controller_runtime::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[resource(group = "example.com", version = "v1", kind = "Widget", namespaced)]
/// # pub struct WidgetSpec { pub size: u32 } }
/// # mod v1alpha1 { use controller_runtime::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[resource(group = "example.com", version = "v1alpha1", kind = "Widget", namespaced, storage = false)]
/// # pub struct WidgetSpec { pub size: String } }
/// impl Hub for v1::Widget {}
///
/// impl Convertible<v1::Widget> for v1alpha1::Widget {
///     fn to_hub(self) -> Result<v1::Widget, ConversionError> {
///         let size = self.spec.size.parse().map_err(|_| ConversionError::refused("size is not a number"))?;
///         Ok(v1::Widget { metadata: self.metadata, spec: v1::WidgetSpec { size }, status: None })
///     }
///     fn from_hub(hub: v1::Widget) -> Result<Self, ConversionError> {
///         Ok(v1alpha1::Widget { metadata: hub.metadata, spec: v1alpha1::WidgetSpec { size: hub.spec.size.to_string() }, status: None })
///     }
/// }
/// ```
pub trait Convertible<H: Hub>:
    Resource<DynamicType = ()> + Serialize + DeserializeOwned + Sized + Send + Sync + 'static
{
    /// This version as the hub.
    fn to_hub(self) -> Result<H, ConversionError>;
    /// The hub as this version.
    fn from_hub(hub: H) -> Result<Self, ConversionError>;
}

type ToHub<H> = fn(Value) -> Result<H, ConversionError>;
type FromHub<H> = fn(H) -> Result<Value, ConversionError>;

struct Spoke<H> {
    to_hub: ToHub<H>,
    from_hub: FromHub<H>,
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>")
        .to_owned()
}

fn decode<T: Resource<DynamicType = ()> + DeserializeOwned>(
    obj: Value,
) -> Result<T, ConversionError> {
    let name = name_of(&obj);
    serde_json::from_value(obj).map_err(|e| ConversionError::Codec {
        api_version: T::api_version(&()).into_owned(),
        kind: T::kind(&()).into_owned(),
        name,
        message: e.to_string(),
    })
}

fn encode<T: Resource<DynamicType = ()> + Serialize>(obj: &T) -> Result<Value, ConversionError> {
    serde_json::to_value(obj).map_err(|e| ConversionError::Codec {
        api_version: T::api_version(&()).into_owned(),
        kind: T::kind(&()).into_owned(),
        name: obj.meta().name.clone().unwrap_or_default(),
        message: e.to_string(),
    })
}

fn spoke_to_hub<H: Hub, S: Convertible<H>>(obj: Value) -> Result<H, ConversionError> {
    decode::<S>(obj)?.to_hub()
}

fn hub_to_spoke<H: Hub, S: Convertible<H>>(hub: H) -> Result<Value, ConversionError> {
    encode(&S::from_hub(hub)?)
}

fn hub_to_hub<H: Hub>(hub: H) -> Result<Value, ConversionError> {
    encode(&hub)
}

/// The versions of one kind and how they convert, through the hub `H`.
///
/// ```
/// use controller_runtime::webhook::Conversion;
/// # mod v1 { use controller_runtime::CustomResource; use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// # #[resource(group = "example.com", version = "v1", kind = "Widget", namespaced)]
/// # pub struct WidgetSpec { pub size: u32 } }
/// # impl controller_runtime::webhook::Hub for v1::Widget {}
/// let conversion = Conversion::<v1::Widget>::new();
/// assert_eq!(conversion.versions(), ["example.com/v1"]);
/// ```
pub struct Conversion<H: Hub> {
    spokes: BTreeMap<String, Spoke<H>>,
    _hub: PhantomData<fn() -> H>,
}

impl<H: Hub> Default for Conversion<H> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H: Hub> std::fmt::Debug for Conversion<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversion")
            .field("kind", &H::kind(&()))
            .field("versions", &self.versions())
            .finish()
    }
}

impl<H: Hub> Conversion<H> {
    /// A conversion knowing only the hub.
    #[must_use]
    pub fn new() -> Self {
        let mut spokes = BTreeMap::new();
        spokes.insert(
            H::api_version(&()).into_owned(),
            Spoke {
                to_hub: decode::<H>,
                from_hub: hub_to_hub::<H>,
            },
        );
        Conversion {
            spokes,
            _hub: PhantomData,
        }
    }

    /// Adds the version `S`.
    #[must_use]
    pub fn spoke<S: Convertible<H>>(mut self) -> Self {
        self.spokes.insert(
            S::api_version(&()).into_owned(),
            Spoke {
                to_hub: spoke_to_hub::<H, S>,
                from_hub: hub_to_spoke::<H, S>,
            },
        );
        self
    }

    /// The `apiVersion`s known (the hub's and every spoke's).
    pub fn versions(&self) -> Vec<String> {
        self.spokes.keys().cloned().collect()
    }

    fn unknown(&self, api_version: &str) -> ConversionError {
        ConversionError::UnknownVersion {
            api_version: api_version.to_owned(),
            kind: H::kind(&()).into_owned(),
            known: self.versions().join(", "),
        }
    }

    /// Converts `obj` (any known version, as JSON) to `desired`
    /// (`group/version`), keeping its metadata as it is but for the labels
    /// and annotations the conversion set.
    pub fn convert(&self, obj: Value, desired: &str) -> Result<Value, ConversionError> {
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind != H::kind(&()) {
            return Err(ConversionError::WrongKind {
                expected: H::kind(&()).into_owned(),
                found: if kind.is_empty() {
                    "object without a kind".into()
                } else {
                    kind.to_owned()
                },
            });
        }
        let from = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let source = self.spokes.get(&from).ok_or_else(|| self.unknown(&from))?;
        let target = self
            .spokes
            .get(desired)
            .ok_or_else(|| self.unknown(desired))?;
        if from == desired {
            return Ok(obj);
        }
        let metadata = obj.get("metadata").cloned();
        let name = name_of(&obj);
        let hub = (source.to_hub)(obj)?;
        let mut out = (target.from_hub)(hub)?;
        if let Some(o) = out.as_object_mut() {
            o.insert("apiVersion".into(), desired.into());
            o.insert("kind".into(), H::kind(&()).into_owned().into());
            let converted = o.remove("metadata").unwrap_or(Value::Null);
            let restored = restore_metadata(&name, metadata.unwrap_or(Value::Null), &converted)?;
            o.insert("metadata".into(), restored);
        }
        Ok(out)
    }
}

/// The fields of `metadata` a conversion may change.
const CONVERTIBLE_METADATA: [&str; 2] = ["labels", "annotations"];

/// `original` (the metadata as sent) with the labels and annotations of
/// `converted`; an error naming the first other field `converted` changed.
/// `original` is compared as the typed `ObjectMeta` sees it (so a field
/// serialized differently is not a change).
fn restore_metadata(
    name: &str,
    original: Value,
    converted: &Value,
) -> Result<Value, ConversionError> {
    let mut original = match original {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    let seen = serde_json::from_value::<ObjectMeta>(Value::Object(original.clone()))
        .ok()
        .and_then(|m| serde_json::to_value(m).ok())
        .unwrap_or_else(|| Value::Object(original.clone()));
    let empty = serde_json::Map::new();
    let seen = seen.as_object().unwrap_or(&empty);
    let converted = converted.as_object().unwrap_or(&empty);
    let mut fields: Vec<&String> = seen.keys().chain(converted.keys()).collect();
    fields.sort();
    fields.dedup();
    if let Some(field) = fields
        .into_iter()
        .filter(|f| !CONVERTIBLE_METADATA.contains(&f.as_str()))
        .find(|f| seen.get(*f) != converted.get(*f))
    {
        return Err(ConversionError::Metadata {
            name: name.to_owned(),
            field: field.clone(),
        });
    }
    for field in CONVERTIBLE_METADATA {
        match converted.get(field) {
            // An emptied map where the object had none: still none.
            Some(Value::Object(m)) if m.is_empty() && !original.contains_key(field) => {}
            Some(v) if !v.is_null() => {
                original.insert(field.to_owned(), v.clone());
            }
            _ => {
                original.remove(field);
            }
        }
    }
    Ok(Value::Object(original))
}

/// A conversion with its hub erased: what the server routes to.
pub(crate) trait ConversionHandler: Send + Sync + 'static {
    fn group_kind(&self) -> (String, String);
    fn review(&self, req: ConversionRequest) -> ConversionResponse;
}

impl<H: Hub> ConversionHandler for Conversion<H> {
    fn group_kind(&self) -> (String, String) {
        (H::group(&()).into_owned(), H::kind(&()).into_owned())
    }

    fn review(&self, mut req: ConversionRequest) -> ConversionResponse {
        let desired = req.desired_api_version.clone();
        let objects = std::mem::take(&mut req.objects);
        let resp = ConversionResponse::for_request(req);
        let mut converted = Vec::with_capacity(objects.len());
        for obj in objects {
            let name = name_of(&obj);
            match self.convert(obj, &desired) {
                Ok(o) => converted.push(o),
                Err(e) => {
                    return resp.failure(Status::failure(
                        &format!("converting {name} to {desired}: {e}"),
                        "ConversionFailed",
                    ));
                }
            }
        }
        resp.success(converted)
    }
}
