//! Sharding settings: which ring a replica joins, under which identity, how
//! fast its shard Lease is renewed and judged expired, and (label mode) how
//! fast the sharder writes labels.
//!
//! The timing is leader election's [`LeaseTiming`], with its rules (lease >
//! renew deadline > 1.2 x retry period, checked by
//! [`LeaseTiming::validate`]): a replica that cannot renew its
//! shard Lease within the renew deadline stops reconciling before any other
//! replica can judge the Lease expired.

use std::time::Duration;

use crate::leaderelection::{LeaderElectionConfig, LeaseTiming};

use informer_core::factory::InformerOptions;

use super::ring::Ring;

/// Errors of sharding settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A setting breaks a rule.
    #[error("invalid sharding config: {reason}")]
    Invalid {
        /// Which rule and which values.
        reason: String,
    },
}

/// An identity unique to this process, valid as a Lease name: the
/// `HOSTNAME` (the pod name in a cluster), lower-cased, followed by a random
/// suffix. Each process gets a new one, so a restarted replica joins the
/// ring as a new member and never inherits a shard its predecessor was
/// handing over.
///
/// ```
/// let a = controller_runtime::sharding::config::default_shard_identity();
/// assert_ne!(a, controller_runtime::sharding::config::default_shard_identity());
/// assert!(a.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'));
/// ```
pub fn default_shard_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .map(|h| dns_safe(&h))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "replica".to_string());
    let suffix: u32 = rand::random();
    let mut host = host;
    // At most 63 characters in all: the identity is also a label value
    // (label mode).
    host.truncate(54);
    let host = host.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{host}-{suffix:08x}")
}

fn dns_safe(s: &str) -> String {
    let lowered: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    lowered
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// How a sharded controller's replicas split the objects; see
/// [`sharding`](super) for both.
///
/// ```
/// use controller_runtime::sharding::config::{ShardMode, ShardingConfig};
/// let cfg = ShardingConfig::new("operators", "widgets").identity("replica-a");
/// assert_eq!(cfg.mode, ShardMode::Filter);
/// let cfg = cfg.mode(ShardMode::Label);
/// assert_eq!(cfg.informer_options().label_selector.as_deref(),
///            Some("sharding.informer-rs.io/widgets=replica-a"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ShardMode {
    /// Every replica caches every object; the gate admits only the keys
    /// the ring gives this replica. Saves reconcile work, not memory.
    #[default]
    Filter,
    /// The sharder labels each object with its shard; each replica's
    /// informers select their own label, so each caches about 1/N.
    Label,
}

/// Prefix of the label naming an object's shard: the label is
/// `sharding.informer-rs.io/<ring>`, its value the shard's identity.
pub(crate) const SHARD_LABEL_PREFIX: &str = "sharding.informer-rs.io/";
/// Prefix of the label the sharder sets while it moves an object away from
/// its shard: `drain.sharding.informer-rs.io/<ring>`.
pub(crate) const DRAIN_LABEL_PREFIX: &str = "drain.sharding.informer-rs.io/";

/// Which ring to join, as whom, and how fast; see the [module
/// documentation](self).
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::sharding::config::ShardingConfig;
/// let cfg = ShardingConfig::new("operators", "widgets").identity("replica-a");
/// assert!(cfg.validate().is_ok());
/// assert_eq!(cfg.shard_label(), "sharding.informer-rs.io/widgets");
/// let bad = cfg.clone().renew_deadline(Duration::from_secs(30));
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ShardingConfig {
    /// Namespace of the shard Leases, the ring's state and the sharder's
    /// Lease.
    pub namespace: String,
    /// The ring's name: the value of the ring label on its shard Leases.
    pub ring: String,
    /// This replica's identity: the name of its shard Lease.
    pub identity: String,
    /// How long a shard Lease lasts without renewal (judged by each
    /// replica's clock from when it saw the Lease change), how long a
    /// replica keeps retrying a renewal before it stops reconciling and
    /// leaves, and the wait between two renewals.
    pub timing: LeaseTiming,
    /// Points per member on the ring.
    pub virtual_nodes: u32,
    /// Filter or label mode.
    pub mode: ShardMode,
    /// Label mode: at most this many label patches of the sharder in
    /// flight at once (default [`Self::DEFAULT_RELABEL_IN_FLIGHT`]).
    pub relabel_in_flight: usize,
    /// Label mode: at most this many label patches of the sharder a
    /// second, after a burst of `relabel_in_flight` (default
    /// [`Self::DEFAULT_RELABEL_PER_SECOND`]).
    pub relabel_per_second: u32,
}

impl ShardingConfig {
    /// The default of [`relabel_in_flight`](Self::relabel_in_flight).
    pub const DEFAULT_RELABEL_IN_FLIGHT: usize = 32;
    /// The default of [`relabel_per_second`](Self::relabel_per_second).
    pub const DEFAULT_RELABEL_PER_SECOND: u32 = 5_000;

    /// Ring `ring` in `namespace`, as [`default_shard_identity`], with the
    /// leader-election defaults (15 s lease, 10 s renew deadline, 2 s retry)
    /// and the default relabelling limits.
    pub fn new(namespace: impl Into<String>, ring: impl Into<String>) -> Self {
        ShardingConfig {
            namespace: namespace.into(),
            ring: ring.into(),
            identity: default_shard_identity(),
            timing: LeaseTiming::default(),
            virtual_nodes: Ring::DEFAULT_VIRTUAL_NODES,
            mode: ShardMode::Filter,
            relabel_in_flight: Self::DEFAULT_RELABEL_IN_FLIGHT,
            relabel_per_second: Self::DEFAULT_RELABEL_PER_SECOND,
        }
    }

