//! Where the lease lives: the [`LeaseLock`] trait, its implementation over a
//! `coordination.k8s.io/v1` Lease, and the pure rules that decide, from an
//! observed lease, whether a candidate may take or renew it.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube_client::Api;
use kube_client::api::PostParams;
use tokio::time::Instant;

use super::LeaderElectionError;

/// Reads and writes one Lease. Writes are conflict-safe: `update` sends the
/// lease's `resourceVersion` and fails with
/// [`LeaderElectionError::Conflict`] when another candidate wrote first, as
/// `create` does when the lease already exists.
pub trait LeaseLock: Send + Sync + 'static {
    /// The current lease, or `None` when it does not exist.
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, LeaderElectionError>>;
    /// Creates the lease.
    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaderElectionError>>;
    /// Replaces the lease, guarded by its `resourceVersion`.
    fn update(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaderElectionError>>;
    /// `namespace/name` of the lease, for logs and errors.
    fn describe(&self) -> String;
}

/// A [`LeaseLock`] over the API server's Lease objects.
#[derive(Clone)]
pub struct ApiLeaseLock {
    api: Api<Lease>,
    namespace: String,
    name: String,
}

impl ApiLeaseLock {
    /// The lock for Lease `namespace/name`.
    pub fn new(client: kube_client::Client, namespace: &str, name: &str) -> Self {
        ApiLeaseLock {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

fn api_error(op: &'static str, lease: String, source: kube_client::Error) -> LeaderElectionError {
    match &source {
        kube_client::Error::Api(status) if status.code == 409 => {
            LeaderElectionError::Conflict { lease }
        }
        _ => LeaderElectionError::Api { op, lease, source },
    }
}

impl LeaseLock for ApiLeaseLock {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, LeaderElectionError>> {
        Box::pin(async move {
            self.api
                .get_opt(&self.name)
                .await
                .map_err(|e| api_error("get", self.describe(), e))
        })
    }

    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaderElectionError>> {
        Box::pin(async move {
            self.api
                .create(&PostParams::default(), &lease)
                .await
                .map_err(|e| api_error("create", self.describe(), e))
        })
    }

    fn update(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaderElectionError>> {
        Box::pin(async move {
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
                .map_err(|e| api_error("update", self.describe(), e))
        })
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The lease as last seen by a candidate, and when (by its local clock) it
/// was first seen in that state.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub lease: Lease,
    pub at: Instant,
}

impl Observed {
    /// Records `lease`, keeping the old observation time when the lease's
    /// spec did not change since the last look.
    pub(super) fn update(previous: Option<&Observed>, lease: Lease, now: Instant) -> Observed {
        match previous {
            Some(prev) if prev.lease.spec == lease.spec => Observed { lease, at: prev.at },
            _ => Observed { lease, at: now },
        }
    }

    /// The holder named in the lease, if any (an empty holder is none).
    pub(super) fn holder(&self) -> Option<&str> {
        holder(&self.lease)
    }
}

pub(crate) fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// What a candidate may do with an observed lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// We hold it: write a renewal.
    Renew,
    /// Free or expired: take it (a new holder increments the transitions).
    Acquire,
    /// Someone else holds an unexpired lease: wait.
    Wait {
        /// When the lease expires by our clock unless it changes.
        expires_at: Instant,
    },
}

/// Decides from what we observed, judged by our clock at `now`.
/// `fallback_duration` is used when the lease names no duration.
pub(crate) fn decide(
    observed: &Observed,
    identity: &str,
    now: Instant,
    fallback_duration: Duration,
) -> Decision {
    match observed.holder() {
        Some(h) if h == identity => Decision::Renew,
        None => Decision::Acquire,
        Some(_) => {
            let duration = observed
                .lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s.unsigned_abs())))
                .unwrap_or(fallback_duration);
            let expires_at = observed.at + duration;
            if now >= expires_at {
                Decision::Acquire
            } else {
                Decision::Wait { expires_at }
            }
        }
    }
}

/// The spec `identity` writes when it takes or renews `current` (or creates
/// the lease when `current` is `None`).
pub(crate) fn next_spec(
    current: Option<&LeaseSpec>,
    identity: &str,
    lease_duration_seconds: i32,
    wall_now: jiff::Timestamp,
) -> LeaseSpec {
    let now = MicroTime(wall_now);
    let held_by_us = current
        .and_then(|s| s.holder_identity.as_deref())
        .is_some_and(|h| h == identity);
    let transitions = current.and_then(|s| s.lease_transitions).unwrap_or(0);
    let mut spec = current.cloned().unwrap_or_default();
    spec.holder_identity = Some(identity.to_string());
    spec.lease_duration_seconds = Some(lease_duration_seconds);
    spec.renew_time = Some(now.clone());
    if held_by_us {
        spec.lease_transitions = Some(transitions);
        if spec.acquire_time.is_none() {
            spec.acquire_time = Some(now);
        }
    } else {
        spec.acquire_time = Some(now);
        spec.lease_transitions = Some(if current.is_some() {
            transitions.saturating_add(1)
        } else {
            0
        });
    }
    spec
}

/// The spec a leader writes when it steps down: no holder, so any candidate
/// takes over at its next attempt.
pub(crate) fn released_spec(current: Option<&LeaseSpec>, wall_now: jiff::Timestamp) -> LeaseSpec {
    let mut spec = current.cloned().unwrap_or_default();
    spec.holder_identity = Some(String::new());
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(wall_now));
    spec
}

/// A new Lease object named `name` in `namespace` with `spec`.
pub(crate) fn new_lease(namespace: &str, name: &str, spec: LeaseSpec) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        spec: Some(spec),
    }
}
