//! Label mode's vocabulary: which shard an object's labels name, whether it
//! is being drained, and what the sharder does next with it.
//!
//! In label mode an object's shard is the value of its label
//! `sharding.informer-rs.io/<ring>`; each replica's informers select on their
//! own value, so a replica caches and reconciles only its own objects. A
//! move is a handshake, so that two replicas never reconcile one object at
//! once:
//!
//! 1. the sharder adds `drain.sharding.informer-rs.io/<ring>` to an object its
//!    ring gives to another shard;
//! 2. the old shard, once no reconcile of the object is in flight, removes
//!    both labels (its acknowledgment; the object leaves its cache);
//! 3. the sharder labels the unlabelled object with its new shard (its
//!    owned objects first, then the object).
//!
//! A shard that has stopped (no longer a member of the ring state, which the
//! sharder reads afresh *after* it looked at the labels: members leave only
//! once stopped) cannot acknowledge; its objects are relabelled directly.
//! All writes are merge patches carrying the `resourceVersion` the decision
//! was made on, so a decision on a stale view fails with a conflict instead
//! of overwriting a newer one.
//!
//! Reconcilers that create owned objects give them their owner's shard
//! label with [`copy_shard_labels`], so that the new object is in the
//! shard's cache at once (the sharder would label it anyway, a moment
//! later).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::config::{DRAIN_LABEL_PREFIX, SHARD_LABEL_PREFIX};

/// What an object's labels say about its shard in one ring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Labelled {
    /// The shard label's value, if set.
    pub(crate) shard: Option<String>,
    /// Whether the drain label is set.
    pub(crate) draining: bool,
}

impl Labelled {
    /// Reads `labels` for the shard label `shard_label` and the drain label
    /// `drain_label`.
    pub(crate) fn of(
        labels: Option<&BTreeMap<String, String>>,
        shard_label: &str,
        drain_label: &str,
    ) -> Labelled {
        Labelled {
            shard: labels
                .and_then(|l| l.get(shard_label))
                .filter(|s| !s.is_empty())
                .cloned(),
            draining: labels.is_some_and(|l| l.contains_key(drain_label)),
        }
    }
}

/// What the sharder does with one object; see [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Where it belongs: nothing to do.
    Keep,
    /// Unlabelled: label it (and its owned objects first) with the target.
    Assign,
    /// Its shard is alive and the ring gives it to another: ask the shard
    /// to let go (set the drain label).
    Drain,
    /// Draining, waiting for its shard to acknowledge.
    Wait,
    /// Draining but the ring gives it back to its shard: remove the drain
    /// label (the shard never stopped owning it).
    Undrain,
    /// Its shard has stopped: label it with the target directly.
    Reassign,
}

/// What the sharder does with an object labelled `now` when the ring (of
/// `members`, read afresh after the labels were) gives its key to `target`.
pub(crate) fn decide(now: &Labelled, target: &str, members: &[String]) -> Decision {
    match &now.shard {
        None => Decision::Assign,
        Some(shard) if shard == target => {
            if now.draining {
                Decision::Undrain
            } else {
                Decision::Keep
            }
        }
        Some(shard) if !members.iter().any(|m| m == shard) => Decision::Reassign,
        Some(_) if now.draining => Decision::Wait,
        Some(_) => Decision::Drain,
    }
}

/// Copies every shard label (of any ring, never a drain label) from
/// `owner` to `child`, for a reconciler creating an object it owns.
///
/// ```
/// use std::collections::BTreeMap;
/// use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use controller_runtime::sharding::copy_shard_labels;
/// let owner = ObjectMeta {
///     labels: Some(BTreeMap::from([
///         ("sharding.informer-rs.io/widgets".to_string(), "replica-a".to_string()),
///         ("drain.sharding.informer-rs.io/widgets".to_string(), "true".to_string()),
///         ("app".to_string(), "web".to_string()),
///     ])),
///     ..Default::default()
/// };
/// let mut child = ObjectMeta::default();
/// copy_shard_labels(&owner, &mut child);
/// assert_eq!(child.labels.unwrap().len(), 1);
/// ```
pub fn copy_shard_labels(owner: &ObjectMeta, child: &mut ObjectMeta) {
    let shard_labels: Vec<(String, String)> = owner
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(SHARD_LABEL_PREFIX) && !k.starts_with(DRAIN_LABEL_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !shard_labels.is_empty() {
        child
            .labels
            .get_or_insert_with(BTreeMap::new)
            .extend(shard_labels);
    }
}

/// The merge patch that sets (or, with `None`, removes) the shard label
/// and removes the drain label, guarded by `resource_version`.
pub(super) fn relabel_patch(
    shard_label: &str,
    drain_label: &str,
    shard: Option<&str>,
    resource_version: &str,
) -> serde_json::Value {
    serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "labels": { shard_label: shard, drain_label: null },
        }
    })
}

