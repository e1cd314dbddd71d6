//! A custom resource's objects in the version a webhook's rule names, when
//! the rule matched the request through another served version of the
//! resource (`matchPolicy: Equivalent`), as kube-apiserver converts them
//! before calling the webhook. A mutating webhook's patch is applied there
//! and the result converted back to the request's version.
//!
//! The conversion itself (the CRD's conversion webhook, or rewriting
//! `apiVersion` with `strategy: None`) is given by the write handlers as a
//! [`Convert`]: the conversion module calls webhooks through
//! [`super::client`], so admission does not import it.
//!
//! Built-in kinds are served in one version here, so nothing converts them.

use crate::error::ApiError;
use crate::http::state::Server;
use crate::resources::crd::STORAGE_KEY;
use crate::resources::registry::ResourceInfo;
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// Converts an object of a resource to a `group/version` of it.
pub type Convert = for<'a> fn(
    &'a Server,
    &'a ResourceInfo,
    Value,
    String,
) -> BoxFuture<'a, Result<Value, ApiError>>;

/// The served versions of one custom resource.
pub(super) struct Versions {
    info: ResourceInfo,
    served: Vec<String>,
    convert: Option<Convert>,
}

impl std::fmt::Debug for Versions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versions")
            .field("resource", &self.info.group_resource())
            .field("served", &self.served)
            .field("converts", &self.convert.is_some())
            .finish()
    }
}

impl Versions {
    /// The versions of `info`'s resource, in the CRD's order; `None` for a
    /// built-in kind.
    pub(super) fn load(srv: &Server, info: &ResourceInfo) -> Option<Versions> {
        if !info.custom {
            return None;
        }
        let key = (String::new(), format!("{}.{}", info.plural, info.group));
        let crd = srv.store.txn(|t| t.get(STORAGE_KEY, &key));
        let mut served: Vec<String> = crd
            .and_then(|c| c.value["spec"]["versions"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|v| v["served"] == true)
            .filter_map(|v| v["name"].as_str().map(str::to_string))
            .collect();
        if served.is_empty() {
            served = srv
                .registry
                .all()
                .iter()
                .filter(|r| r.group == info.group && r.plural == info.plural)
                .map(|r| r.version.clone())
                .collect();
        }
        Some(Versions {
            info: info.clone(),
            served,
            convert: None,
        })
    }

    /// Convert with `convert`.
    pub(super) fn set_convert(&mut self, convert: Convert) {
        self.convert = Some(convert);
    }

    /// The served versions.
    pub(super) fn served(&self) -> &[String] {
        &self.served
    }

    /// `obj` (of this resource, in any served version; the request's when
    /// it names none) in `version`. A failed conversion is the conversion
    /// webhook's 500, whatever the admission webhook's `failurePolicy`, as
    /// on a cluster.
    pub(super) async fn convert(
        &self,
        srv: &Server,
        obj: &Value,
        version: &str,
    ) -> Result<Value, ApiError> {
        let desired = format!("{}/{}", self.info.group, version);
        let mut obj = obj.clone();
        if obj["apiVersion"].as_str().is_none_or(str::is_empty) {
            obj["apiVersion"] = json!(self.info.api_version());
        }
        if obj["kind"].as_str().is_none_or(str::is_empty) {
            obj["kind"] = json!(self.info.kind);
        }
        if obj["apiVersion"] == desired.as_str() {
            return Ok(obj);
        }
        let Some(convert) = self.convert else {
            return Err(ApiError::internal(format!(
                "Internal error occurred: no conversion of {} to {desired} for admission",
                self.info.group_resource()
            )));
        };
        convert(srv, &self.info, obj, desired).await
    }
}
