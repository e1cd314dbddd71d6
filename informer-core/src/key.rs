//! Object keys and tombstones.
//!
//! Layer 0: imports nothing else of this crate.
//!
//! Every cache in this crate (the [`DeltaFifo`](crate::delta_fifo::DeltaFifo),
//! the [`Indexer`](crate::store::Indexer)) identifies an object by its *key*:
//! `namespace/name` for namespaced objects and plain `name` for cluster-scoped
//! ones, exactly as client-go's `MetaNamespaceKeyFunc` does. This module makes
//! and splits keys, and defines the *tombstone* ([`DeletedFinalStateUnknown`])
//! that stands for a delete the informer inferred after a relist rather than
//! saw on the watch.

use std::sync::Arc;

use kube_core::Resource;

/// Errors from [`split_key`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The key was the empty string.
    #[error("invalid object key: the key is empty")]
    Empty,
    /// The key had more than one `/`.
    #[error(
        "invalid object key {key:?}: expected \"namespace/name\" or \"name\", found more than one '/'"
    )]
    TooManySlashes {
        /// The key as given.
        key: String,
    },
    /// One side of the `/` was empty (`"/name"` or `"namespace/"`).
    #[error("invalid object key {key:?}: the {part} before or after '/' is empty")]
    EmptyPart {
        /// The key as given.
        key: String,
        /// Which part was empty: `"namespace"` or `"name"`.
        part: &'static str,
    },
}

/// The cache key of an object: `"namespace/name"`, or `"name"` when the
/// object has no namespace (cluster-scoped).
///
/// An object without a name (which the API server never returns) gets the
/// empty name.
///
/// ```
/// use informer_core::key::object_key;
/// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
/// use kube_core::ObjectMeta;
///
/// let cm = ConfigMap {
///     metadata: ObjectMeta { name: Some("cfg".into()), namespace: Some("prod".into()), ..Default::default() },
///     ..Default::default()
/// };
/// assert_eq!(object_key(&cm), "prod/cfg");
///
/// let ns = Namespace {
///     metadata: ObjectMeta { name: Some("prod".into()), ..Default::default() },
///     ..Default::default()
/// };
/// assert_eq!(object_key(&ns), "prod");
/// ```
pub fn object_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => {
            let mut key = String::with_capacity(ns.len() + 1 + name.len());
            key.push_str(ns);
            key.push('/');
            key.push_str(name);
            key
        }
        _ => name.to_owned(),
    }
}

/// [`object_key`] as a shared string, built with a single allocation. The
/// FIFO and the indexer share this one string per object.
pub(crate) fn object_key_arc<K: Resource>(obj: &K) -> Arc<str> {
    /// Longest namespace (63) + `/` + longest name (253).
    const MAX_KEY: usize = 317;
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => {
            let len = ns.len() + 1 + name.len();
            if len > MAX_KEY {
                return Arc::from(object_key(obj));
            }
            let mut buf = [0u8; MAX_KEY];
            buf[..ns.len()].copy_from_slice(ns.as_bytes());
            buf[ns.len()] = b'/';
            buf[ns.len() + 1..len].copy_from_slice(name.as_bytes());
            match std::str::from_utf8(&buf[..len]) {
                Ok(key) => Arc::from(key),
                Err(_) => Arc::from(object_key(obj)),
            }
        }
        _ => Arc::from(name),
    }
}

/// Splits a key made by [`object_key`] into `(namespace, name)`.
///
/// `"ns/name"` gives `(Some("ns"), "name")`, `"name"` gives `(None, "name")`.
/// Empty keys, empty parts and keys with more than one `/` are errors.
///
/// ```
/// use informer_core::key::split_key;
///
/// assert_eq!(split_key("prod/cfg").unwrap(), (Some("prod"), "cfg"));
/// assert_eq!(split_key("node-1").unwrap(), (None, "node-1"));
/// assert!(split_key("a/b/c").is_err());
/// ```
pub fn split_key(key: &str) -> Result<(Option<&str>, &str), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    let mut parts = key.split('/');
    let first = parts.next().unwrap_or_default();
    let Some(second) = parts.next() else {
        return Ok((None, first));
    };
    if parts.next().is_some() {
        return Err(KeyError::TooManySlashes {
            key: key.to_owned(),
        });
    }
    if first.is_empty() {
        return Err(KeyError::EmptyPart {
            key: key.to_owned(),
            part: "namespace",
        });
    }
    if second.is_empty() {
        return Err(KeyError::EmptyPart {
            key: key.to_owned(),
            part: "name",
        });
    }
    Ok((Some(first), second))
}