    /// Label mode: how fast the sharder writes labels: at most `in_flight`
    /// patches at once and `per_second` a second (both at least 1). A
    /// stopped replica's objects are relabelled at that pace, and so are
    /// all objects when a ring first forms; lower it to spare a busy API
    /// server, raise it to hand over faster.
    ///
    /// ```
    /// use controller_runtime::sharding::config::ShardingConfig;
    /// let cfg = ShardingConfig::new("operators", "widgets").relabel_limits(8, 500);
    /// assert_eq!((cfg.relabel_in_flight, cfg.relabel_per_second), (8, 500));
    /// assert!(cfg.clone().relabel_limits(0, 500).validate().is_err());
    /// ```
    pub fn relabel_limits(mut self, in_flight: usize, per_second: u32) -> Self {
        self.relabel_in_flight = in_flight;
        self.relabel_per_second = per_second;
        self
    }

    /// Sets the mode (filter by default).
    pub fn mode(mut self, mode: ShardMode) -> Self {
        self.mode = mode;
        self
    }

    /// The label naming an object's shard in this ring (label mode).
    pub fn shard_label(&self) -> String {
        format!("{SHARD_LABEL_PREFIX}{}", self.ring)
    }

    /// The label marking an object the sharder is moving away (label mode).
    pub fn drain_label(&self) -> String {
        format!("{DRAIN_LABEL_PREFIX}{}", self.ring)
    }

    /// The informer options of this replica's caches of the sharded kind
    /// and its owned kinds: in label mode a selector on this shard's label
    /// (give them to `ManagerBuilder::cache_options` for each kind), in
    /// filter mode none.
    pub fn informer_options(&self) -> InformerOptions {
        match self.mode {
            ShardMode::Filter => InformerOptions::new(),
            ShardMode::Label => InformerOptions::new().label_selector(format!(
                "{}={}",
                self.shard_label(),
                self.identity
            )),
        }
    }

    /// Sets this replica's identity (unique per process).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
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

    /// Sets the virtual nodes per member.
    pub fn virtual_nodes(mut self, n: u32) -> Self {
        self.virtual_nodes = n;
        self
    }

    /// The name of this replica's shard Lease (its identity).
    pub(crate) fn shard_lease_name(&self) -> &str {
        &self.identity
    }

    /// The name of the Lease holding the ring's state (epoch and members).
    pub(crate) fn ring_state_name(&self) -> String {
        format!("{}-sharding-ring", self.ring)
    }

    /// The name of the Lease the sharder is elected on.
    pub(crate) fn sharder_lease_name(&self) -> String {
        format!("{}-sharding-leader", self.ring)
    }

    /// The leader-election settings of the sharder's Lease (same timing and
    /// identity).
    pub(crate) fn sharder_election(&self) -> LeaderElectionConfig {
        LeaderElectionConfig::new(&self.namespace, self.sharder_lease_name(), &self.identity)
            .timing(self.timing)
    }

    /// Checks the timing rules, and that names are valid Lease names.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.sharder_election()
            .validate()
            .map_err(|e| ConfigError::Invalid {
                reason: e.to_string(),
            })?;
        let lease_name_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
                && s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !lease_name_ok(&self.identity) {
            return Err(ConfigError::Invalid {
                reason: format!("identity {:?} is not a valid Lease name", self.identity),
            });
        }
        if !lease_name_ok(&self.ring) || self.ring.len() > 63 {
            return Err(ConfigError::Invalid {
                reason: format!(
                    "ring {:?} must be a valid label value and Lease name",
                    self.ring
                ),
            });
        }
        if self.mode == ShardMode::Label && self.identity.len() > 63 {
            return Err(ConfigError::Invalid {
                reason: format!(
                    "identity {:?} is longer than 63 characters: in label mode it is a label value",
                    self.identity
                ),
            });
        }
        if self.relabel_in_flight == 0 || self.relabel_per_second == 0 {
            return Err(ConfigError::Invalid {
                reason: format!(
                    "relabel limits must be at least 1 (in flight {}, per second {})",
                    self.relabel_in_flight, self.relabel_per_second
                ),
            });
        }
        if self.timing.lease_duration < Duration::from_secs(1) {
            return Err(ConfigError::Invalid {
                reason: "lease duration must be at least 1 s (Leases count whole seconds)".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_lease_names() {
        assert_eq!(dns_safe("Pod_Name.1"), "pod-name.1");
        assert_eq!(dns_safe("__"), "");
        let cfg = ShardingConfig::new("ns", "ring");
        assert!(cfg.validate().is_ok(), "{cfg:?}");
        assert!(cfg.clone().identity("Bad_Name").validate().is_err());
        assert!(cfg.clone().identity("").validate().is_err());
        let long = "a".repeat(64);
        assert!(cfg.clone().identity(&long).validate().is_ok());
        assert!(
            cfg.clone()
                .identity(&long)
                .mode(ShardMode::Label)
                .validate()
                .is_err()
        );
        assert!(default_shard_identity().len() <= 63);
        assert!(
            cfg.clone()
                .lease_duration(Duration::from_millis(900))
                .renew_deadline(Duration::from_millis(600))
                .retry_period(Duration::from_millis(200))
                .validate()
                .is_err()
        );
        assert_eq!(
            cfg.lease_duration(Duration::from_millis(1500))
                .timing
                .lease_duration_seconds(),
            2
        );
    }
}
