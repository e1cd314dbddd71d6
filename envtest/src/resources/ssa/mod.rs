//! Server-side apply and field ownership, as kube-apiserver's field manager
//! keeps them in `metadata.managedFields`. Each manager (a name, an
//! operation `Apply` or `Update`, the subresource written through, and for
//! `Update` the API version) owns
//! a set of field paths (see `fieldset`), per list item for map-lists (by
//! their key fields) and sets (by value), per field for granular objects
//! (see `shape` for which nodes are which). Applying a configuration:
//!
//! - merges it onto the live object (`merge`): items of a map-list are
//!   matched by key, so managers applying different items of one list (each
//!   controller its own `status.conditions` entry) both keep theirs;
//! - conflicts (409, one cause per path, e.g.
//!   `.status.conditions[type="Ready"].status`) when the merge changes a
//!   path another manager owns, unless `force=true`, which takes over only
//!   those paths;
//! - removes what the manager applied before and no longer applies, unless
//!   another manager owns it (or something inside it);
//! - records the configuration's field set as the manager's `Apply` entry.
//!
//! Other writes ([`record_update`]) own what they change or add, as
//! operation `Update`, taking it from whoever owned it.

mod fieldset;
mod merge;
mod shape;

use crate::error::{ApiError, Cause};
use crate::resources::objects::now_rfc3339;
use crate::resources::registry::ResourceInfo;
use fieldset::{FieldSet, Path, display, from_fields_v1, to_fields_v1};
use merge::{compare, default_keys, empty, field_set, merge};
use serde_json::{Value, json};
use shape::Shape;

/// Metadata fields nobody owns: identity and what the server sets.
const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "resourceVersion",
    "uid",
    "managedFields",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

fn owned_path(p: &Path) -> bool {
    match p.first().map(String::as_str) {
        Some("f:apiVersion" | "f:kind") | None => false,
        Some("f:metadata") => p
            .get(1)
            .and_then(|f| f.strip_prefix("f:"))
            .is_some_and(|f| !SYSTEM_META.contains(&f)),
        Some(_) => true,
    }
}

/// The owned paths a value sets.
fn owned_set(v: &Value, shape: &Shape<'_>) -> FieldSet {
    let mut set = FieldSet::new();
    field_set(v, shape, true, &mut set);
    set.retain(owned_path);
    set
}

/// One `managedFields` entry.
struct Entry {
    manager: String,
    operation: String,
    subresource: String,
    raw: Value,
    paths: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    /// The same `Update` manager: as on a cluster, one writing through
    /// another API version is another manager.
    fn is_update(&self, manager: &str, subresource: &str, api_version: &str) -> bool {
        self.is(manager, "Update", subresource) && self.raw["apiVersion"] == api_version
    }

    /// How the API server names this manager in a conflict.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            let av = self.raw["apiVersion"].as_str().unwrap_or("");
            s.push_str(&format!(" using {av}"));
            if let Some(t) = self.raw["time"].as_str() {
                s.push_str(&format!(" at {t}"));
            }
        }
        s
    }

    /// The entry as stored, with its paths written back.
    fn written(mut self) -> Value {
        self.raw["fieldsV1"] = to_fields_v1(&self.paths);
        self.raw
    }
}

fn entries(obj: &Value) -> Vec<Entry> {
    let list = obj["metadata"]["managedFields"].as_array();
    list.into_iter()
        .flatten()
        .map(|e| Entry {
            manager: e["manager"].as_str().unwrap_or("").to_string(),
            operation: e["operation"].as_str().unwrap_or("").to_string(),
            subresource: e["subresource"].as_str().unwrap_or("").to_string(),
            raw: e.clone(),
            paths: from_fields_v1(&e["fieldsV1"]),
        })
        .collect()
}

fn new_entry(
    manager: &str,
    operation: &str,
    subresource: &str,
    api_version: &str,
    paths: &FieldSet,
) -> Value {
    let mut e = json!({
        "manager": manager, "operation": operation, "apiVersion": api_version, "time": now_rfc3339(),
        "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths),
    });
    if !subresource.is_empty() {
        e["subresource"] = json!(subresource);
    }
    e
}

fn set_managed(obj: &mut Value, out: Vec<Value>) {
    match obj.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) if out.is_empty() => {
            m.remove("managedFields");
        }
        Some(m) => {
            m.insert("managedFields".into(), Value::Array(out));
        }
        None => {}
    }
}

fn conflict_error(conflicts: &[(String, Path)]) -> ApiError {
    let message = if let [(m, p)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {m}: {}",
            display(p)
        )
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for (_, p) in conflicts.iter().filter(|(o, _)| o == m) {
                lines.push(format!("- {}", display(p)));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let mut err = ApiError::new(409, "Conflict", message);
    err.causes = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict".into(),
            message: format!("conflict with {m}"),
            field: display(p),
        })
        .collect();
    err
}

/// Is `p` owned in `set`, or anything inside it?
fn owns_within(set: &FieldSet, p: &Path) -> bool {
    set.range(p.clone()..)
        .next()
        .is_some_and(|q| q.starts_with(p))
}

