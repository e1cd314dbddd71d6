//! controllerutil's `CreateOrUpdate` and `CreateOrPatch`: read an object,
//! change it through a closure, and write only if the closure changed
//! something, reporting what happened as an [`OperationResult`].
//!
//! Part of the client layer. Both read the object named by the one passed
//! in; if it is absent, the closure changes the object passed in and it is
//! created. Otherwise the closure changes the object as read, and:
//!
//! - [`create_or_update`] replaces the whole object (guarded by the
//!   `resourceVersion` it read, so a concurrent write is a 409 to retry),
//!   unless nothing changed;
//! - [`create_or_patch`] sends a JSON merge patch of what changed outside
//!   `status`, then one of what changed in `status` to the `/status`
//!   subresource, each only when needed, as controllerutil does.
//!
//! "Changed" compares the object's JSON before and after the closure, so
//! an object that round-trips makes no write and keeps its
//! `resourceVersion`. The closure must not change the name or namespace.
//!
//! ```no_run
//! use controller_runtime::client::{OperationResult, create_or_update};
//! use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
//! use controller_runtime::kube_client::{Api, Client};
//!
//! # async fn demo(client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! let api: Api<ConfigMap> = Api::namespaced(client, "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! let (cm, result) = create_or_update(&api, cm, |cm| {
//!     cm.data.get_or_insert_default().insert("mode".into(), "fast".into());
//!     Ok(())
//! })
//! .await?;
//! assert_ne!(result, OperationResult::UpdatedStatus); // create_or_update never patches status
//! # let _ = cm;
//! # Ok(()) }
//! ```

use std::fmt::Debug;

use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{ClientError, object_name};
use crate::terminal::{Terminal, is_terminal};

/// An error a mutate closure may return: anything that is an error.
pub type MutateError = Box<dyn std::error::Error + Send + Sync>;

/// What [`create_or_update`] or [`create_or_patch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationResult {
    /// The object existed and the closure changed nothing: no write.
    Unchanged,
    /// The object did not exist and was created.
    Created,
    /// The object was updated (patched, for [`create_or_patch`]) outside
    /// `status`.
    Updated,
    /// The object was patched outside `status` and its `status` too
    /// ([`create_or_patch`] only).
    UpdatedStatus,
    /// Only the `status` was patched ([`create_or_patch`] only).
    UpdatedStatusOnly,
}

/// Errors of [`create_or_update`] and [`create_or_patch`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CreateOrUpdateError {
    /// The mutate closure failed; nothing was written.
    #[error("mutating {object} failed: {source}")]
    Mutate {
        /// The object's name.
        object: String,
        /// What the closure returned.
        #[source]
        source: MutateError,
    },
    /// The mutate closure changed the object's name or namespace.
    #[error("the mutate function changed the name or namespace of {object} (to {now})")]
    KeyChanged {
        /// The object's name before the closure.
        object: String,
        /// Its name after.
        now: String,
    },
    /// The object could not be turned into JSON to compare or diff.
    #[error("could not serialize {object}: {source}")]
    Serialize {
        /// The object's name.
        object: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A read or write failed (or the object had no name).
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl CreateOrUpdateError {
    /// Whether a write got 409 Conflict (read again and retry).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Client(e) if e.is_conflict())
    }
}

