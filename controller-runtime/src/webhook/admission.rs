//! Typed admission: a [`Validator`] says whether a create, update or delete
//! of a `K` may happen (with warnings, or a [`Denial`] with field causes); a
//! [`Defaulter`] fills in a `K` before it is stored, and the JSON patch the
//! API server applies is computed by diffing the object before and after
//! and merging that change into the object as sent: fields `K` does not
//! know are kept, and a change that cannot be made without dropping them
//! is refused with a `422` naming the path, never patched away.
//! Both see an [`AdmissionContext`]: the operation, the kind and resource
//! asked about, who asks, whether it is a dry run, the namespace and name.
//!
//! A handler serves one kind: a review whose kind, resource or version is
//! not that kind's (by its `kind`, its `resource` or its objects'
//! `apiVersion`/`kind`) is refused with a `400` naming both, as
//! controller-runtime's decoder refuses it, before the object is decoded:
//! a `Gadget` whose fields happen to fit the handler's type is not
//! validated, let alone patched, as one.
//!
//! The objects of a review are kept as the JSON text they arrived in
//! ([`AdmissionInput`]) and decoded once, straight into `K`: no
//! intermediate `serde_json::Value` of the object is built, except the
//! object as sent that a defaulter's patch is computed against, and only
//! when the defaulter changed something.
//!
//! Part of the manager layer's webhook server ([`super::WebhookServer`]
//! serves them at controller-runtime's paths, `/validate-<group>-<version>-<kind>`
//! and `/mutate-...`); this module turns an admission request into an
//! `AdmissionResponse` and knows nothing of HTTP.

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;

use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::UserInfo;
use kube_client::core::admission::{AdmissionResponse, Operation};
use kube_client::core::response::{StatusCause, StatusDetails};
use kube_client::core::{GroupVersionKind, GroupVersionResource, Resource, Status};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::patch::patch_for;

/// Warnings returned to the client with an allowed (or denied) request;
/// kubectl prints them as `Warning: ...`.
pub type Warnings = Vec<String>;

/// What an admission handler knows about the request besides the object.
#[derive(Debug, Clone)]
pub struct AdmissionContext {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: Operation,
    /// The kind of the object as the handler sees it (its group, version
    /// and kind are the handler's: any other is refused before the handler
    /// runs).
    pub kind: GroupVersionKind,
    /// The resource asked about (group, version, plural).
    pub resource: GroupVersionResource,
    /// The kind the client asked for, when the API server converted the
    /// object to the webhook's version (`matchPolicy: Equivalent`).
    pub request_kind: Option<GroupVersionKind>,
    /// The resource the client asked for, when it differs likewise.
    pub request_resource: Option<GroupVersionResource>,
    /// Who sent the request.
    pub user_info: UserInfo,
    /// Whether the change will not be persisted (`?dryRun=All`): a handler
    /// with side effects must skip them.
    pub dry_run: bool,
    /// The object's namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// The object's name (empty for a create with `generateName`).
    pub name: String,
    /// The request's UID, for logs.
    pub uid: String,
    /// The subresource (`status`, `scale`), if any.
    pub sub_resource: Option<String>,
}

/// An `admission.k8s.io/v1` AdmissionReview's `request` as the handlers
/// take it: the fields of kube's `AdmissionRequest`, with the object and
/// the old object left as the JSON text they came in (borrowed from the
/// body), so each is decoded once, as the handler's `K`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionInput<'a> {
    pub(crate) uid: String,
    pub(crate) kind: GroupVersionKind,
    pub(crate) resource: GroupVersionResource,
    #[serde(default)]
    pub(crate) sub_resource: Option<String>,
    #[serde(default)]
    pub(crate) request_kind: Option<GroupVersionKind>,
    #[serde(default)]
    pub(crate) request_resource: Option<GroupVersionResource>,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    pub(crate) operation: Operation,
    pub(crate) user_info: UserInfo,
    #[serde(default, borrow)]
    pub(crate) object: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(crate) old_object: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) dry_run: bool,
}

impl AdmissionInput<'_> {
    /// The answer allowing this request, echoing its UID (what kube's
    /// `AdmissionResponse::from(&request)` makes).
    pub(crate) fn allowed(&self) -> AdmissionResponse {
        let mut resp = AdmissionResponse::invalid("");
        resp.uid.clone_from(&self.uid);
        resp.allowed = true;
        resp.result = Status::default();
        resp
    }
}