/// Is the last element of `p` a key field of the map-list item it is in?
fn is_item_key(p: &Path) -> bool {
    match p.as_slice() {
        [.., item, f] => {
            let (Some(json), Some(name)) = (item.strip_prefix("k:"), f.strip_prefix("f:")) else {
                return false;
            };
            serde_json::from_str::<serde_json::Map<String, Value>>(json)
                .is_ok_and(|keys| keys.contains_key(name))
        }
        _ => false,
    }
}

/// Apply `cfg` as `manager` (through `subresource`, `""` for the object
/// itself) onto `current` (None when the object does not exist yet).
/// Returns the object to store, its `managedFields` updated.
pub fn apply(
    info: &ResourceInfo,
    current: Option<&Value>,
    cfg: &Value,
    manager: &str,
    subresource: &str,
    force: bool,
) -> Result<Value, ApiError> {
    if !cfg.is_object() {
        return Err(ApiError::bad_request(
            "an apply configuration must be an object",
        ));
    }
    let shape = Shape::root(info.schema.as_deref(), info.custom);
    let live = current.cloned().unwrap_or_else(|| json!({"metadata": {}}));
    // What is merged: the configuration without the fields the server sets
    // (identity aside), and without its type once the object exists.
    let mut config = cfg.clone();
    if let Some(m) = config.get_mut("metadata").and_then(Value::as_object_mut) {
        m.retain(|k, _| !SYSTEM_META.contains(&k.as_str()) || k == "name" || k == "namespace");
    }
    if let Some(m) = config.as_object_mut() {
        if current.is_some() {
            m.remove("apiVersion");
            m.remove("kind");
        }
        // What the endpoint does not write is not applied (nor owned): the
        // status of a kind with a status subresource through the object,
        // everything but the status through `/status`.
        match subresource {
            "status" => {
                m.retain(|k, _| {
                    matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                });
                if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.retain(|k, _| k == "name" || k == "namespace");
                }
            }
            "" if info.status => {
                m.remove("status");
            }
            _ => {}
        }
    }
    let mine = owned_set(&config, &shape);
    default_keys(&mut config, &shape, true);
    let mut all = entries(&live);
    let me = |e: &Entry| e.is(manager, "Apply", subresource);
    let previous: FieldSet = all
        .iter()
        .find(|e| me(e))
        .map(|e| e.paths.clone())
        .unwrap_or_default();

    let mut obj = merge(Some(&live), &config, &shape, true);
    // What this manager applied before and no longer applies goes, unless
    // someone else owns it or something inside it (a list item's key
    // fields stay with the item).
    let others: FieldSet = all
        .iter()
        .filter(|e| !me(e))
        .flat_map(|e| e.paths.iter().cloned())
        .collect();
    let mut dropped: Vec<&Path> = previous
        .iter()
        .filter(|p| !mine.contains(*p) && !owns_within(&others, p) && !owns_within(&mine, p))
        .filter(|p| !is_item_key(p))
        .collect();
    // Deepest first, so a list item's fields go before the item.
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        fieldset::remove(&mut obj, p);
    }

    let (changed, removed) = compare(&live, &obj, &shape);
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for e in all.iter().filter(|e| !me(e)) {
        for p in e.paths.intersection(&changed) {
            conflicts.push((e.describe(), p.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    for e in all.iter_mut().filter(|e| !me(e)) {
        e.paths
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }

    let unchanged = previous == mine;
    let mut out: Vec<Value> = Vec::new();
    let mut placed = false;
    for e in all {
        if me(&e) {
            placed = true;
            out.push(if unchanged {
                e.raw
            } else {
                new_entry(manager, "Apply", subresource, &info.api_version(), &mine)
            });
        } else if !e.paths.is_empty() {
            out.push(e.written());
        }
    }
    if !placed {
        out.push(new_entry(
            manager,
            "Apply",
            subresource,
            &info.api_version(),
            &mine,
        ));
    }
    set_managed(&mut obj, out);
    Ok(obj)
}

/// Record a non-apply write (create, update, patch) by `manager` (through
/// `subresource`, `""` for the object itself): the paths it changed or
/// added become its own (operation `Update`), taken from whoever owned
/// them; paths it removed are owned by nobody. A write that changes
/// nothing leaves `managedFields` as it was.
pub fn record_update(
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
) {
    let shape = Shape::root(info.schema.as_deref(), info.custom);
    let before = old.cloned().unwrap_or_else(empty);
    let (mut changed, mut removed) = compare(&before, new, &shape);
    changed.retain(owned_path);
    removed.retain(owned_path);
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    let api_version = info.api_version();
    let mut out = Vec::new();
    let mut placed = false;
    for mut e in entries(new) {
        e.paths
            .retain(|p| !changed.contains(p) && !removed.contains(p));
        if e.is_update(manager, subresource, &api_version) {
            placed = true;
            e.paths.extend(changed.iter().cloned());
            out.push(new_entry(
                manager,
                "Update",
                subresource,
                &api_version,
                &e.paths,
            ));
        } else if !e.paths.is_empty() {
            out.push(e.written());
        }
    }
    if !placed && !changed.is_empty() {
        out.push(new_entry(
            manager,
            "Update",
            subresource,
            &api_version,
            &changed,
        ));
    }
    set_managed(new, out);
}

#[cfg(test)]
mod tests;