/// Which [`create_or_update`]/[`create_or_patch`] errors retrying cannot
/// fix:
///
/// - [`Mutate`](CreateOrUpdateError::Mutate) is terminal when the closure's
///   error carries a [`TerminalError`](crate::TerminalError) (anywhere in
///   its source chain), retried otherwise.
/// - [`KeyChanged`](CreateOrUpdateError::KeyChanged) and
///   [`Serialize`](CreateOrUpdateError::Serialize) are terminal: the
///   closure or the type does the same on a retry.
/// - [`Client`](CreateOrUpdateError::Client) is as terminal as its
///   [`ClientError`] (a 409 Conflict is not).
///
/// ```
/// use controller_runtime::{Terminal, TerminalError};
/// use controller_runtime::client::CreateOrUpdateError;
/// let closure_said = CreateOrUpdateError::Mutate { object: "ns/a".into(), source: Box::new(TerminalError::new("bad spec")) };
/// assert!(closure_said.is_terminal());
/// let flaky = CreateOrUpdateError::Mutate { object: "ns/a".into(), source: "vault unreachable".into() };
/// assert!(!flaky.is_terminal());
/// ```
impl Terminal for CreateOrUpdateError {
    fn is_terminal(&self) -> bool {
        match self {
            CreateOrUpdateError::Mutate { source, .. } => is_terminal(source.as_ref()),
            CreateOrUpdateError::KeyChanged { .. } | CreateOrUpdateError::Serialize { .. } => true,
            CreateOrUpdateError::Client(e) => e.is_terminal(),
        }
    }
}

fn api_error(op: &'static str, object: &str, source: kube_client::Error) -> ClientError {
    ClientError::Api {
        op,
        object: object.to_owned(),
        source,
    }
}

fn to_json<K: Serialize>(obj: &K, object: &str) -> Result<Value, CreateOrUpdateError> {
    serde_json::to_value(obj).map_err(|source| CreateOrUpdateError::Serialize {
        object: object.to_owned(),
        source,
    })
}

/// Runs `mutate` on `obj` and checks it kept its name and namespace.
fn run_mutate<K, F>(obj: &mut K, mutate: F) -> Result<(), CreateOrUpdateError>
where
    K: Resource,
    F: FnOnce(&mut K) -> Result<(), MutateError>,
{
    let key = (obj.meta().name.clone(), obj.meta().namespace.clone());
    let object = object_name(obj);
    mutate(obj).map_err(|source| CreateOrUpdateError::Mutate {
        object: object.clone(),
        source,
    })?;
    if (obj.meta().name.clone(), obj.meta().namespace.clone()) != key {
        return Err(CreateOrUpdateError::KeyChanged {
            object,
            now: object_name(obj),
        });
    }
    Ok(())
}

/// Reads the object `obj` names; if absent, mutates `obj` and creates it.
/// Returns the object read, or `Err(created)`.
async fn read_or_create<K, F>(
    api: &Api<K>,
    mut obj: K,
    mutate: &mut Option<F>,
) -> Result<Result<K, K>, CreateOrUpdateError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnOnce(&mut K) -> Result<(), MutateError>,
{
    let name = obj.meta().name.clone().ok_or(ClientError::MissingName)?;
    let existing = api
        .get_opt(&name)
        .await
        .map_err(|e| api_error("get", &name, e))?;
    if let Some(existing) = existing {
        return Ok(Ok(existing));
    }
    if let Some(mutate) = mutate.take() {
        run_mutate(&mut obj, mutate)?;
    }
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|e| api_error("create", &name, e))?;
    Ok(Err(created))
}

/// controllerutil's `CreateOrUpdate`: reads the object named like `obj`;
/// if it does not exist, `mutate` changes `obj` and it is created;
/// otherwise `mutate` changes the object read, which is replaced (guarded
/// by its `resourceVersion`) only if `mutate` changed it. Returns the
/// object as the server has it and what was done. Replacing does not write
/// `status` on kinds with a status subresource.
///
/// Errors: [`CreateOrUpdateError::Mutate`] (nothing written),
/// [`CreateOrUpdateError::KeyChanged`], and API failures (a 409 when the
/// object changed since it was read: [`CreateOrUpdateError::is_conflict`]).
pub async fn create_or_update<K, F>(
    api: &Api<K>,
    obj: K,
    mutate: F,
) -> Result<(K, OperationResult), CreateOrUpdateError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnOnce(&mut K) -> Result<(), MutateError>,
{
    let mut mutate = Some(mutate);
    let mut current = match read_or_create(api, obj, &mut mutate).await? {
        Ok(existing) => existing,
        Err(created) => return Ok((created, OperationResult::Created)),
    };
    let object = object_name(&current);
    let before = to_json(&current, &object)?;
    if let Some(mutate) = mutate.take() {
        run_mutate(&mut current, mutate)?;
    }
    if to_json(&current, &object)? == before {
        return Ok((current, OperationResult::Unchanged));
    }
    let name = current
        .meta()
        .name
        .clone()
        .ok_or(ClientError::MissingName)?;
    let updated = api
        .replace(&name, &PostParams::default(), &current)
        .await
        .map_err(|e| api_error("update", &name, e))?;
    Ok((updated, OperationResult::Updated))
}

