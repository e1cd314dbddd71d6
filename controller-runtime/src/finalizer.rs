//! Running cleanup before an object is deleted, with a finalizer.
//!
//! Layer 1 (building blocks): imports only the vocabulary ([`Action`], [`Terminal`](crate::Terminal)).
//!
//! [`finalizer`] wraps a reconcile: on the first reconcile of a live object
//! it adds the finalizer (so the API server keeps the object when it is
//! deleted) and then runs [`FinalizerEvent::Apply`]; once the object has a
//! `deletionTimestamp` it runs [`FinalizerEvent::Cleanup`] and, when that succeeds,
//! removes the finalizer, which lets the deletion finish. A failed cleanup
//! keeps the finalizer, so cleanup is retried.
//!
//! Writes are conflict-safe JSON patches: adding tests the object's
//! `resourceVersion`, removing tests that the list entry is still ours, so a
//! concurrent change makes the write fail (409 Conflict or a failed `test`,
//! see [`FinalizerError::is_conflict`]) instead of overwriting it; the
//! reconcile then fails and is retried with a fresh object.
//!
//! Removing the finalizer after a successful cleanup cannot lose: a 404
//! (the object is already gone) is success, and so is a conflict after
//! which a fresh read finds the object gone or our finalizer already
//! removed. Only a conflict that leaves our finalizer in place fails (and
//! the cleanup, which must be idempotent, runs again).
//!
//! ```no_run
//! use std::sync::Arc;
//! use controller_runtime::finalizer::{finalizer, FinalizerEvent};
//! use controller_runtime::Action;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_client::Api;
//! # async fn demo(api: Api<ConfigMap>, cm: Arc<ConfigMap>) -> Result<(), Box<dyn std::error::Error>> {
//! let action = finalizer(&api, "example.com/cleanup", cm, |event| async move {
//!     match event {
//!         FinalizerEvent::Apply(cm) => { /* create what cm asks for */ }
//!         FinalizerEvent::Cleanup(cm) => { /* delete what lives outside the cluster */ }
//!     }
//!     Ok::<_, std::io::Error>(Action::done())
//! })
//! .await?;
//! # Ok(()) }
//! ```

use std::error::Error as StdError;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use kube_client::Api;
use kube_client::api::{Patch, PatchParams};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::action::Action;

/// Errors of the finalizer helper.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizerError<E: StdError + 'static> {
    /// The apply step failed.
    #[error("apply failed: {0}")]
    Apply(#[source] E),
    /// The cleanup step failed; the finalizer stays.
    #[error("cleanup failed: {0}")]
    Cleanup(#[source] E),
    /// Adding the finalizer failed (on a conflict, retry with a fresh object).
    #[error("adding finalizer {finalizer} to {object} failed: {source}")]
    AddFinalizer {
        /// The finalizer.
        finalizer: String,
        /// The object's name.
        object: String,
        /// The client error, with the API `Status` when there was one.
        #[source]
        source: kube_client::Error,
    },
    /// Removing the finalizer failed (on a conflict, retry with a fresh
    /// object).
    #[error("removing finalizer {finalizer} from {object} failed: {source}")]
    RemoveFinalizer {
        /// The finalizer.
        finalizer: String,
        /// The object's name.
        object: String,
        /// The client error, with the API `Status` when there was one.
        #[source]
        source: kube_client::Error,
    },
    /// The object has no name.
    #[error("object has no metadata.name")]
    MissingName,
    /// The finalizer name is empty.
    #[error("finalizer name must not be empty")]
    InvalidFinalizerName,
}

impl<E: StdError + 'static> FinalizerError<E> {
    /// Whether a finalizer write lost a race with another writer (409
    /// Conflict, or 422 from a failed patch `test`): retry with a fresh read.
    pub fn is_conflict(&self) -> bool {
        match self {
            FinalizerError::AddFinalizer { source, .. }
            | FinalizerError::RemoveFinalizer { source, .. } => {
                matches!(source, kube_client::Error::Api(s) if s.code == 409 || s.code == 422)
            }
            _ => false,
        }
    }
}

/// What the wrapped reconcile is asked to do.
#[derive(Debug, Clone)]
pub enum FinalizerEvent<K> {
    /// The object is live: bring the world in line with it.
    Apply(Arc<K>),
    /// The object is being deleted: remove what it owns outside Kubernetes'
    /// garbage collection. Must be idempotent.
    Cleanup(Arc<K>),
}

/// Whether `obj` lists `finalizer`.
pub fn has_finalizer<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == finalizer)
}

/// What [`finalizer`] will do with `obj`, decided from its metadata alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Live, finalizer missing: add it, then apply.
    AddThenApply,
    /// Live, finalizer present: apply.
    Apply,
    /// Deleting, finalizer present at this index: cleanup, then remove it.
    CleanupThenRemove(usize),
    /// Deleting, finalizer absent: nothing is ours to do.
    Nothing,
}