/// A delete the informer inferred rather than saw: after a relist, an object
/// that was cached but is absent from the new list was deleted while the
/// watch was down. `obj` is the last state of the object the informer knew,
/// which may be stale.
#[derive(Debug, Clone)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key of the deleted object.
    pub key: String,
    /// The newest state of the object known before it disappeared.
    pub obj: Arc<K>,
}

/// What a delete notification carries: the object as last seen on the watch,
/// or a [`DeletedFinalStateUnknown`] tombstone when the delete was inferred.
#[derive(Debug, Clone)]
pub enum ObjectOrTombstone<K> {
    /// An object (as seen on the watch or in a list).
    Object(Arc<K>),
    /// An inferred delete, with the last known state of the object.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> ObjectOrTombstone<K> {
    /// The object, or the tombstone's last known object.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use informer_core::key::{DeletedFinalStateUnknown, ObjectOrTombstone};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    ///
    /// let cm = Arc::new(ConfigMap::default());
    /// let t = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown { key: "ns/a".into(), obj: cm.clone() });
    /// assert!(Arc::ptr_eq(t.object(), &cm));
    /// assert!(t.is_tombstone());
    /// ```
    pub fn object(&self) -> &Arc<K> {
        match self {
            ObjectOrTombstone::Object(obj) => obj,
            ObjectOrTombstone::Tombstone(t) => &t.obj,
        }
    }

    /// Whether this is an inferred delete.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, ObjectOrTombstone::Tombstone(_))
    }

    /// Consumes `self`, giving the object (or the tombstone's object).
    pub fn into_object(self) -> Arc<K> {
        match self {
            ObjectOrTombstone::Object(obj) => obj,
            ObjectOrTombstone::Tombstone(t) => t.obj,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube_core::ObjectMeta;

    fn cm(ns: Option<&str>, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: ns.map(Into::into),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn namespaced_key_is_namespace_slash_name() {
        assert_eq!(object_key(&cm(Some("ns"), "a")), "ns/a");
    }

    #[test]
    fn cluster_scoped_key_is_name() {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some("kube-system".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(object_key(&ns), "kube-system");
        // An empty namespace string counts as no namespace.
        assert_eq!(object_key(&cm(Some(""), "a")), "a");
    }

    #[test]
    fn shared_key_equals_key() {
        let long = "n".repeat(400);
        for (ns, name) in [
            (Some("ns"), "a"),
            (None, "a"),
            (Some(""), "a"),
            (Some("ns"), long.as_str()),
            (Some("ns"), "ünï"),
        ] {
            let obj = cm(ns, name);
            assert_eq!(&*object_key_arc(&obj), object_key(&obj));
        }
    }

    #[test]
    fn split_round_trips() {
        for (ns, name) in [(Some("ns"), "a"), (None, "a")] {
            let key = object_key(&cm(ns, name));
            assert_eq!(split_key(&key).unwrap(), (ns, name));
        }
    }

    #[test]
    fn split_rejects_bad_keys() {
        assert_eq!(split_key(""), Err(KeyError::Empty));
        assert!(matches!(
            split_key("a/b/c"),
            Err(KeyError::TooManySlashes { .. })
        ));
        assert!(matches!(
            split_key("/b"),
            Err(KeyError::EmptyPart {
                part: "namespace",
                ..
            })
        ));
        assert!(matches!(
            split_key("a/"),
            Err(KeyError::EmptyPart { part: "name", .. })
        ));
        let msg = split_key("a/b/c").unwrap_err().to_string();
        assert!(msg.contains("a/b/c"), "{msg}");
    }

    #[test]
    fn object_or_tombstone_accessors() {
        let obj = Arc::new(cm(Some("ns"), "a"));
        let o = ObjectOrTombstone::Object(obj.clone());
        assert!(!o.is_tombstone());
        assert!(Arc::ptr_eq(o.object(), &obj));
        let t = ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/a".into(),
            obj: obj.clone(),
        });
        assert!(t.is_tombstone());
        assert!(Arc::ptr_eq(&t.into_object(), &obj));
    }
}
