//! The kinds this crate works with: the [`Object`] bound every cached and
//! reconciled kind meets, and [`ScopeInfo`], which tells a namespaced kind
//! from a cluster-scoped one.
//!
//! Layer 0 (vocabulary): imports nothing from this crate.
//!
//! ```
//! use controller_runtime::object::{Object, ScopeInfo};
//! use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
//! fn namespaced<K: Object>() -> bool where K::Scope: ScopeInfo {
//!     <K::Scope as ScopeInfo>::NAMESPACED
//! }
//! assert!(namespaced::<ConfigMap>());
//! assert!(!namespaced::<Namespace>());
//! ```

use std::fmt;

use kube_core::Resource;
use serde::de::DeserializeOwned;

/// The bounds of a kind the manager can cache and reconcile: a typed
/// Kubernetes resource (static type information) that can be decoded and
/// shared between tasks.
pub trait Object:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
}

impl<T> Object for T where
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
}

/// Whether a `Resource` kind is namespaced, from its `Scope`, and how to
/// reach one of its objects through the API.
pub trait ScopeInfo: Sized {
    /// `true` for namespaced kinds.
    const NAMESPACED: bool;

    /// An `Api` for objects of `K` in `namespace`: namespaced when `K` is
    /// namespaced and a namespace is given, else across the cluster.
    fn api<K>(client: kube_client::Client, namespace: Option<&str>) -> kube_client::Api<K>
    where
        K: kube_core::Resource<Scope = Self, DynamicType = ()>;
}
impl ScopeInfo for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;

    fn api<K>(client: kube_client::Client, namespace: Option<&str>) -> kube_client::Api<K>
    where
        K: kube_core::Resource<Scope = Self, DynamicType = ()>,
    {
        match namespace {
            Some(ns) if !ns.is_empty() => kube_client::Api::namespaced(client, ns),
            _ => kube_client::Api::all(client),
        }
    }
}
impl ScopeInfo for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;

    fn api<K>(client: kube_client::Client, _namespace: Option<&str>) -> kube_client::Api<K>
    where
        K: kube_core::Resource<Scope = Self, DynamicType = ()>,
    {
        kube_client::Api::all(client)
    }
}
