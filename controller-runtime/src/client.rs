//! Small helpers for the writes controllers make most: owner references,
//! status updates and server-side apply.
//!
//! Layer 1 (building blocks): imports only the vocabulary.
//!
//! - [`set_controller_reference`] marks an object as controlled by an owner
//!   (garbage-collected with it, and mapped back to it by
//!   [`EnqueueRequestForOwner`](crate::handler::EnqueueRequestForOwner)); it
//!   refuses, with [`ClientError::AlreadyControlled`], to take over an object
//!   another controller owns. [`set_owner_reference`] adds a plain owner.
//! - [`patch_status`] writes only `status` (merge patch on `/status`);
//!   [`replace_status`] does it guarded by `resourceVersion` (409 on a stale
//!   object).
//! - [`apply`] and [`apply_status`] send server-side apply with a field
//!   manager, optionally forcing conflicts.
//! - [`create_or_update`] and [`create_or_patch`] read, change through a
//!   closure and write only what changed (controllerutil's helpers).
//!
//! ```
//! use controller_runtime::client::set_controller_reference;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! let mut owner = Deployment::default();
//! owner.metadata.name = Some("web".into());
//! owner.metadata.namespace = Some("ns".into());
//! owner.metadata.uid = Some("u-1".into());
//! let mut cm = ConfigMap::default();
//! cm.metadata.namespace = Some("ns".into());
//! set_controller_reference(&owner, &mut cm).unwrap();
//! let r = &cm.metadata.owner_references.as_ref().unwrap()[0];
//! assert_eq!((r.kind.as_str(), r.name.as_str(), r.controller), ("Deployment", "web", Some(true)));
//! ```

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::terminal::Terminal;

/// Errors of the client helpers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The object already has a controller owner other than this one.
    #[error(
        "object {object} is already controlled by {existing_kind} {existing_name}; \
         cannot set {kind} {name} as its controller"
    )]
    AlreadyControlled {
        /// The object being changed.
        object: String,
        /// Kind of its current controller.
        existing_kind: String,
        /// Name of its current controller.
        existing_name: String,
        /// Kind of the owner that was to be set.
        kind: String,
        /// Name of the owner that was to be set.
        name: String,
    },
    /// The owner lacks a field an owner reference needs (it was not read
    /// from the server).
    #[error("owner has no metadata.{field}; read it from the server first")]
    OwnerIncomplete {
        /// `name` or `uid`.
        field: &'static str,
    },
    /// Owner references cannot cross namespaces, and a cluster-scoped object
    /// cannot have a namespaced owner.
    #[error(
        "owner in namespace {owner_namespace:?} cannot own object in namespace {object_namespace:?}"
    )]
    CrossNamespace {
        /// The owner's namespace.
        owner_namespace: String,
        /// The object's namespace (`None` when cluster-scoped).
        object_namespace: Option<String>,
    },
    /// The object has no name.
    #[error("object has no metadata.name")]
    MissingName,
    /// A request to the API server failed.
    #[error("{op} of {object} failed: {source}")]
    Api {
        /// The operation.
        op: &'static str,
        /// The object's name.
        object: String,
        /// The client error, with the API `Status` when there was one.
        #[source]
        source: kube_client::Error,
    },
}

impl ClientError {
    /// Whether the server answered 409 Conflict (retry with a fresh read).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ClientError::Api { source: kube_client::Error::Api(s), .. } if s.code == 409)
    }

    /// Whether the server answered 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Api { source: kube_client::Error::Api(s), .. } if s.code == 404)
    }
}

