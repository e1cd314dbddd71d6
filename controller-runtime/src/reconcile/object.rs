//! The typed reconcile: the object from the cache and everything needed to
//! act on it, instead of a bare [`Request`].
//!
//! An [`ObjectReconciler<K>`] is called with the `Arc<K>` the controller's
//! cache holds for the request and an [`ObjectContext<K>`]: an `Api<K>`
//! already scoped to the object's namespace, the manager's cache and client,
//! an event recorder reporting as the controller, and the per-call
//! [`CallInfo`]. When the cache has no such object any more (it was deleted,
//! and no finalizer kept it), [`ObjectReconciler::deleted`] is called with
//! the request instead: the "object is gone" case is a method, not a `None`
//! to remember to check.
//!
//! It runs on the same path as the request form: the controller wraps it in
//! an adapter that implements [`Reconciler`](super::Reconciler), reads the cache and builds the
//! context, so panics, timeouts, terminal errors, metrics and backoff behave
//! the same for both.
//!
//! ```no_run
//! use std::sync::Arc;
//! use controller_runtime::prelude::*;
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Stamp;
//!
//! impl ObjectReconciler<ConfigMap> for Stamp {
//!     type Error = kube_client::Error;
//!
//!     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &ObjectContext<ConfigMap>) -> Result<Action, Self::Error> {
//!         if cm.data.as_ref().is_none_or(|d| !d.contains_key("stamped")) {
//!             let patch = serde_json::json!({"data": {"stamped": "yes"}});
//!             ctx.api().patch(&cm.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
//!             ctx.recorder().publish(cm.as_ref(), EventInfo::normal("Stamped", "Reconcile"));
//!         }
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn demo(mgr: Manager) -> Result<(), ManagerError> {
//! mgr.controller::<ConfigMap>().named("stamp").complete(Stamp)?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::sync::Arc;

use kube_client::{Api, Client};
use serde::Serialize;

use crate::action::Action;
use crate::cache::Cache;
use crate::events::EventRecorder;
use crate::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use crate::object::{Object, ScopeInfo};
use crate::reconcile::CallInfo;
use crate::request::Request;
use crate::terminal::Terminal;

/// Brings the cluster in line with one object of kind `K`, read from the
/// cache; see the [module documentation](crate::reconcile).
pub trait ObjectReconciler<K: Object>: Send + Sync + 'static {
    /// The error a reconcile can fail with; it says whether it is terminal.
    type Error: Terminal;

    /// Reconciles `obj`, the cache's current copy of the requested object.
    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: &ObjectContext<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// The requested object is not in the cache: it was deleted. By default
    /// there is nothing to do (owned objects go with it through the garbage
    /// collector; use a finalizer for cleanup outside the cluster).
    fn deleted(
        &self,
        req: &Request,
        ctx: &ObjectContext<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        let _ = (req, ctx);
        async { Ok(Action::done()) }
    }
}

impl<K: Object, R: ObjectReconciler<K>> ObjectReconciler<K> for Arc<R> {
    type Error = R::Error;

    fn reconcile(
        &self,
        obj: Arc<K>,
        ctx: &ObjectContext<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        R::reconcile(self, obj, ctx)
    }

    fn deleted(
        &self,
        req: &Request,
        ctx: &ObjectContext<K>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send {
        R::deleted(self, req, ctx)
    }
}

/// What an [`ObjectReconciler`] gets besides the object.
#[derive(Clone)]
pub struct ObjectContext<K> {
    api: Api<K>,
    request: Request,
    call: CallInfo,
    cache: Cache,
    client: Client,
    recorder: EventRecorder,
}

impl<K: Object> std::fmt::Debug for ObjectContext<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectContext")
            .field("request", &self.request)
            .field("call", &self.call)
            .field("api", &self.api.resource_url())
            .finish_non_exhaustive()
    }
}

impl<K: Object> ObjectContext<K>
where
    K::Scope: ScopeInfo,
{
    /// A context for `request` from the pieces a controller holds.
    pub fn new(
        request: Request,
        call: CallInfo,
        cache: Cache,
        client: Client,
        recorder: EventRecorder,
    ) -> Self {
        ObjectContext {
            api: <K::Scope as ScopeInfo>::api(client.clone(), request.namespace.as_deref()),
            request,
            call,
            cache,
            client,
            recorder,
        }
    }
}

impl<K: Object> ObjectContext<K> {
    /// An `Api<K>` for the object's namespace (all namespaces for a
    /// cluster-scoped kind).
    pub fn api(&self) -> &Api<K> {
        &self.api
    }

    /// An `Api` for another kind in the object's namespace, for example
    /// the kind it owns (all namespaces for a cluster-scoped kind).
    pub fn api_for<T>(&self) -> Api<T>
    where
        T: Object,
        T::Scope: ScopeInfo,
    {
        <T::Scope as ScopeInfo>::api(self.client.clone(), self.request.namespace.as_deref())
    }

    /// The request being reconciled.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The object's namespace; `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.request.namespace.as_deref()
    }

    /// The cluster the object is in (the one [`api`](Self::api),
    /// [`cache`](Self::cache), [`client`](Self::client) and
    /// [`recorder`](Self::recorder) reach): a fleet member's name, or `""`
    /// for the manager's own cluster (as
    /// [`Cluster::name`](crate::cluster::Cluster::name) spells it).
    pub fn cluster(&self) -> &str {
        &self.call.cluster
    }

    /// The per-call information: controller name, reconcile id, retries.
    pub fn call(&self) -> &CallInfo {
        &self.call
    }

    /// The cache-backed reader (of the object's cluster).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The client (of the object's cluster).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// An event recorder reporting as this controller.
    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// Runs the [finalizer](crate::finalizer) flow for `obj` through this
    /// context's `Api<K>`: adds `name` to a live object, calls `step` with
    /// [`FinalizerEvent::Apply`] or, once the object is being deleted,
    /// [`FinalizerEvent::Cleanup`], and removes the finalizer after a
    /// successful cleanup.
    pub async fn finalizer<F, Fut, E>(
        &self,
        name: &str,
        obj: Arc<K>,
        step: F,
    ) -> Result<Action, FinalizerError<E>>
    where
        K: Serialize,
        F: FnOnce(FinalizerEvent<K>) -> Fut,
        Fut: Future<Output = Result<Action, E>>,
        E: std::error::Error + 'static,
    {
        finalizer(&self.api, name, obj, step).await
    }
}
