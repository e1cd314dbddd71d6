//! Filters deciding which informer events reach a controller's handlers.
//!
//! Layer 1 (building blocks): imports nothing else of this crate.
//!
//! A [`Predicate`] answers yes or no for each create, update, delete and
//! generic event; an event is enqueued only when every predicate of the
//! controller says yes. Ready-made predicates compare what changed in an
//! update ([`GenerationChanged`], [`ResourceVersionChanged`],
//! [`LabelsChanged`], [`AnnotationsChanged`]) or test labels
//! ([`LabelSelectorPredicate`]); [`and`], [`or`] and [`not`] combine them,
//! and [`Funcs`] / [`from_fn`] build one from closures.
//!
//! ```
//! use controller_runtime::predicate::{or, GenerationChanged, LabelsChanged, Predicate};
//! use k8s_openapi::api::apps::v1::Deployment;
//! // Reconcile on spec changes or label changes, not on status-only updates.
//! let p = or(GenerationChanged, LabelsChanged);
//! let old = Deployment::default();
//! let mut new = old.clone();
//! new.status = Some(Default::default());
//! assert!(!Predicate::<Deployment>::update(&p, &old, &new));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use informer_core::selector::LabelSelector;
use kube_core::Resource;

/// Decides whether an event of kind `K` is passed on. Every method defaults
/// to `true`.
pub trait Predicate<K>: Send + Sync + 'static {
    /// Whether a create (or initial-list add) passes.
    fn create(&self, _obj: &K) -> bool {
        true
    }
    /// Whether an update passes.
    fn update(&self, _old: &K, _new: &K) -> bool {
        true
    }
    /// Whether a delete passes.
    fn delete(&self, _obj: &K) -> bool {
        true
    }
    /// Whether a generic event passes.
    fn generic(&self, _obj: &K) -> bool {
        true
    }
}

/// Implements [`Predicate`] for a smart pointer by forwarding every event to
/// the predicate it points to.
macro_rules! forward_predicate {
    ($($ptr:ident),+) => {$(
        impl<K, P: Predicate<K> + ?Sized> Predicate<K> for $ptr<P> {
            fn create(&self, obj: &K) -> bool {
                (**self).create(obj)
            }
            fn update(&self, old: &K, new: &K) -> bool {
                (**self).update(old, new)
            }
            fn delete(&self, obj: &K) -> bool {
                (**self).delete(obj)
            }
            fn generic(&self, obj: &K) -> bool {
                (**self).generic(obj)
            }
        }
    )+};
}

forward_predicate!(Arc, Box);

/// Passes updates whose `metadata.generation` changed, i.e. spec changes;
/// skips status-only and metadata-only updates. Other events pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerationChanged;

impl<K: Resource> Predicate<K> for GenerationChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        old.meta().generation != new.meta().generation
    }
}

/// Passes updates whose `metadata.resourceVersion` changed, skipping the
/// periodic resync updates that carry the same object. Other events pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceVersionChanged;

impl<K: Resource> Predicate<K> for ResourceVersionChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        old.meta().resource_version != new.meta().resource_version
    }
}

fn map_or_empty(m: &Option<BTreeMap<String, String>>) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    m.as_ref().unwrap_or(&EMPTY)
}

/// Passes updates whose labels changed (an absent map equals an empty one).
/// Other events pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct LabelsChanged;

impl<K: Resource> Predicate<K> for LabelsChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        map_or_empty(&old.meta().labels) != map_or_empty(&new.meta().labels)
    }
}

/// Passes updates whose annotations changed (an absent map equals an empty
/// one). Other events pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnnotationsChanged;

impl<K: Resource> Predicate<K> for AnnotationsChanged {
    fn update(&self, old: &K, new: &K) -> bool {
        map_or_empty(&old.meta().annotations) != map_or_empty(&new.meta().annotations)
    }
}