/// controllerutil's `CreateOrPatch`: like [`create_or_update`], but an
/// existing object is written with JSON merge patches of what `mutate`
/// changed, one for everything outside `status` and, if `status` changed,
/// one to the `/status` subresource. Creating does not write `status`
/// (the server ignores it on kinds with a status subresource).
///
/// The patches carry no `resourceVersion`: they apply to whatever the
/// server holds, touching only the fields that changed.
pub async fn create_or_patch<K, F>(
    api: &Api<K>,
    obj: K,
    mutate: F,
) -> Result<(K, OperationResult), CreateOrUpdateError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
    F: FnOnce(&mut K) -> Result<(), MutateError>,
{
    let mut mutate = Some(mutate);
    let mut current = match read_or_create(api, obj, &mut mutate).await? {
        Ok(existing) => existing,
        Err(created) => return Ok((created, OperationResult::Created)),
    };
    let object = object_name(&current);
    let mut before = to_json(&current, &object)?;
    if let Some(mutate) = mutate.take() {
        run_mutate(&mut current, mutate)?;
    }
    let mut after = to_json(&current, &object)?;
    if before == after {
        return Ok((current, OperationResult::Unchanged));
    }
    let before_status = take_status(&mut before);
    let after_status = take_status(&mut after);
    let name = current
        .meta()
        .name
        .clone()
        .ok_or(ClientError::MissingName)?;
    let params = PatchParams::default();
    let mut result = OperationResult::Unchanged;
    let mut latest = current;
    if before != after {
        let patch = merge_patch(&before, &after);
        latest = api
            .patch(&name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| api_error("patch", &name, e))?;
        result = OperationResult::Updated;
    }
    if before_status != after_status {
        let wrap = |status: Option<Value>| {
            let mut map = Map::new();
            map.insert("status".to_owned(), status.unwrap_or(Value::Null));
            Value::Object(map)
        };
        let patch = merge_patch(&wrap(before_status), &wrap(after_status));
        latest = api
            .patch_status(&name, &params, &Patch::Merge(&patch))
            .await
            .map_err(|e| api_error("status patch", &name, e))?;
        result = if result == OperationResult::Updated {
            OperationResult::UpdatedStatus
        } else {
            OperationResult::UpdatedStatusOnly
        };
    }
    Ok((latest, result))
}

/// Removes and returns the top-level `status` of an object's JSON.
fn take_status(obj: &mut Value) -> Option<Value> {
    obj.as_object_mut().and_then(|m| m.remove("status"))
}

/// The JSON merge patch (RFC 7386) that turns `before` into `after`:
/// objects are diffed key by key (a removed key becomes `null`), anything
/// else that differs is replaced whole.
pub(crate) fn merge_patch(before: &Value, after: &Value) -> Value {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut patch = Map::new();
            for (key, new) in a {
                match b.get(key) {
                    Some(old) if old == new => {}
                    Some(old @ Value::Object(_)) if new.is_object() => {
                        patch.insert(key.clone(), merge_patch(old, new));
                    }
                    _ => {
                        patch.insert(key.clone(), new.clone());
                    }
                }
            }
            for key in b.keys() {
                if !a.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => after.clone(),
    }
}

#[cfg(test)]
mod tests;
