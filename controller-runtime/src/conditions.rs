//! Status conditions with apimachinery's rules (`meta.SetStatusCondition`,
//! `FindStatusCondition`, `RemoveStatusCondition`, `IsStatusConditionTrue`),
//! and the `observedGeneration` a status reports.
//!
//! This sits in the client layer: it only edits values a reconciler then
//! writes (with [`patch_status`](crate::client::patch_status) or
//! [`create_or_patch`](crate::client::create_or_patch)). The rules are
//! apimachinery's, so a status written here reads the same to `kubectl wait
//! --for=condition=...` and to Go tooling:
//!
//! - Setting a condition whose type is absent appends it, with
//!   `lastTransitionTime` set to now if it was left unset.
//! - Setting one that exists changes `lastTransitionTime` only when `status`
//!   changes (to the given time if it was set, else now); `reason`,
//!   `message` and `observedGeneration` are copied as given.
//! - Removing one keeps the order of the others.
//!
//! [`Conditions`] offers these on a `Vec<Condition>` and on an
//! `Option<Vec<Condition>>` (the two shapes a status struct uses), so any
//! status holding conditions works without a trait of its own.
//!
//! ```
//! use controller_runtime::conditions::{ConditionExt, ConditionStatus, Conditions, condition};
//! use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
//!
//! let mut conditions: Option<Vec<Condition>> = None;
//! let ready = condition("Ready", ConditionStatus::False, "Creating", "waiting for pods");
//! assert!(conditions.set_condition(ready.observed_generation(3)));
//! assert!(conditions.is_condition_false("Ready"));
//! let first = conditions.find_condition("Ready").unwrap().last_transition_time.clone();
//!
//! // Same status, new message: the transition time stays.
//! let ready = condition("Ready", ConditionStatus::False, "Creating", "1 of 2 pods");
//! assert!(conditions.set_condition(ready.observed_generation(3)));
//! assert_eq!(conditions.find_condition("Ready").unwrap().last_transition_time, first);
//!
//! // Nothing new: nothing changes, and the caller need not write.
//! let ready = condition("Ready", ConditionStatus::False, "Creating", "1 of 2 pods");
//! assert!(!conditions.set_condition(ready.observed_generation(3)));
//! ```

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube_core::Resource;

/// The three values of a condition's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"`.
    Unknown,
}

impl ConditionStatus {
    /// The wire value.
    ///
    /// ```
    /// use controller_runtime::conditions::ConditionStatus;
    /// assert_eq!(ConditionStatus::Unknown.as_str(), "Unknown");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// The value [`condition`] leaves in `lastTransitionTime` to mean "unset"
/// (Go's zero time): the Unix epoch. A condition set with it gets the
/// current time instead.
pub const UNSET_TRANSITION_TIME: Timestamp = Timestamp::UNIX_EPOCH;

/// A condition of `type_` with `status`, `reason` and `message`, its
/// `lastTransitionTime` unset ([`UNSET_TRANSITION_TIME`]) and no
/// `observedGeneration`: ready for [`Conditions::set_condition`].
///
/// ```
/// use controller_runtime::conditions::{ConditionStatus, condition};
/// let c = condition("Ready", true, "Available", "all replicas ready");
/// assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "True"));
/// assert_eq!(c.observed_generation, None);
/// # let _ = ConditionStatus::True;
/// ```
pub fn condition(
    type_: impl Into<String>,
    status: impl Into<ConditionStatus>,
    reason: impl Into<String>,
    message: impl Into<String>,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into().as_str().to_owned(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: None,
        last_transition_time: Time(UNSET_TRANSITION_TIME),
    }
}

/// Builder-style additions to a [`Condition`].
pub trait ConditionExt: Sized {
    /// The condition with `observedGeneration` set (pass
    /// [`observed_generation`] of the object it describes).
    ///
    /// ```
    /// use controller_runtime::conditions::{ConditionExt, condition};
    /// let c = condition("Ready", true, "Available", "").observed_generation(Some(4));
    /// assert_eq!(c.observed_generation, Some(4));
    /// ```
    #[must_use]
    fn observed_generation(self, generation: impl Into<Option<i64>>) -> Self;
}

impl ConditionExt for Condition {
    fn observed_generation(mut self, generation: impl Into<Option<i64>>) -> Self {
        self.observed_generation = generation.into();
        self
    }
}

/// The generation a status should report as observed once `obj` has been
/// reconciled: its `metadata.generation` (`None` for kinds without one).
///
/// ```
/// use controller_runtime::conditions::observed_generation;
/// use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
/// let mut d = Deployment::default();
/// d.metadata.generation = Some(7);
/// assert_eq!(observed_generation(&d), Some(7));
/// ```
pub fn observed_generation<K: Resource>(obj: &K) -> Option<i64> {
    obj.meta().generation
}

/// Whether a status that reports `observed` as its `observedGeneration` is
/// up to date with `obj`'s spec: `observed` is at least its generation (an
/// object without a generation is always up to date).
///
/// ```
/// use controller_runtime::conditions::is_generation_observed;
/// use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
/// let mut d = Deployment::default();
/// d.metadata.generation = Some(2);
/// assert!(!is_generation_observed(&d, Some(1)));
/// assert!(is_generation_observed(&d, Some(2)));
/// assert!(!is_generation_observed(&d, None));
/// ```
pub fn is_generation_observed<K: Resource>(obj: &K, observed: Option<i64>) -> bool {
    match (obj.meta().generation, observed) {
        (None, _) => true,
        (Some(generation), Some(observed)) => observed >= generation,
        (Some(_), None) => false,
    }
}

/// The current time, truncated to seconds as it is written on the wire, so
/// a condition read back from the server compares equal to the one set.
fn now() -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn is_unset(time: &Time) -> bool {
    time.0 <= UNSET_TRANSITION_TIME
}

/// Sets `new` in `conditions` with apimachinery's rules (see the module
/// docs), `now` standing in for the current time. Returns whether anything
/// changed.
fn set_in(conditions: &mut Vec<Condition>, mut new: Condition, now: Timestamp) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        if is_unset(&new.last_transition_time) {
            new.last_transition_time = Time(now);
        }
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = if is_unset(&new.last_transition_time) {
            Time(now)
        } else {
            new.last_transition_time
        };
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// apimachinery's condition functions on the places a status keeps its
/// conditions: `Vec<Condition>` and `Option<Vec<Condition>>`.
///
/// ```
/// use controller_runtime::conditions::{Conditions, condition};
/// use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
/// let mut conditions: Vec<Condition> = Vec::new();
/// conditions.set_condition(condition("Ready", true, "Up", ""));
/// conditions.set_condition(condition("Degraded", false, "Fine", ""));
/// assert!(conditions.is_condition_true("Ready"));
/// assert!(conditions.remove_condition("Ready"));
/// assert_eq!(conditions.len(), 1);
/// ```
pub trait Conditions {
    /// The conditions held (none for an empty `Option`).
    fn conditions(&self) -> &[Condition];

