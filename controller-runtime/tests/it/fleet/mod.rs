//! Fleets: one manager reconciling across many clusters, each an envtest
//! server of its own in this process. `providers` engages clusters (a
//! static list, labelled Secrets) and reports those that fail;
//! `controllers` reconciles in five clusters engaged and disengaged while
//! their objects change, and goes on when one cluster's server dies;
//! `derive` runs a `#[derive(Controller)]` with `fleet` under its
//! generated RBAC; `memory` sees a disengaged cluster's cache freed;
//! `sharded` spreads a fleet controller's `(cluster, key)`s over replicas;
//! `trust` refuses kubeconfig Secrets with credentials from outside them
//! and logs none of a Secret's data; `disengage` sees a leaving member's
//! running reconcile cancelled; `isolation` freezes two members while a
//! third keeps its pace; `restart` kills a member's API server and
//! starts it again, empty or from its data, and sees it reconciled again;
//! `health` sees a member that answers but whose informers cannot sync
//! kept out of `Ready`; `engage_hooks` keeps members out by the fleet's
//! filter and by a failing engage hook, and runs a provider written as an
//! `async fn`; `field_index` lists by a fleet-wide field index in every
//! member; `warm_followers` sees a new leader find its members' caches
//! synced, without listing them again; `member_client` sees a member
//! client's capped read buffer and its read timeout at work. `fixture`
//! holds their shared set-up.

mod controllers;
mod derive;
mod disengage;
mod engage_hooks;
mod field_index;
mod fixture;
mod health;
mod isolation;
mod member_client;
mod memory;
mod providers;
mod restart;
mod sharded;
mod trust;
mod warm_followers;

use std::time::Duration;

use controller_runtime::cluster::{ClusterHealth, EngageBackoff};
use controller_runtime::manager::Manager;

/// Retries and looks far shorter than the waits below (>= 5x margins).
pub fn fast_backoff() -> EngageBackoff {
    EngageBackoff::default()
        .initial(Duration::from_millis(50))
        .max(Duration::from_millis(400))
        .probe_interval(Duration::from_millis(100))
        .probe_timeout(Duration::from_secs(2))
}

/// The limit of every wait on a condition here.
pub const LONG: Duration = Duration::from_secs(20);

/// Whether the fleet's cluster `name` answers.
pub fn ready(mgr: &Manager, name: &str) -> bool {
    mgr.fleet().health(name) == Some(ClusterHealth::Ready)
}

/// How often the fleet's cluster `name` failed in a row (0 if it answers).
pub fn failures(mgr: &Manager, name: &str) -> u64 {
    match mgr.fleet().health(name) {
        Some(ClusterHealth::Failing { failures, .. }) => failures,
        _ => 0,
    }
}