impl AdmissionContext {
    /// The context of `req`, its objects left behind.
    fn of(req: AdmissionInput<'_>) -> Self {
        AdmissionContext {
            operation: req.operation,
            kind: req.kind,
            resource: req.resource,
            request_kind: req.request_kind,
            request_resource: req.request_resource,
            user_info: req.user_info,
            dry_run: req.dry_run,
            namespace: req.namespace,
            name: req.name,
            uid: req.uid,
            sub_resource: req.sub_resource,
        }
    }
}

/// A refusal: a message, optional field causes, and warnings.
///
/// Without causes the API server answers the client `403 Forbidden`; with
/// causes `422 Invalid`, each cause naming its field, as built-in
/// validation does.
///
/// ```
/// use controller_runtime::webhook::Denial;
/// let d = Denial::new("spec is invalid")
///     .field("spec.replicas", "must be at most 10")
///     .warning("replicas is deprecated");
/// assert_eq!(d.message(), "spec is invalid");
/// assert_eq!(d.causes().len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    message: String,
    causes: Vec<StatusCause>,
    warnings: Warnings,
}

impl Denial {
    /// A denial with `message`.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Denial {
            message: message.into(),
            causes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Adds a cause: `field` (a path such as `spec.replicas`) is invalid
    /// because of `message` (reason `FieldValueInvalid`).
    #[must_use]
    pub fn field(mut self, field: impl Into<String>, message: impl Into<String>) -> Self {
        self.causes.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: message.into(),
            field: field.into(),
        });
        self
    }

    /// Adds a warning shown to the client with the denial.
    #[must_use]
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The field causes.
    pub fn causes(&self) -> &[StatusCause] {
        &self.causes
    }

    fn into_response(
        self,
        base: AdmissionResponse,
        name: &str,
        kind: &str,
        group: &str,
    ) -> AdmissionResponse {
        let mut resp = base.deny(&self.message);
        if self.causes.is_empty() {
            resp.result.code = 403;
            resp.result.reason = "Forbidden".into();
        } else {
            resp.result.code = 422;
            resp.result.reason = "Invalid".into();
            resp.result.details = Some(StatusDetails {
                name: name.to_owned(),
                group: group.to_owned(),
                kind: kind.to_owned(),
                uid: String::new(),
                causes: self.causes,
                retry_after_seconds: 0,
            });
        }
        with_warnings(resp, self.warnings)
    }
}

impl<E: std::error::Error> From<E> for Denial {
    fn from(e: E) -> Self {
        Denial::new(e.to_string())
    }
}

fn with_warnings(mut resp: AdmissionResponse, warnings: Warnings) -> AdmissionResponse {
    if !warnings.is_empty() {
        resp.warnings = Some(warnings);
    }
    resp
}

/// Decides whether a create, update or delete of a `K` may happen.
///
/// `Ok(warnings)` allows it, `Err(denial)` refuses it. `validate_create`
/// and `validate_update` must be written; `validate_delete` allows every
/// delete unless overridden.
///
/// ```
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// use controller_runtime::webhook::{AdmissionContext, Denial, Validator, Warnings};
///
/// struct SmallConfigMaps;
///
/// impl Validator<ConfigMap> for SmallConfigMaps {
///     async fn validate_create(&self, cm: &ConfigMap, _: &AdmissionContext) -> Result<Warnings, Denial> {
///         match cm.data.as_ref().map_or(0, |d| d.len()) {
///             n if n > 100 => Err(Denial::new("too many keys").field("data", "at most 100 keys")),
///             n if n > 50 => Ok(vec![format!("{n} keys; consider splitting")]),
///             _ => Ok(vec![]),
///         }
///     }
///     async fn validate_update(&self, _old: &ConfigMap, new: &ConfigMap, ctx: &AdmissionContext) -> Result<Warnings, Denial> {
///         self.validate_create(new, ctx).await
///     }
/// }
/// ```
pub trait Validator<K>: Send + Sync + 'static {
    /// A `K` is being created.
    fn validate_create(
        &self,
        obj: &K,
        ctx: &AdmissionContext,
    ) -> impl Future<Output = Result<Warnings, Denial>> + Send;

    /// `old` is being replaced by `new`.
    fn validate_update(
        &self,
        old: &K,
        new: &K,
        ctx: &AdmissionContext,
    ) -> impl Future<Output = Result<Warnings, Denial>> + Send;

    /// `obj` is being deleted (allowed by default).
    fn validate_delete(
        &self,
        obj: &K,
        ctx: &AdmissionContext,
    ) -> impl Future<Output = Result<Warnings, Denial>> + Send {
        let _ = (obj, ctx);
        std::future::ready(Ok(Vec::new()))
    }
}