    /// Sets `new` at the time `now` (apimachinery's `SetStatusCondition`
    /// with an explicit clock); returns whether anything changed.
    fn set_condition_at(&mut self, new: Condition, now: Timestamp) -> bool;

    /// Removes the condition of `type_`, keeping the order of the others;
    /// returns whether there was one.
    fn remove_condition(&mut self, type_: &str) -> bool;

    /// Sets `new` (apimachinery's `SetStatusCondition`): appended if its
    /// type is absent, its time set to now if unset; otherwise
    /// `lastTransitionTime` changes only when `status` does. Returns whether
    /// anything changed (write the status only then).
    fn set_condition(&mut self, new: Condition) -> bool {
        self.set_condition_at(new, now())
    }

    /// The condition of `type_`, if present.
    fn find_condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions().iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is present with `status`.
    fn is_condition_present_and_equal(&self, type_: &str, status: ConditionStatus) -> bool {
        self.find_condition(type_)
            .is_some_and(|c| c.status == status.as_str())
    }

    /// Whether the condition of `type_` is present and `"True"`.
    fn is_condition_true(&self, type_: &str) -> bool {
        self.is_condition_present_and_equal(type_, ConditionStatus::True)
    }

    /// Whether the condition of `type_` is present and `"False"`.
    fn is_condition_false(&self, type_: &str) -> bool {
        self.is_condition_present_and_equal(type_, ConditionStatus::False)
    }
}

impl Conditions for Vec<Condition> {
    fn conditions(&self) -> &[Condition] {
        self
    }

    fn set_condition_at(&mut self, new: Condition, now: Timestamp) -> bool {
        set_in(self, new, now)
    }

    fn remove_condition(&mut self, type_: &str) -> bool {
        let before = self.len();
        self.retain(|c| c.type_ != type_);
        self.len() != before
    }
}

impl Conditions for Option<Vec<Condition>> {
    fn conditions(&self) -> &[Condition] {
        self.as_deref().unwrap_or_default()
    }

    fn set_condition_at(&mut self, new: Condition, now: Timestamp) -> bool {
        set_in(self.get_or_insert_with(Vec::new), new, now)
    }

    fn remove_condition(&mut self, type_: &str) -> bool {
        self.as_mut().is_some_and(|c| c.remove_condition(type_))
    }
}

#[cfg(test)]
mod tests;
