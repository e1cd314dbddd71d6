//! What one server instance owns (storage, the resource registry, faults,
//! settings, allocators, authorization) and what a resource URL names. Every
//! handler of the HTTP layer receives these; nothing below the HTTP layer
//! sees them.

use crate::http::authz::Authz;
use crate::http::faults::Faults;
use crate::resources::defaults::IpAllocator;
use crate::resources::registry::{Registry, ResourceInfo};
use crate::storage::Store;
use std::sync::Arc;
use std::time::Duration;

/// Where webhook `clientConfig.service` references go: `namespace/name:port`
/// or `namespace/name` (any port) to `host:port`.
pub type ServiceMap = std::collections::BTreeMap<String, String>;

/// Server settings fixed at start.
#[derive(Debug, Clone)]
pub struct Config {
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Longest a request may take until its answer starts (504 beyond).
    pub request_timeout: Duration,
    /// `host:port` the server listens on.
    pub addr: String,
    /// When set, every request but health checks must carry
    /// `Authorization: Bearer <token>` (401 otherwise).
    pub bearer_token: Option<String>,
    /// Serve the test-only admin endpoints (`/envtest/v1/...`, see `admin`).
    pub admin: bool,
    /// Where webhook `clientConfig.service` references are sent.
    pub webhook_services: ServiceMap,
    /// Serve JSON only: protobuf ranges of `Accept` are passed over (406
    /// when nothing else is left) and protobuf bodies are 415.
    pub json_only: bool,
}

/// Everything one server instance owns.
pub struct Server {
    /// Object storage.
    pub store: Arc<Store>,
    /// Served resources.
    pub registry: Registry,
    /// Fault controls and request log.
    pub faults: Faults,
    /// Settings.
    pub config: Config,
    /// ClusterIPs handed to Services.
    pub ips: IpAllocator,
    /// Service-account tokens, authorized by the stored RBAC objects.
    pub authz: Authz,
}

/// What a resource URL names.
pub struct Target {
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// Namespace from the URL.
    pub namespace: Option<String>,
    /// Object name from the URL.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub sub: Option<String>,
}