/// Fills in a `K` before it is stored. The change is sent back as a JSON
/// patch computed by diffing the object before and after the call; an
/// `Err` refuses the request.
///
/// ```
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// use controller_runtime::webhook::{AdmissionContext, Defaulter, Denial};
///
/// struct Labelled;
///
/// impl Defaulter<ConfigMap> for Labelled {
///     async fn default(&self, cm: &mut ConfigMap, _: &AdmissionContext) -> Result<(), Denial> {
///         cm.metadata.labels.get_or_insert_default().entry("team".into()).or_insert("core".into());
///         Ok(())
///     }
/// }
/// ```
pub trait Defaulter<K>: Send + Sync + 'static {
    /// Sets the defaults on `obj`.
    fn default(
        &self,
        obj: &mut K,
        ctx: &AdmissionContext,
    ) -> impl Future<Output = Result<(), Denial>> + Send;
}

/// An admission handler with its type erased: what the server routes to.
pub(crate) trait AdmissionHandler: Send + Sync + 'static {
    fn review<'a>(&'a self, req: AdmissionInput<'a>) -> BoxFuture<'a, AdmissionResponse>;
}

/// Decodes `req`'s object (or old object) as a `K`.
fn decode<K: DeserializeOwned>(obj: Option<&RawValue>, what: &str) -> Result<K, String> {
    let obj = obj.ok_or_else(|| format!("the request has no {what}"))?;
    serde_json::from_str(obj.get()).map_err(|e| format!("decoding the {what}: {e}"))
}

/// An object's `apiVersion` and `kind`, read without decoding the rest.
#[derive(Deserialize)]
struct ObjectTypes<'a> {
    #[serde(default, borrow, rename = "apiVersion")]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
}

/// `obj`'s `apiVersion` and `kind` when it has both (as strings), as
/// kube's `DynamicObject` reads its type.
fn types_of(obj: &RawValue) -> Option<(Cow<'_, str>, Cow<'_, str>)> {
    let types: ObjectTypes<'_> = serde_json::from_str(obj.get()).ok()?;
    Some((types.api_version?, types.kind?))
}

/// `group/version Kind`, `version Kind` for the core group.
fn gvk_text(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        format!("{version} {kind}")
    } else {
        format!("{group}/{version} {kind}")
    }
}

/// Whether `req` is about `K`: its `kind`, its `resource` and the
/// `apiVersion`/`kind` of the objects it carries. The error names what
/// the handler serves and what was asked.
fn served<K: Resource<DynamicType = ()>>(req: &AdmissionInput<'_>) -> Result<(), String> {
    let (group, version, kind, plural) =
        (K::group(&()), K::version(&()), K::kind(&()), K::plural(&()));
    let serves = || {
        format!(
            "this webhook serves {} ({plural})",
            gvk_text(&group, &version, &kind)
        )
    };
    let k = &req.kind;
    if (k.group.as_str(), k.version.as_str(), k.kind.as_str()) != (&*group, &*version, &*kind) {
        return Err(format!(
            "{}, not {}",
            serves(),
            gvk_text(&k.group, &k.version, &k.kind)
        ));
    }
    let r = &req.resource;
    if (r.group.as_str(), r.version.as_str(), r.resource.as_str()) != (&*group, &*version, &*plural)
    {
        let resource = if r.group.is_empty() {
            format!("{}/{}", r.version, r.resource)
        } else {
            format!("{}/{}/{}", r.group, r.version, r.resource)
        };
        return Err(format!("{}, not the resource {resource}", serves()));
    }
    let api_version = K::api_version(&());
    for obj in [req.object, req.old_object].into_iter().flatten() {
        if let Some((v, k)) = types_of(obj)
            && (&*v, &*k) != (&*api_version, &*kind)
        {
            return Err(format!("{}, not an object of {v} {k}", serves()));
        }
    }
    Ok(())
}

fn bad_request(resp: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut resp = resp.deny(message);
    resp.result.code = 400;
    resp.result.reason = "BadRequest".into();
    resp
}