/// The merge patch that sets the drain label, guarded by
/// `resource_version`.
pub(super) fn drain_patch(drain_label: &str, resource_version: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "labels": { drain_label: "true" },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_one_decision() {
        let members = ["a".to_string(), "b".to_string()];
        let l = |shard: Option<&str>, draining| Labelled {
            shard: shard.map(str::to_string),
            draining,
        };
        assert_eq!(decide(&l(Some("a"), false), "a", &members), Decision::Keep);
        assert_eq!(
            decide(&l(Some("a"), true), "a", &members),
            Decision::Undrain
        );
        assert_eq!(decide(&l(Some("a"), false), "b", &members), Decision::Drain);
        assert_eq!(decide(&l(Some("a"), true), "b", &members), Decision::Wait);
        assert_eq!(
            decide(&l(Some("x"), true), "b", &members),
            Decision::Reassign
        );
        assert_eq!(decide(&l(None, true), "b", &members), Decision::Assign);
        // An empty label value is no label.
        let labels = BTreeMap::from([("s".to_string(), String::new())]);
        assert_eq!(Labelled::of(Some(&labels), "s", "d").shard, None);
    }

    #[test]
    fn patches_carry_the_resource_version_and_clear_the_drain_label() {
        let p = relabel_patch("s", "d", None, "7");
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert!(p["metadata"]["labels"]["s"].is_null());
        assert!(p["metadata"]["labels"]["d"].is_null());
        assert_eq!(
            relabel_patch("s", "d", Some("b"), "7")["metadata"]["labels"]["s"],
            "b"
        );
        assert_eq!(drain_patch("d", "8")["metadata"]["labels"]["d"], "true");
    }
}

/// The examples that were this module's doc tests before it became
/// crate-private.
#[cfg(test)]
mod examples {
    #[test]
    fn a_live_owner_drains_before_a_move() {
        use crate::sharding::labels::{Decision, Labelled, decide};
        let members = ["a".to_string(), "b".to_string()];
        let now = Labelled {
            shard: Some("a".into()),
            draining: false,
        };
        // The ring now gives the object to b, and a is alive: drain it first.
        assert_eq!(decide(&now, "b", &members), Decision::Drain);
    }

    #[test]
    fn labels_name_the_shard_and_the_drain() {
        use crate::sharding::labels::Labelled;
        use std::collections::BTreeMap;
        let labels = BTreeMap::from([("sharding.informer-rs.io/r".to_string(), "a".to_string())]);
        let l = Labelled::of(
            Some(&labels),
            "sharding.informer-rs.io/r",
            "drain.sharding.informer-rs.io/r",
        );
        assert_eq!(l.shard.as_deref(), Some("a"));
        assert!(!l.draining);
    }

    #[test]
    fn decisions_by_state() {
        use crate::sharding::labels::{Decision, Labelled, decide};
        let members = ["a".to_string(), "b".to_string()];
        let draining = Labelled {
            shard: Some("a".into()),
            draining: true,
        };
        assert_eq!(decide(&draining, "b", &members), Decision::Wait);
        assert_eq!(decide(&draining, "a", &members), Decision::Undrain);
        let gone = Labelled {
            shard: Some("c".into()),
            draining: false,
        };
        assert_eq!(decide(&gone, "b", &members), Decision::Reassign);
        assert_eq!(
            decide(&Labelled::default(), "b", &members),
            Decision::Assign
        );
    }
}