/// Decides the [`Step`] for `obj`.
fn plan<K: Resource>(obj: &K, finalizer: &str) -> Step {
    let meta = obj.meta();
    let position = meta
        .finalizers
        .iter()
        .flatten()
        .position(|f| f == finalizer);
    match (meta.deletion_timestamp.is_some(), position) {
        (false, None) => Step::AddThenApply,
        (false, Some(_)) => Step::Apply,
        (true, Some(i)) => Step::CleanupThenRemove(i),
        (true, None) => Step::Nothing,
    }
}

/// The JSON patch adding `finalizer` to `obj`, guarded by its
/// `resourceVersion` when it has one.
fn add_patch<K: Resource>(obj: &K, finalizer: &str) -> json_patch::Patch {
    let meta = obj.meta();
    let mut ops = Vec::new();
    if let Some(rv) = &meta.resource_version {
        ops.push(
            serde_json::json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
        );
    }
    match &meta.finalizers {
        Some(list) if !list.is_empty() => {
            ops.push(serde_json::json!({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}));
        }
        _ => ops.push(
            serde_json::json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}),
        ),
    }
    to_patch(ops)
}

/// The JSON patch removing `finalizer` at `index`, guarded by a `test` that
/// the entry there is still `finalizer`.
fn remove_patch(index: usize, finalizer: &str) -> json_patch::Patch {
    let path = format!("/metadata/finalizers/{index}");
    to_patch(vec![
        serde_json::json!({"op": "test", "path": path, "value": finalizer}),
        serde_json::json!({"op": "remove", "path": path}),
    ])
}

fn to_patch(ops: Vec<serde_json::Value>) -> json_patch::Patch {
    // These operations are built above from valid shapes; an empty patch is
    // the (unreachable) fallback rather than a panic.
    serde_json::from_value(serde_json::Value::Array(ops)).unwrap_or_else(|error| {
        tracing::error!(%error, "building a finalizer patch failed");
        json_patch::Patch(Vec::new())
    })
}

/// Runs `reconcile` for `obj` under `finalizer_name`; see the
/// [module documentation](self).
///
/// Returns the action of the apply or cleanup step, or `Action::done()` when
/// there was nothing to do (a deleting object without our finalizer).
pub async fn finalizer<K, F, Fut, E>(
    api: &Api<K>,
    finalizer_name: &str,
    obj: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    E: StdError + 'static,
{
    if finalizer_name.is_empty() {
        return Err(FinalizerError::InvalidFinalizerName);
    }
    let name = obj.meta().name.clone().ok_or(FinalizerError::MissingName)?;
    match plan(obj.as_ref(), finalizer_name) {
        Step::Nothing => Ok(Action::done()),
        Step::Apply => reconcile(FinalizerEvent::Apply(obj))
            .await
            .map_err(FinalizerError::Apply),
        Step::AddThenApply => {
            let patch = add_patch(obj.as_ref(), finalizer_name);
            let updated = api
                .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
                .map_err(|source| FinalizerError::AddFinalizer {
                    finalizer: finalizer_name.to_string(),
                    object: name.clone(),
                    source,
                })?;
            tracing::debug!(object = %name, finalizer = finalizer_name, "finalizer added");
            reconcile(FinalizerEvent::Apply(Arc::new(updated)))
                .await
                .map_err(FinalizerError::Apply)
        }
        Step::CleanupThenRemove(index) => {
            let action = reconcile(FinalizerEvent::Cleanup(obj))
                .await
                .map_err(FinalizerError::Cleanup)?;
            let patch = remove_patch(index, finalizer_name);
            let removed = api
                .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await;
            let source = match removed {
                Ok(_) => {
                    tracing::debug!(object = %name, finalizer = finalizer_name, "finalizer removed");
                    return Ok(action);
                }
                Err(source) => source,
            };
            if already_removed(api, &name, finalizer_name, &source).await {
                tracing::debug!(object = %name, finalizer = finalizer_name, "finalizer already removed or object gone");
                return Ok(action);
            }
            Err(FinalizerError::RemoveFinalizer {
                finalizer: finalizer_name.to_string(),
                object: name.clone(),
                source,
            })
        }
    }
}

/// After a failed removal write: whether the finalizer is gone anyway (the
/// object is gone, 404, or after a conflict a fresh read shows the object
/// gone or without our finalizer).
async fn already_removed<K>(
    api: &Api<K>,
    name: &str,
    finalizer: &str,
    error: &kube_client::Error,
) -> bool
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let status = match error {
        kube_client::Error::Api(status) => status.code,
        _ => return false,
    };
    match status {
        404 => true,
        409 | 422 => match api.get_opt(name).await {
            Ok(None) => true,
            Ok(Some(fresh)) => !has_finalizer(&fresh, finalizer),
            Err(read) => {
                tracing::debug!(error = %read, object = name, "re-reading after a finalizer conflict failed");
                false
            }
        },
        _ => false,
    }
}

impl<E: crate::terminal::Terminal> crate::terminal::Terminal for FinalizerError<E> {
    fn is_terminal(&self) -> bool {
        match self {
            FinalizerError::Apply(e) | FinalizerError::Cleanup(e) => e.is_terminal(),
            FinalizerError::MissingName | FinalizerError::InvalidFinalizerName => true,
            FinalizerError::AddFinalizer { .. } | FinalizerError::RemoveFinalizer { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests;