/// Which client errors retrying cannot fix:
///
/// - [`OwnerIncomplete`](ClientError::OwnerIncomplete),
///   [`CrossNamespace`](ClientError::CrossNamespace) and
///   [`MissingName`](ClientError::MissingName) are terminal: they come from
///   the objects' shape (a name, a namespace, an owner not read from the
///   server), which a retry of the same code sees again.
/// - [`AlreadyControlled`](ClientError::AlreadyControlled) is retried: the
///   other controller may let go of the object (as controller-runtime,
///   whose `AlreadyOwnedError` is retried too).
/// - [`Api`](ClientError::Api) is as terminal as its `kube_client::Error`
///   (400 Bad Request and 422 Invalid are; conflicts, timeouts, throttling
///   and server errors are not; see [`Terminal`](crate::Terminal)).
///
/// ```
/// use controller_runtime::Terminal;
/// use controller_runtime::client::ClientError;
/// assert!(ClientError::OwnerIncomplete { field: "uid" }.is_terminal());
/// let taken = ClientError::AlreadyControlled {
///     object: "ns/cm".into(),
///     existing_kind: "Deployment".into(),
///     existing_name: "other".into(),
///     kind: "Deployment".into(),
///     name: "web".into(),
/// };
/// assert!(!taken.is_terminal());
/// ```
impl Terminal for ClientError {
    fn is_terminal(&self) -> bool {
        match self {
            ClientError::OwnerIncomplete { .. }
            | ClientError::CrossNamespace { .. }
            | ClientError::MissingName => true,
            ClientError::AlreadyControlled { .. } => false,
            ClientError::Api { source, .. } => source.is_terminal(),
        }
    }
}

fn group_kind(api_version: &str, kind: &str) -> (String, String) {
    let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("");
    (group.to_string(), kind.to_string())
}

fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    group_kind(&a.api_version, &a.kind) == group_kind(&b.api_version, &b.kind) && a.name == b.name
}

fn object_name<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta
        .name
        .clone()
        .or_else(|| meta.generate_name.clone().map(|g| format!("{g}*")))
        .unwrap_or_else(|| "<unnamed>".to_string());
    match meta.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    }
}

/// The owner reference pointing at `owner` (not marked as controller).
pub fn owner_reference<O: Resource<DynamicType = ()>>(
    owner: &O,
) -> Result<OwnerReference, ClientError> {
    let meta = owner.meta();
    Ok(OwnerReference {
        api_version: O::api_version(&()).into_owned(),
        kind: O::kind(&()).into_owned(),
        name: meta
            .name
            .clone()
            .ok_or(ClientError::OwnerIncomplete { field: "name" })?,
        uid: meta
            .uid
            .clone()
            .ok_or(ClientError::OwnerIncomplete { field: "uid" })?,
        controller: None,
        block_owner_deletion: None,
    })
}

fn check_namespaces<O: Resource, K: Resource>(owner: &O, obj: &K) -> Result<(), ClientError> {
    let owner_ns = owner
        .meta()
        .namespace
        .as_deref()
        .filter(|ns| !ns.is_empty());
    let obj_ns = obj.meta().namespace.as_deref().filter(|ns| !ns.is_empty());
    match owner_ns {
        None => Ok(()),
        Some(ons) if obj_ns == Some(ons) => Ok(()),
        Some(ons) => Err(ClientError::CrossNamespace {
            owner_namespace: ons.to_string(),
            object_namespace: obj_ns.map(str::to_string),
        }),
    }
}

/// Makes `owner` the controller of `obj`: an owner reference with
/// `controller: true` and `blockOwnerDeletion: true`, replacing any
/// existing reference to the same owner (matched by group, kind and name).
///
/// Fails with [`ClientError::AlreadyControlled`] when another owner is
/// already the controller, and with [`ClientError::CrossNamespace`] when a
/// namespaced owner is in another namespace than `obj`.
pub fn set_controller_reference<O, K>(owner: &O, obj: &mut K) -> Result<(), ClientError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    check_namespaces(owner, obj)?;
    let mut reference = owner_reference(owner)?;
    reference.controller = Some(true);
    reference.block_owner_deletion = Some(true);
    if let Some(existing) = controller_of(obj)
        && !same_owner(existing, &reference)
    {
        return Err(ClientError::AlreadyControlled {
            object: object_name(obj),
            existing_kind: existing.kind.clone(),
            existing_name: existing.name.clone(),
            kind: reference.kind,
            name: reference.name,
        });
    }
    upsert(obj, reference);
    Ok(())
}

