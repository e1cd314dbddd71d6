//! The objects that left the controller's selection: no shard caches them
//! any more, so the sharder unlabels them itself.

use informer_core::selector::LabelSelector;
use kube_client::core::metadata::PartialObjectMeta;
use parking_lot::Mutex;

use super::Entry;
use crate::sharding::labels::Labelled;

/// The objects seen leaving the controller's label selection while they
/// carried a shard or drain label.
#[derive(Default)]
pub(super) struct Left {
    /// The controller's label selector of the kind; `None`: everything.
    pub(super) selector: Option<LabelSelector>,
    pub(super) shard_label: String,
    pub(super) drain_label: String,
    pub(super) entries: Mutex<Vec<Entry>>,
}

impl Left {
    /// Notes `m`, just deleted from the sharder's cache, if it left the
    /// selection with a shard label on; true if so.
    pub(super) fn note<K>(&self, m: &PartialObjectMeta<K>) -> bool {
        let Some(selector) = &self.selector else {
            return false;
        };
        static NO_LABELS: std::collections::BTreeMap<String, String> =
            std::collections::BTreeMap::new();
        let labels = m.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        let labelled = Labelled::of(Some(labels), &self.shard_label, &self.drain_label);
        let gone = m.metadata.deletion_timestamp.is_some();
        if gone || selector.matches(labels) || (labelled.shard.is_none() && !labelled.draining) {
            return false;
        }
        let Some(name) = m.metadata.name.clone() else {
            return false;
        };
        self.entries.lock().push(Entry {
            namespace: m.metadata.namespace.clone(),
            key: name.clone(),
            name,
            labelled,
            resource_version: m.metadata.resource_version.clone().unwrap_or_default(),
        });
        true
    }
}