/// Passes events whose object's labels match a selector (for updates, the
/// new object's labels).
///
/// ```
/// use controller_runtime::predicate::{LabelSelectorPredicate, Predicate};
/// use k8s_openapi::api::core::v1::Pod;
/// let p = LabelSelectorPredicate::new("app=web,tier!=cache".parse().unwrap());
/// let mut pod = Pod::default();
/// assert!(!p.create(&pod));
/// pod.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
/// assert!(p.create(&pod));
/// ```
#[derive(Debug, Clone)]
pub struct LabelSelectorPredicate {
    selector: LabelSelector,
}

impl LabelSelectorPredicate {
    /// A predicate passing objects whose labels match `selector`.
    pub fn new(selector: LabelSelector) -> Self {
        LabelSelectorPredicate { selector }
    }

    fn matches<K: Resource>(&self, obj: &K) -> bool {
        self.selector.matches(map_or_empty(&obj.meta().labels))
    }
}

impl<K: Resource> Predicate<K> for LabelSelectorPredicate {
    fn create(&self, obj: &K) -> bool {
        self.matches(obj)
    }
    fn update(&self, _old: &K, new: &K) -> bool {
        self.matches(new)
    }
    fn delete(&self, obj: &K) -> bool {
        self.matches(obj)
    }
    fn generic(&self, obj: &K) -> bool {
        self.matches(obj)
    }
}

/// Passes an event when both predicates pass it (the second is not asked
/// when the first says no).
#[derive(Debug, Clone, Copy)]
pub struct And<A, B>(pub A, pub B);
/// Passes an event when either predicate passes it.
#[derive(Debug, Clone, Copy)]
pub struct Or<A, B>(pub A, pub B);
/// Passes an event when the inner predicate rejects it.
#[derive(Debug, Clone, Copy)]
pub struct Not<P>(pub P);

macro_rules! combine {
    ($ty:ident, $op:tt) => {
        impl<K, A: Predicate<K>, B: Predicate<K>> Predicate<K> for $ty<A, B> {
            fn create(&self, obj: &K) -> bool {
                self.0.create(obj) $op self.1.create(obj)
            }
            fn update(&self, old: &K, new: &K) -> bool {
                self.0.update(old, new) $op self.1.update(old, new)
            }
            fn delete(&self, obj: &K) -> bool {
                self.0.delete(obj) $op self.1.delete(obj)
            }
            fn generic(&self, obj: &K) -> bool {
                self.0.generic(obj) $op self.1.generic(obj)
            }
        }
    };
}
combine!(And, &&);
combine!(Or, ||);

impl<K, P: Predicate<K>> Predicate<K> for Not<P> {
    fn create(&self, obj: &K) -> bool {
        !self.0.create(obj)
    }
    fn update(&self, old: &K, new: &K) -> bool {
        !self.0.update(old, new)
    }
    fn delete(&self, obj: &K) -> bool {
        !self.0.delete(obj)
    }
    fn generic(&self, obj: &K) -> bool {
        !self.0.generic(obj)
    }
}

/// Both `a` and `b`.
pub fn and<A, B>(a: A, b: B) -> And<A, B> {
    And(a, b)
}
/// Either `a` or `b`.
pub fn or<A, B>(a: A, b: B) -> Or<A, B> {
    Or(a, b)
}
/// The opposite of `p`.
pub fn not<P>(p: P) -> Not<P> {
    Not(p)
}

/// Passes an event when every predicate in the list passes it (an empty
/// list passes everything). For lists built at run time.
pub struct All<K>(pub Vec<Box<dyn Predicate<K>>>);
/// Passes an event when any predicate in the list passes it (an empty list
/// passes nothing).
pub struct Any<K>(pub Vec<Box<dyn Predicate<K>>>);