/// Adds `owner` as a (non-controller) owner of `obj`, or refreshes the
/// existing reference to it, keeping its `controller` and
/// `blockOwnerDeletion` flags.
pub fn set_owner_reference<O, K>(owner: &O, obj: &mut K) -> Result<(), ClientError>
where
    O: Resource<DynamicType = ()>,
    K: Resource,
{
    check_namespaces(owner, obj)?;
    let mut reference = owner_reference(owner)?;
    if let Some(existing) = obj
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| same_owner(r, &reference))
    {
        reference.controller = existing.controller;
        reference.block_owner_deletion = existing.block_owner_deletion;
    }
    upsert(obj, reference);
    Ok(())
}

fn upsert<K: Resource>(obj: &mut K, reference: OwnerReference) {
    let refs = obj.meta_mut().owner_references.get_or_insert_with(Vec::new);
    match refs.iter_mut().find(|r| same_owner(r, &reference)) {
        Some(slot) => *slot = reference,
        None => refs.push(reference),
    }
}

/// The owner reference of `obj` marked `controller: true`, if any.
pub fn controller_of<K: Resource>(obj: &K) -> Option<&OwnerReference> {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// Whether `owner` (matched by uid) is the controller of `obj`.
pub fn is_controlled_by<O: Resource, K: Resource>(owner: &O, obj: &K) -> bool {
    match (controller_of(obj), owner.meta().uid.as_deref()) {
        (Some(r), Some(uid)) => r.uid == uid,
        _ => false,
    }
}

/// Writes `status` to the object `name` with a merge patch on `/status`;
/// nothing outside `status` changes.
pub async fn patch_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<K, ClientError>
where
    K: Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let body = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(|source| ClientError::Api {
            op: "status patch",
            object: name.to_string(),
            source,
        })
}

/// Replaces the status of `obj` on `/status`, guarded by its
/// `resourceVersion`: a stale `obj` gets a 409 ([`ClientError::is_conflict`]).
pub async fn replace_status<K>(api: &Api<K>, obj: &K) -> Result<K, ClientError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = obj.meta().name.clone().ok_or(ClientError::MissingName)?;
    api.replace_status(&name, &PostParams::default(), obj)
        .await
        .map_err(|source| ClientError::Api {
            op: "status update",
            object: name,
            source,
        })
}

fn apply_params(field_manager: &str, force: bool) -> PatchParams {
    let params = PatchParams::apply(field_manager);
    if force { params.force() } else { params }
}

fn apply_body<K: Resource + Clone>(obj: &K) -> Result<(String, K), ClientError> {
    let name = obj.meta().name.clone().ok_or(ClientError::MissingName)?;
    let mut body = obj.clone();
    body.meta_mut().managed_fields = None;
    Ok((name, body))
}

/// Server-side applies `obj` as `field_manager`: creates it if absent,
/// otherwise sets the fields it names and takes ownership of them. A field
/// owned by another manager with a different value is a 409 conflict unless
/// `force` is set.
pub async fn apply<K>(
    api: &Api<K>,
    obj: &K,
    field_manager: &str,
    force: bool,
) -> Result<K, ClientError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    apply_to(api, obj, field_manager, force, false).await
}

/// Server-side applies the `status` of `obj` on `/status` as
/// `field_manager`.
pub async fn apply_status<K>(
    api: &Api<K>,
    obj: &K,
    field_manager: &str,
    force: bool,
) -> Result<K, ClientError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    apply_to(api, obj, field_manager, force, true).await
}

/// The shared body of [`apply`] and [`apply_status`]: `status` picks the
/// `/status` subresource and the operation name in errors.
async fn apply_to<K>(
    api: &Api<K>,
    obj: &K,
    field_manager: &str,
    force: bool,
    status: bool,
) -> Result<K, ClientError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    let (name, body) = apply_body(obj)?;
    let params = apply_params(field_manager, force);
    let patch = Patch::Apply(&body);
    let (op, result) = if status {
        (
            "status apply",
            api.patch_status(&name, &params, &patch).await,
        )
    } else {
        ("apply", api.patch(&name, &params, &patch).await)
    };
    result.map_err(|source| ClientError::Api {
        op,
        object: name,
        source,
    })
}

mod create_or_update;
pub use create_or_update::{
    CreateOrUpdateError, MutateError, OperationResult, create_or_patch, create_or_update,
};

#[cfg(test)]
mod tests;
