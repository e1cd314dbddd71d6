//! Turning informer events into reconcile requests.
//!
//! Layer 1 (building blocks): imports only the vocabulary ([`Request`], [`ScopeInfo`]).
//!
//! An [`EventHandler`] answers, for each create, update, delete or generic
//! event of a watched kind `K`, which [`Request`]s a controller should
//! enqueue. Three handlers cover what controllers need:
//!
//! - [`EnqueueRequestForObject`]: the object itself (the kind a controller is
//!   `for`);
//! - [`EnqueueRequestForOwner`]: the object's controller owner of a given
//!   kind, or every owner of that kind (the kinds a controller `owns`);
//! - [`EnqueueRequestsFromMapFunc`]: whatever a user function says.
//!
//! An update enqueues the requests for both the old and the new object, so a
//! change of owner reconciles the previous owner too.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_core::Resource;

use crate::object::ScopeInfo;
use crate::request::Request;

/// Maps the events of kind `K` to the requests to enqueue.
///
/// Implementors write [`EventHandler::map`]; the event methods default to it
/// (an update maps both the old and the new object, without duplicates).
pub trait EventHandler<K>: Send + Sync + 'static {
    /// The requests one object maps to.
    fn map(&self, obj: &K) -> Vec<Request>;

    /// Requests for a created object (or one seen in the initial list).
    fn create(&self, obj: &K) -> Vec<Request> {
        self.map(obj)
    }

    /// Requests for an updated object.
    fn update(&self, old: &K, new: &K) -> Vec<Request> {
        let mut out = self.map(old);
        for req in self.map(new) {
            if !out.contains(&req) {
                out.push(req);
            }
        }
        out
    }

    /// Requests for a deleted object (possibly its last known state).
    fn delete(&self, obj: &K) -> Vec<Request> {
        self.map(obj)
    }

    /// Requests for an event from outside the cluster.
    fn generic(&self, obj: &K) -> Vec<Request> {
        self.map(obj)
    }
}

impl<K, H: EventHandler<K> + ?Sized> EventHandler<K> for Arc<H> {
    fn map(&self, obj: &K) -> Vec<Request> {
        (**self).map(obj)
    }
    fn create(&self, obj: &K) -> Vec<Request> {
        (**self).create(obj)
    }
    fn update(&self, old: &K, new: &K) -> Vec<Request> {
        (**self).update(old, new)
    }
    fn delete(&self, obj: &K) -> Vec<Request> {
        (**self).delete(obj)
    }
    fn generic(&self, obj: &K) -> Vec<Request> {
        (**self).generic(obj)
    }
}

/// Enqueues the object itself.
///
/// ```
/// use controller_runtime::handler::{EnqueueRequestForObject, EventHandler};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("cfg".into());
/// cm.metadata.namespace = Some("ns".into());
/// assert_eq!(EnqueueRequestForObject.create(&cm)[0].to_string(), "ns/cfg");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct EnqueueRequestForObject;

impl<K: Resource> EventHandler<K> for EnqueueRequestForObject {
    fn map(&self, obj: &K) -> Vec<Request> {
        match Request::from_object(obj) {
            Ok(req) => vec![req],
            Err(error) => {
                tracing::debug!(%error, "event for an object without a name ignored");
                Vec::new()
            }
        }
    }
}

/// Enqueues the owner(s) of the object that are of one kind.
///
/// Owners match by API group and kind (the version may differ). The owner's
/// request gets the object's namespace when the owner kind is namespaced and
/// no namespace when it is cluster-scoped.
///
/// ```
/// use controller_runtime::handler::{EnqueueRequestForOwner, EventHandler};
/// use k8s_openapi::api::apps::v1::ReplicaSet;
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// let mut pod = Pod::default();
/// pod.metadata.name = Some("web-abc".into());
/// pod.metadata.namespace = Some("ns".into());
/// pod.metadata.owner_references = Some(vec![OwnerReference {
///     api_version: "apps/v1".into(), kind: "ReplicaSet".into(), name: "web".into(),
///     uid: "u1".into(), controller: Some(true), ..Default::default() }]);
/// let handler = EnqueueRequestForOwner::controller_of::<ReplicaSet>();
/// assert_eq!(handler.create(&pod)[0].to_string(), "ns/web");
/// ```
#[derive(Debug, Clone)]
pub struct EnqueueRequestForOwner {
    group: String,
    kind: String,
    owner_namespaced: bool,
    only_controller: bool,
}

