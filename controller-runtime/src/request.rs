//! [`Request`]: the name of one object to reconcile, and the workqueue key
//! it displays as (`namespace/name`, or `name` for cluster-scoped objects);
//! [`ClusterRequest`]: the same in one cluster of a fleet.
//!
//! Layer 0 (vocabulary): imports nothing from this crate.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use kube_core::Resource;

/// Why a [`Request`] could not be made: a malformed workqueue key, or an
/// object without a name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A workqueue key could not be turned into a [`Request`].
    #[error("invalid request key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An object without `metadata.name` cannot be reconciled.
    #[error("object has no metadata.name")]
    MissingName,
}

/// One object to reconcile: the workqueue item of a controller.
///
/// Displays as its key, `namespace/name` or `name` for cluster-scoped objects.
///
/// ```
/// use controller_runtime::Request;
/// let req = Request::new(Some("default"), "web");
/// assert_eq!(req.to_string(), "default/web");
/// assert_eq!("default/web".parse::<Request>().unwrap(), req);
/// assert_eq!(Request::new(None::<String>, "node-1").to_string(), "node-1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// Namespace of the object; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
}

impl Request {
    /// A request for `name` in `namespace`.
    pub fn new(namespace: Option<impl Into<String>>, name: impl Into<String>) -> Self {
        Request {
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    /// The request that names `obj`. An empty namespace counts as none.
    pub fn from_object<K: Resource>(obj: &K) -> Result<Self, RequestError> {
        let meta = obj.meta();
        let name = meta.name.clone().ok_or(RequestError::MissingName)?;
        let namespace = meta.namespace.clone().filter(|ns| !ns.is_empty());
        Ok(Request { namespace, name })
    }

    /// The object's key: `namespace/name`, or `name` when cluster-scoped.
    pub fn key(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

impl FromStr for Request {
    type Err = RequestError;

    fn from_str(key: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| RequestError::InvalidKey {
            key: key.to_string(),
            reason,
        };
        let mut parts = key.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(""), None, None) => Err(invalid("empty key")),
            (Some(name), None, None) => Ok(Request::new(None::<String>, name)),
            (Some(_), Some(""), None) => Err(invalid("empty name")),
            (Some(""), Some(_), None) => Err(invalid("empty namespace")),
            (Some(ns), Some(name), None) => Ok(Request::new(Some(ns), name)),
            _ => Err(invalid("more than one '/'")),
        }
    }
}

/// One object to reconcile in one cluster of a manager's fleet: the
/// workqueue item of a fleet controller (Go multicluster-runtime's
/// `mcreconcile.Request`).
///
/// Displays as `cluster/` followed by the request's key.
///
/// ```
/// use controller_runtime::{ClusterRequest, Request};
/// let req = ClusterRequest::new("edge-1", Request::new(Some("default"), "web"));
/// assert_eq!(req.to_string(), "edge-1/default/web");
/// assert_eq!(&*req.cluster, "edge-1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterRequest {
    /// The name the cluster is engaged under in the fleet.
    pub cluster: Arc<str>,
    /// The object in that cluster.
    pub request: Request,
}

impl ClusterRequest {
    /// A request for `request`'s object in the cluster `cluster`.
    pub fn new(cluster: impl Into<Arc<str>>, request: Request) -> Self {
        ClusterRequest {
            cluster: cluster.into(),
            request,
        }
    }
}

impl fmt::Display for ClusterRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.cluster, self.request)
    }
}

/// Terminal: a malformed key or a nameless object is malformed again on a
/// retry.
impl crate::terminal::Terminal for RequestError {
    fn is_terminal(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
