//! Rendering manifests: any Kubernetes object the crate builds (a
//! `ClusterRole` from [`rbac`](crate::rbac), a CRD from [`crd`](crate::crd),
//! webhook configurations and Services, a manager's `Deployment` from
//! `manager::deployment`, a sharded one from `sharding::manifests`) as YAML or
//! JSON, with its `apiVersion` and `kind`, ready for `kubectl apply -f`.
//!
//! Layer 1 (building blocks): imports nothing else of this crate.
//!
//! ```
//! use controller_runtime::k8s_openapi::api::core::v1::Service;
//! let mut svc = Service::default();
//! svc.metadata.name = Some("webhook-service".into());
//! let yaml = controller_runtime::manifests::to_yaml(&svc)?;
//! assert!(yaml.starts_with("apiVersion: v1\nkind: Service\n"));
//! # Ok::<(), controller_runtime::manifests::RenderError>(())
//! ```

use serde::Serialize;

/// Why a manifest could not be rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// The manifest could not be written as YAML.
    #[error("could not render the manifest as YAML: {0}")]
    Yaml(#[source] serde_saphyr::SerializeError),
    /// The manifest could not be written as JSON.
    #[error("could not render the manifest as JSON: {0}")]
    Json(#[source] serde_json::Error),
}

/// Renders a manifest as YAML with `apiVersion` and `kind`.
///
/// ```
/// let role = controller_runtime::rbac::Permissions::new().leases().cluster_role("x");
/// let yaml = controller_runtime::manifests::to_yaml(&role)?;
/// assert!(yaml.starts_with("apiVersion: rbac.authorization.k8s.io/v1\n"));
/// # Ok::<(), controller_runtime::manifests::RenderError>(())
/// ```
pub fn to_yaml<T: Serialize>(manifest: &T) -> Result<String, RenderError> {
    serde_saphyr::to_string(manifest).map_err(RenderError::Yaml)
}

/// Renders a manifest as pretty JSON with `apiVersion` and `kind`.
///
/// ```
/// let role = controller_runtime::rbac::Permissions::new().events().cluster_role("x");
/// let json = controller_runtime::manifests::to_json(&role)?;
/// assert!(json.contains("\"kind\": \"ClusterRole\""));
/// # Ok::<(), controller_runtime::manifests::RenderError>(())
/// ```
pub fn to_json<T: Serialize>(manifest: &T) -> Result<String, RenderError> {
    serde_json::to_string_pretty(manifest).map_err(RenderError::Json)
}
