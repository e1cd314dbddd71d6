//! Hub-and-spoke conversion between the versions of one kind, served to the
//! API server as a CRD conversion webhook (`/convert`).
//!
//! One version is the [`Hub`]; every other version is [`Convertible`] to and
//! from it. A [`Conversion`] knows the hub and its spokes and converts any
//! served version to any other through the hub (spoke -> hub -> spoke), as
//! controller-runtime's `conversion` package does. Metadata is kept exactly
//! as the API server sent it; an object that cannot be converted fails the
//! whole ConversionReview with a message naming it.
//!
//! Part of the manager layer's webhook server; this module turns a
//! `ConversionRequest` into a `ConversionResponse` and knows nothing of
//! HTTP.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use kube_client::core::Resource;
use kube_client::core::Status;
use kube_client::core::conversion::{ConversionRequest, ConversionResponse};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// (`group/version`), keeping its metadata as it is.
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
        let hub = (source.to_hub)(obj)?;
        let mut out = (target.from_hub)(hub)?;
        if let Some(o) = out.as_object_mut() {
            o.insert("apiVersion".into(), desired.into());
            o.insert("kind".into(), H::kind(&()).into_owned().into());
            if let Some(metadata) = metadata {
                o.insert("metadata".into(), metadata);
            }
        }
        Ok(out)
    }
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
