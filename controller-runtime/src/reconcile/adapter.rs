//! How a controller runs either form of reconciler: [`ObjectAdapter`] turns
//! an [`ObjectReconciler`] into a [`Reconciler`] (read the cache, build the
//! context, call `reconcile` or `deleted`), and [`IntoReconciler`] lets
//! [`complete`](crate::controller::ControllerBuilder::complete) take both
//! forms (Go's `reconcile.AsReconciler`).
//!
//! Layer 3 (typed reconcile): machinery the controller uses; users meet
//! only [`IntoReconciler`], the bound of `complete`, and its markers.

use kube_client::Client;

use super::{CallInfo, ObjectContext, ObjectReconciler, Reconciler};
use crate::action::Action;
use crate::cache::{Cache, CacheError};
use crate::events::EventRecorder;
use crate::object::{Object, ScopeInfo};
use crate::request::Request;
use crate::terminal::Terminal;

/// The error of a typed reconcile as the controller sees it: the
/// reconciler's own, or a failed cache read before it was called.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError<E: std::error::Error + 'static> {
    /// The reconciler failed.
    #[error(transparent)]
    Reconcile(E),
    /// The object could not be read from the cache.
    #[error("reading the object from the cache: {0}")]
    Cache(#[source] CacheError),
}

impl<E: Terminal> Terminal for ObjectError<E> {
    fn is_terminal(&self) -> bool {
        match self {
            ObjectError::Reconcile(e) => e.is_terminal(),
            ObjectError::Cache(_) => false,
        }
    }
}

/// Runs an [`ObjectReconciler`] as a [`Reconciler`]: reads the object from
/// the cache, builds the context and calls `reconcile` or `deleted`.
pub struct ObjectAdapter<K, R> {
    inner: R,
    cache: Cache,
    client: Client,
    recorder: EventRecorder,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: Object, R: ObjectReconciler<K>> ObjectAdapter<K, R>
where
    K::Scope: ScopeInfo,
{
    /// Adapts `inner` to read from `cache`, act through `client` and report
    /// events through `recorder`.
    pub fn new(inner: R, cache: Cache, client: Client, recorder: EventRecorder) -> Self {
        ObjectAdapter {
            inner,
            cache,
            client,
            recorder,
            _kind: std::marker::PhantomData,
        }
    }
}

impl<K: Object, R: ObjectReconciler<K>> Reconciler for ObjectAdapter<K, R>
where
    K::Scope: ScopeInfo,
{
    type Error = ObjectError<R::Error>;

    async fn reconcile(&self, req: Request, call: CallInfo) -> Result<Action, Self::Error> {
        let cached = self
            .cache
            .get::<K>(req.namespace.as_deref(), &req.name)
            .await
            .map_err(ObjectError::Cache)?;
        let ctx = ObjectContext::<K>::new(
            req,
            call,
            self.cache.clone(),
            self.client.clone(),
            self.recorder.clone(),
        );
        let result = match cached {
            Some(obj) => self.inner.reconcile(obj, &ctx).await,
            None => self.inner.deleted(ctx.request(), &ctx).await,
        };
        result.map_err(ObjectError::Reconcile)
    }
}

/// What [`complete`](crate::controller::ControllerBuilder::complete) takes:
/// a [`Reconciler`] (the request form, marker [`ByRequest`]) or an
/// [`ObjectReconciler<K>`] (the typed form, marker [`ByObject`]). The marker
/// `M` is inferred, so a caller never writes it; name the bound in a
/// function that hands a reconciler on to `complete`.
///
/// Implemented for every reconciler of either form (and so for sharding's
/// wrapper, a `Reconciler`); sealed: users implement [`Reconciler`] or
/// [`ObjectReconciler`], never this.
///
/// ```no_run
/// use controller_runtime::prelude::*;
/// use controller_runtime::reconcile::IntoReconciler;
///
/// /// Registers `reconciler` under `name`, whichever form it has.
/// fn register<K: Object, M>(
///     mgr: &Manager,
///     name: &str,
///     reconciler: impl IntoReconciler<K, M>,
/// ) -> Result<controller_runtime::controller::Controller, ManagerError> {
///     mgr.controller::<K>().named(name).complete(reconciler)
/// }
/// ```
pub trait IntoReconciler<K, M>: sealed::Sealed<K, M> + Send + Sync + 'static {
    /// The request-form reconciler the controller runs.
    type Reconciler: Reconciler;

    /// The reconciler, reading from `cache`, acting through `client` and
    /// reporting events through `recorder` (called by the controller).
    fn into_reconciler(
        self,
        cache: &Cache,
        client: &Client,
        recorder: EventRecorder,
    ) -> Self::Reconciler;
}

/// Marks a [`Reconciler`] (the request form) for [`IntoReconciler`].
#[derive(Debug)]
pub enum ByRequest {}

/// Marks an [`ObjectReconciler`] (the typed form) for [`IntoReconciler`].
#[derive(Debug)]
pub enum ByObject {}

/// Seals [`IntoReconciler`]: only the two blanket impls below exist.
mod sealed {
    /// Implemented exactly where [`IntoReconciler`](super::IntoReconciler) is.
    pub trait Sealed<K, M> {}
}

impl<K, R: Reconciler> sealed::Sealed<K, ByRequest> for R {}

impl<K: Object, R: ObjectReconciler<K>> sealed::Sealed<K, ByObject> for R where K::Scope: ScopeInfo {}

impl<K, R: Reconciler> IntoReconciler<K, ByRequest> for R {
    type Reconciler = R;

    fn into_reconciler(self, _: &Cache, _: &Client, _: EventRecorder) -> R {
        self
    }
}

impl<K: Object, R: ObjectReconciler<K>> IntoReconciler<K, ByObject> for R
where
    K::Scope: ScopeInfo,
{
    type Reconciler = ObjectAdapter<K, R>;

    fn into_reconciler(
        self,
        cache: &Cache,
        client: &Client,
        recorder: EventRecorder,
    ) -> ObjectAdapter<K, R> {
        ObjectAdapter::new(self, cache.clone(), client.clone(), recorder)
    }
}
