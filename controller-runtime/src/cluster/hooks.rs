//! What a program adds to every engagement of its fleet: a filter deciding
//! which clusters engage at all ([`Fleet::filter`](super::Fleet::filter),
//! on a [`ClusterInfo`]: the name and labels a provider gives), and hooks
//! run on each engaged cluster once it answers, before it is attached
//! ([`Fleet::on_engage`](super::Fleet::on_engage)); a hook that fails keeps
//! the cluster out (`Failing`, retried with the fleet's backoff).

use std::any::TypeId;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::Cluster;
use crate::error::BoxError;

/// What a provider says of a cluster it engages: its name and labels (a
/// [`SecretProvider`](super::SecretProvider)'s are the Secret's labels),
/// which the fleet's [filter](super::Fleet::filter) decides on.
///
/// ```
/// use std::collections::BTreeMap;
/// use controller_runtime::cluster::ClusterInfo;
/// let info = ClusterInfo::new("edge-1")
///     .with_labels(BTreeMap::from([("region".to_string(), "eu".to_string())]));
/// assert_eq!(info.name(), "edge-1");
/// assert_eq!(info.label("region"), Some("eu"));
/// assert_eq!(info.label("zone"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    name: String,
    labels: BTreeMap<String, String>,
}

impl ClusterInfo {
    /// The cluster `name`, without labels.
    pub fn new(name: impl Into<String>) -> Self {
        ClusterInfo {
            name: name.into(),
            labels: BTreeMap::new(),
        }
    }

    /// Sets its labels.
    #[must_use]
    pub fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value of its label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// All its labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
}

/// Decides whether a cluster engages.
pub(super) type Filter = Arc<dyn Fn(&ClusterInfo) -> bool + Send + Sync>;

/// One engage hook, by name.
#[derive(Clone)]
pub(super) struct Hook {
    pub(super) name: Arc<str>,
    run: Arc<dyn Fn(Cluster) -> BoxFuture<'static, Result<(), BoxError>> + Send + Sync>,
}

impl Hook {
    pub(super) fn new<F, Fut>(name: impl Into<String>, hook: F) -> Self
    where
        F: Fn(Cluster) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let name: String = name.into();
        Hook {
            name: name.into(),
            run: Arc::new(move |cluster| Box::pin(hook(cluster))),
        }
    }
}

/// Run on each member as it is engaged, before its informers start.
pub(super) type MemberSetup = Arc<dyn Fn(&Cluster) + Send + Sync>;

/// The fleet's filter, hooks and field indexes.
#[derive(Default)]
pub(super) struct EveryMember {
    pub(super) filter: Mutex<Option<Filter>>,
    pub(super) hooks: Mutex<Vec<Hook>>,
    /// The fleet-wide field indexes, by kind and field.
    pub(super) indexes: Mutex<HashSet<(TypeId, String)>>,
}

impl EveryMember {
    /// Whether the filter (if any) lets `info` engage.
    pub(super) fn admits(&self, info: &ClusterInfo) -> bool {
        let filter = self.filter.lock().clone();
        filter.is_none_or(|keep| keep(info))
    }

    pub(super) fn hooks(&self) -> Vec<Hook> {
        self.hooks.lock().clone()
    }
}

/// Runs `hooks` on `cluster` in order; the first failure, naming its hook.
pub(super) async fn run_hooks(hooks: &[Hook], cluster: &Cluster) -> Result<(), String> {
    for hook in hooks {
        if let Err(error) = (hook.run)(cluster.clone()).await {
            return Err(format!("engage hook {:?} failed: {error}", hook.name));
        }
        tracing::debug!(cluster = %cluster.name(), hook = %hook.name, "engage hook done");
    }
    Ok(())
}