/// The defaulter's change cannot be sent as a patch of the object as
/// sent: a `422` saying why, rather than a patch that drops fields.
fn unprocessable(resp: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut resp = resp.deny(message);
    resp.result.code = 422;
    resp.result.reason = "Invalid".into();
    resp
}

pub(crate) struct ValidatingHandler<K, V> {
    validator: V,
    _kind: PhantomData<fn() -> K>,
}

impl<K, V> ValidatingHandler<K, V> {
    pub(crate) fn new(validator: V) -> Self {
        ValidatingHandler {
            validator,
            _kind: PhantomData,
        }
    }
}

impl<K, V> AdmissionHandler for ValidatingHandler<K, V>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    V: Validator<K>,
{
    fn review<'a>(&'a self, req: AdmissionInput<'a>) -> BoxFuture<'a, AdmissionResponse> {
        Box::pin(async move {
            let base = req.allowed();
            if let Err(e) = served::<K>(&req) {
                return bad_request(base, e);
            }
            let (object, old_object) = (req.object, req.old_object);
            let ctx = AdmissionContext::of(req);
            let result = match ctx.operation {
                Operation::Create => match decode::<K>(object, "object") {
                    Ok(obj) => self.validator.validate_create(&obj, &ctx).await,
                    Err(e) => return bad_request(base, e),
                },
                Operation::Update => {
                    let old = decode::<K>(old_object, "old object");
                    let new = decode::<K>(object, "object");
                    match (old, new) {
                        (Ok(old), Ok(new)) => {
                            self.validator.validate_update(&old, &new, &ctx).await
                        }
                        (Err(e), _) | (_, Err(e)) => return bad_request(base, e),
                    }
                }
                Operation::Delete => match decode::<K>(old_object, "old object") {
                    Ok(obj) => self.validator.validate_delete(&obj, &ctx).await,
                    Err(e) => return bad_request(base, e),
                },
                Operation::Connect => Ok(Vec::new()),
            };
            match result {
                Ok(warnings) => with_warnings(base, warnings),
                Err(denial) => denial.into_response(base, &ctx.name, &K::kind(&()), &K::group(&())),
            }
        })
    }
}

pub(crate) struct DefaultingHandler<K, D> {
    defaulter: D,
    _kind: PhantomData<fn() -> K>,
}

impl<K, D> DefaultingHandler<K, D> {
    pub(crate) fn new(defaulter: D) -> Self {
        DefaultingHandler {
            defaulter,
            _kind: PhantomData,
        }
    }
}

impl<K, D> AdmissionHandler for DefaultingHandler<K, D>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static,
    D: Defaulter<K>,
{
    fn review<'a>(&'a self, req: AdmissionInput<'a>) -> BoxFuture<'a, AdmissionResponse> {
        Box::pin(async move {
            let base = req.allowed();
            if let Err(e) = served::<K>(&req) {
                return bad_request(base, e);
            }
            if !matches!(req.operation, Operation::Create | Operation::Update) {
                return base;
            }
            let Some(object) = req.object else {
                return bad_request(base, "the request has no object".into());
            };
            let ctx = AdmissionContext::of(req);
            let mut obj: K = match serde_json::from_str(object.get()) {
                Ok(obj) => obj,
                Err(e) => return bad_request(base, format!("decoding the object: {e}")),
            };
            let before = serde_json::to_value(&obj);
            if let Err(denial) = self.defaulter.default(&mut obj, &ctx).await {
                return denial.into_response(base, &ctx.name, &K::kind(&()), &K::group(&()));
            }
            let after = serde_json::to_value(&obj);
            let (before, after) = match (before, after) {
                (Ok(before), Ok(after)) => (before, after),
                (Err(e), _) | (_, Err(e)) => {
                    return bad_request(base, format!("encoding the object: {e}"));
                }
            };
            if before == after {
                return base;
            }
            // The object as sent, which the patch applies to: read only
            // when the defaulter changed something.
            let raw: serde_json::Value = match serde_json::from_str(object.get()) {
                Ok(raw) => raw,
                Err(e) => return bad_request(base, format!("reading the object: {e}")),
            };
            match patch_for(&raw, &before, &after) {
                Ok(Some(patch)) => match base.clone().with_patch(patch) {
                    Ok(resp) => resp,
                    Err(e) => bad_request(base, e.to_string()),
                },
                Ok(None) => base,
                Err(e) => unprocessable(base, e),
            }
        })
    }
}