impl EnqueueRequestForOwner {
    /// Enqueues the controller owner (`controller: true`) of kind `O`.
    pub fn controller_of<O>() -> Self
    where
        O: Resource<DynamicType = ()>,
        O::Scope: ScopeInfo,
    {
        Self::of_kind::<O>(true)
    }

    /// Enqueues every owner of kind `O`, controller or not.
    pub fn owners_of<O>() -> Self
    where
        O: Resource<DynamicType = ()>,
        O::Scope: ScopeInfo,
    {
        Self::of_kind::<O>(false)
    }

    /// Owners of kind `O`; only controller owners when `controller_only`.
    fn of_kind<O>(controller_only: bool) -> Self
    where
        O: Resource<DynamicType = ()>,
        O::Scope: ScopeInfo,
    {
        Self::for_kind(
            O::group(&()),
            O::kind(&()),
            <O::Scope as ScopeInfo>::NAMESPACED,
            controller_only,
        )
    }

    /// Enqueues owners of the kind named by `group` (empty for the core
    /// group) and `kind`, for kinds known only at run time.
    pub fn for_kind(
        group: impl Into<String>,
        kind: impl Into<String>,
        owner_namespaced: bool,
        only_controller: bool,
    ) -> Self {
        EnqueueRequestForOwner {
            group: group.into(),
            kind: kind.into(),
            owner_namespaced,
            only_controller,
        }
    }

    fn matches(&self, owner: &OwnerReference) -> bool {
        if self.only_controller && owner.controller != Some(true) {
            return false;
        }
        owner.kind == self.kind && group_of(&owner.api_version) == self.group
    }
}

fn group_of(api_version: &str) -> Cow<'_, str> {
    match api_version.split_once('/') {
        Some((group, _version)) => Cow::Borrowed(group),
        None => Cow::Borrowed(""),
    }
}

impl<K: Resource> EventHandler<K> for EnqueueRequestForOwner {
    fn map(&self, obj: &K) -> Vec<Request> {
        let meta = obj.meta();
        let namespace = if self.owner_namespaced {
            meta.namespace.clone().filter(|ns| !ns.is_empty())
        } else {
            None
        };
        let mut out: Vec<Request> = Vec::new();
        for owner in meta.owner_references.iter().flatten() {
            if self.matches(owner) {
                let req = Request {
                    namespace: namespace.clone(),
                    name: owner.name.clone(),
                };
                if !out.contains(&req) {
                    out.push(req);
                }
            }
        }
        out
    }
}

/// Enqueues whatever a function maps the object to.
///
/// ```
/// use controller_runtime::handler::{EnqueueRequestsFromMapFunc, EventHandler};
/// use controller_runtime::Request;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// // Every ConfigMap change reconciles the one "settings" object.
/// let handler = EnqueueRequestsFromMapFunc::new(|_cm: &ConfigMap| {
///     vec![Request::new(Some("system"), "settings")]
/// });
/// assert_eq!(handler.create(&ConfigMap::default()).len(), 1);
/// ```
pub struct EnqueueRequestsFromMapFunc<F> {
    map: F,
}

impl<F> EnqueueRequestsFromMapFunc<F> {
    /// A handler calling `map` for every event's object.
    pub fn new<K>(map: F) -> Self
    where
        F: Fn(&K) -> Vec<Request>,
    {
        EnqueueRequestsFromMapFunc { map }
    }
}

impl<K, F> EventHandler<K> for EnqueueRequestsFromMapFunc<F>
where
    F: Fn(&K) -> Vec<Request> + Send + Sync + 'static,
{
    fn map(&self, obj: &K) -> Vec<Request> {
        (self.map)(obj)
    }
}

#[cfg(test)]
mod tests;