impl<K: 'static> Predicate<K> for All<K> {
    fn create(&self, obj: &K) -> bool {
        self.0.iter().all(|p| p.create(obj))
    }
    fn update(&self, old: &K, new: &K) -> bool {
        self.0.iter().all(|p| p.update(old, new))
    }
    fn delete(&self, obj: &K) -> bool {
        self.0.iter().all(|p| p.delete(obj))
    }
    fn generic(&self, obj: &K) -> bool {
        self.0.iter().all(|p| p.generic(obj))
    }
}

impl<K: 'static> Predicate<K> for Any<K> {
    fn create(&self, obj: &K) -> bool {
        self.0.iter().any(|p| p.create(obj))
    }
    fn update(&self, old: &K, new: &K) -> bool {
        self.0.iter().any(|p| p.update(old, new))
    }
    fn delete(&self, obj: &K) -> bool {
        self.0.iter().any(|p| p.delete(obj))
    }
    fn generic(&self, obj: &K) -> bool {
        self.0.iter().any(|p| p.generic(obj))
    }
}

type ObjFn<K> = Box<dyn Fn(&K) -> bool + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&K, &K) -> bool + Send + Sync>;

/// A predicate made of one optional closure per event; a missing closure
/// passes the event.
///
/// ```
/// use controller_runtime::predicate::{Funcs, Predicate};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let ignore_deletes = Funcs::<ConfigMap>::new().on_delete(|_| false);
/// assert!(!ignore_deletes.delete(&ConfigMap::default()));
/// assert!(ignore_deletes.create(&ConfigMap::default()));
/// ```
#[must_use]
pub struct Funcs<K> {
    create: Option<ObjFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<ObjFn<K>>,
    generic: Option<ObjFn<K>>,
}

impl<K> Default for Funcs<K> {
    fn default() -> Self {
        Funcs {
            create: None,
            update: None,
            delete: None,
            generic: None,
        }
    }
}

impl<K> Funcs<K> {
    /// A predicate passing everything until closures are set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Decide creates with `f`.
    pub fn on_create(mut self, f: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.create = Some(Box::new(f));
        self
    }
    /// Decide updates with `f(old, new)`.
    pub fn on_update(mut self, f: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Decide deletes with `f`.
    pub fn on_delete(mut self, f: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
    /// Decide generic events with `f`.
    pub fn on_generic(mut self, f: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.generic = Some(Box::new(f));
        self
    }
}

impl<K: 'static> Predicate<K> for Funcs<K> {
    fn create(&self, obj: &K) -> bool {
        self.create.as_ref().is_none_or(|f| f(obj))
    }
    fn update(&self, old: &K, new: &K) -> bool {
        self.update.as_ref().is_none_or(|f| f(old, new))
    }
    fn delete(&self, obj: &K) -> bool {
        self.delete.as_ref().is_none_or(|f| f(obj))
    }
    fn generic(&self, obj: &K) -> bool {
        self.generic.as_ref().is_none_or(|f| f(obj))
    }
}

/// A predicate testing the object of every event with `f` (for updates, the
/// new object).
///
/// ```
/// use controller_runtime::predicate::{from_fn, Predicate};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let named = from_fn(|cm: &ConfigMap| cm.metadata.name.as_deref() == Some("settings"));
/// assert!(!named.create(&ConfigMap::default()));
/// ```
pub fn from_fn<K: 'static>(f: impl Fn(&K) -> bool + Send + Sync + 'static) -> FromFn<K> {
    FromFn(Box::new(f))
}

/// See [`from_fn`].
pub struct FromFn<K>(ObjFn<K>);

impl<K: 'static> Predicate<K> for FromFn<K> {
    fn create(&self, obj: &K) -> bool {
        (self.0)(obj)
    }
    fn update(&self, _old: &K, new: &K) -> bool {
        (self.0)(new)
    }
    fn delete(&self, obj: &K) -> bool {
        (self.0)(obj)
    }
    fn generic(&self, obj: &K) -> bool {
        (self.0)(obj)
    }
}

#[cfg(test)]
mod tests;
