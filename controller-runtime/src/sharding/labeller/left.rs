//! The controller's selection as the sharder sees it: the user's selector
//! without the shard's own requirements, and the objects that left it (no
//! shard caches them any more, so the sharder unlabels them itself).

use informer_core::factory::InformerOptions;
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

/// `options` without the label requirements on `keys` (`k=v`, `k!=v`,
/// `k in (..)`, `k notin (..)`, `k`, `!k`).
pub(in crate::sharding) fn without_labels(
    options: InformerOptions,
    keys: &[String],
) -> InformerOptions {
    let Some(selector) = options.label_selector.clone() else {
        return options;
    };
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    let kept: Vec<&str> = terms
        .into_iter()
        .map(str::trim)
        .filter(|t| {
            let key = t
                .trim_start_matches('!')
                .split(|c: char| "=!<> ".contains(c))
                .next()
                .unwrap_or_default();
            !t.is_empty() && !keys.iter().any(|k| k == key)
        })
        .collect();
    InformerOptions {
        label_selector: (!kept.is_empty()).then(|| kept.join(",")),
        ..options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shards_own_requirements_are_not_the_users_selection() {
        let keys = [
            "sharding.informer-rs.io/r".to_string(),
            "drain.sharding.informer-rs.io/r".to_string(),
        ];
        let both = InformerOptions::new().label_selector(
            "probe=1,sharding.informer-rs.io/r=a, env in (x,y),!drain.sharding.informer-rs.io/r",
        );
        assert_eq!(
            without_labels(both, &keys).label_selector.as_deref(),
            Some("probe=1,env in (x,y)")
        );
        let shard_only = InformerOptions::new().label_selector("sharding.informer-rs.io/r=a");
        assert_eq!(without_labels(shard_only, &keys).label_selector, None);
        assert_eq!(
            without_labels(InformerOptions::new(), &keys),
            InformerOptions::new()
        );
    }
}
