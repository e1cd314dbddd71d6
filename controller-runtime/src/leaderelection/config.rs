//! Leader-election settings, their defaults and their validation.

use std::time::Duration;

use super::LeaderElectionError;
use super::timing::LeaseTiming;

/// An identity unique to this process: the `HOSTNAME` (the pod name in a
/// cluster) followed by a random suffix, so two processes on one host differ.
///
/// ```
/// let a = controller_runtime::leaderelection::default_identity();
/// let b = controller_runtime::leaderelection::default_identity();
/// assert_ne!(a, b);
/// ```
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string());
    let suffix: u64 = rand::random();
    format!("{host}_{suffix:016x}")
}

/// Which Lease to compete for, as whom, and how fast.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::leaderelection::LeaderElectionConfig;
/// let cfg = LeaderElectionConfig::new("kube-system", "my-operator", "pod-a");
/// assert_eq!(cfg.timing.lease_duration, Duration::from_secs(15));
/// assert!(cfg.validate().is_ok());
/// let bad = cfg.clone().renew_deadline(Duration::from_secs(20));
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This candidate's identity, unique among the candidates (a pod name).
    pub identity: String,
    /// Lease duration, renew deadline (how long the leader keeps retrying
    /// a renewal before it stops leading) and retry period.
    pub timing: LeaseTiming,
    /// Whether to release the lease (empty holder) when stopped, so that a
    /// successor takes over at once.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// Settings with the defaults: lease 15 s, renew deadline 10 s, retry
    /// 2 s, release on cancel.
    pub fn new(
        lease_namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderElectionConfig {
            lease_namespace: lease_namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            timing: LeaseTiming::default(),
            release_on_cancel: true,
        }
    }

    /// Sets the lease duration.
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.timing = self.timing.lease_duration(d);
        self
    }

    /// Sets the renew deadline.
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.timing = self.timing.renew_deadline(d);
        self
    }

    /// Sets the retry period.
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.timing = self.timing.retry_period(d);
        self
    }

    /// Sets the lease duration, renew deadline and retry period at once.
    pub fn timing(mut self, timing: LeaseTiming) -> Self {
        self.timing = timing;
        self
    }

    /// Sets whether the lease is released when the elector is cancelled.
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Checks lease > renew deadline > 1.2 x retry period, a non-zero retry
    /// period, and non-empty names.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let invalid = |reason: String| Err(LeaderElectionError::InvalidConfig { reason });
        if self.identity.is_empty() {
            return invalid("identity must not be empty".into());
        }
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() {
            return invalid("lease name and namespace must not be empty".into());
        }
        self.timing.validate().or_else(|e| invalid(e.to_string()))
    }
}
