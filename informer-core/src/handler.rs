//! What an informer calls when the cache changes: the [`ResourceEventHandler`]
//! trait (client-go's `ResourceEventHandler`) and [`HandlerFns`], a handler
//! built from closures (client-go's `ResourceEventHandlerFuncs`).
//!
//! Layer 1: imports only [`crate::key`]. The [processor](crate::processor)
//! delivers to handlers; [`crate::shared_informer`] re-exports them.

use std::sync::Arc;

use crate::key::ObjectOrTombstone;

/// Receives the changes of an informer's cache, one call per change, in order.
///
/// Calls come from the handler's own task (never from the informer's), so a
/// slow handler only delays itself; a panic is caught, logged, and the next
/// notification is delivered as usual. Handlers should still be quick: the
/// usual body puts a key on a work queue.
///
/// Every method has an empty default, so implement only what you need.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use informer_core::shared_informer::ResourceEventHandler;
///
/// struct Logger;
/// impl ResourceEventHandler<Pod> for Logger {
///     fn on_add(&self, pod: Arc<Pod>, is_in_initial_list: bool) {
///         tracing::info!(name = ?pod.metadata.name, is_in_initial_list, "pod added");
///     }
/// }
/// ```
pub trait ResourceEventHandler<K>: Send + Sync + 'static {
    /// An object entered the cache. `is_in_initial_list` is true for objects
    /// of the first LIST (before the informer synced) and for the replay of the
    /// cache to a handler registered late.
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object in the cache changed, or (when `old` and `new` have the same
    /// resourceVersion) a periodic resync re-delivered it.
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        let _ = (old, new);
    }

    /// An object left the cache. A tombstone means the delete was inferred
    /// after a relist and carries the last state the informer knew.
    fn on_delete(&self, obj: ObjectOrTombstone<K>) {
        let _ = obj;
    }
}

impl<K, H> ResourceEventHandler<K> for Arc<H>
where
    H: ResourceEventHandler<K> + ?Sized,
{
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        (**self).on_add(obj, is_in_initial_list);
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        (**self).on_update(old, new);
    }
    fn on_delete(&self, obj: ObjectOrTombstone<K>) {
        (**self).on_delete(obj);
    }
}

type AddFn<K> = Box<dyn Fn(Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(Arc<K>, Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(ObjectOrTombstone<K>) + Send + Sync>;

/// A [`ResourceEventHandler`] made of closures; unset ones do nothing.
/// Start one with [`handler_fn`].
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use informer_core::shared_informer::handler_fn;
///
/// let handler = handler_fn::<ConfigMap>()
///     .on_add(|cm, initial| tracing::info!(name = ?cm.metadata.name, initial, "added"))
///     .on_delete(|gone| tracing::info!(name = ?gone.object().metadata.name, "deleted"));
/// # let _ = handler;
/// ```
#[must_use]
pub struct HandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

/// Starts a closure-based handler: chain [`HandlerFns::on_add`],
/// [`HandlerFns::on_update`] and [`HandlerFns::on_delete`].
pub fn handler_fn<K>() -> HandlerFns<K> {
    HandlerFns {
        add: None,
        update: None,
        delete: None,
    }
}

impl<K> HandlerFns<K> {
    /// Sets the closure called for added objects (`obj`, `is_in_initial_list`).
    pub fn on_add(mut self, f: impl Fn(Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the closure called for updated objects (`old`, `new`).
    pub fn on_update(mut self, f: impl Fn(Arc<K>, Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the closure called for deleted objects (object or tombstone).
    pub fn on_delete(mut self, f: impl Fn(ObjectOrTombstone<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for HandlerFns<K> {
    fn on_add(&self, obj: Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }
    fn on_delete(&self, obj: ObjectOrTombstone<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }
}
