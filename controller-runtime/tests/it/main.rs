//! Integration tests of controller-runtime against an in-process API server
//! (`envtest`) over real HTTP, on the real clock; the webhook server over
//! real TLS (`webhook*`).

// Test helpers outside #[test] functions may unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cache_metadata;
mod cache_scope;
mod chaos;
mod client;
mod client_helpers;
mod controller;
mod dynamic;
mod events;
mod finalizer;
mod fixture;
mod fleet;
mod hostile;
mod kubernetes_versions;
mod leaderelection;
mod manager;
mod metrics_secure;
mod module_graph;
mod rbac_scope;
mod reconciler;
mod served;
mod sharding;
mod sharding_controller;
mod sharding_derive;
mod sharding_fleet;
mod shutdown;
mod typed;
mod webhook;
mod webhook_certs;
mod webhook_client;
mod webhook_conversion;
mod webhook_derive;
mod webhook_envtest;
mod webhook_kinds;
mod webhook_manager;
mod widget;

use std::time::Duration;

/// Polls `check` every 20 ms until it returns `Some`, or fails after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A ConfigMap named `name` in `ns`.
pub fn config_map(ns: &str, name: &str) -> k8s_openapi::api::core::v1::ConfigMap {
    let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(ns.into());
    cm
}
