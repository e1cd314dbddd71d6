//! Server-side apply (`application/apply-patch+yaml`). Field ownership is
//! tracked per manager in `metadata.managedFields` (FieldsV1 format, with
//! lists owned as a whole). Applying a configuration:
//!
//! - conflicts (409, one cause per field) when another manager owns a field
//!   the configuration sets to a different value, unless `force=true`, which
//!   takes the field over;
//! - removes fields this manager applied before but no longer applies and
//!   that nobody else owns;
//! - sets every field of the configuration, and records the manager's set.
//!
//! Other writes ([`record_update`]) take over the fields they change, as
//! operation `Update`, so a later apply of a different value conflicts with
//! them.

use crate::error::{ApiError, Cause};
use crate::resources::objects::now_rfc3339;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

type Path = Vec<String>;

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

fn leaf_paths(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(k.clone());
                leaf_paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The fields a configuration sets (identity and system fields excluded).
fn config_paths(cfg: &Value) -> BTreeSet<Path> {
    let mut all = BTreeSet::new();
    leaf_paths(cfg, &mut Vec::new(), &mut all);
    all.into_iter()
        .filter(|p| match p.first().map(String::as_str) {
            Some("apiVersion" | "kind") | None => false,
            Some("metadata") => p.get(1).is_some_and(|f| !SYSTEM_META.contains(&f.as_str())),
            Some(_) => true,
        })
        .collect()
}

fn get<'a>(v: &'a Value, p: &[String]) -> Option<&'a Value> {
    p.iter().try_fold(v, |cur, k| cur.get(k))
}

fn set(v: &mut Value, p: &[String], value: Value) {
    let Some((last, parents)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        if !cur.get(k).is_some_and(Value::is_object) {
            cur[k.as_str()] = Value::Object(Map::new());
        }
        cur = &mut cur[k.as_str()];
    }
    cur[last.as_str()] = value;
}

fn remove(v: &mut Value, p: &[String]) {
    let Some((last, parents)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        match cur.get_mut(k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Value::Object(Map::new());
    for p in paths {
        let mut cur = &mut root;
        for k in p {
            let key = format!("f:{k}");
            if cur.get(&key).is_none() {
                cur[key.as_str()] = Value::Object(Map::new());
            }
            cur = &mut cur[key.as_str()];
        }
    }
    root
}

fn from_fields_v1(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(m) = v.as_object() else { return };
    let children: Vec<(&String, &Value)> = m.iter().filter(|(k, _)| k.starts_with("f:")).collect();
    if children.is_empty() {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        return;
    }
    for (k, child) in children {
        prefix.push(k[2..].to_string());
        from_fields_v1(child, prefix, out);
        prefix.pop();
    }
}

struct Entry {
    manager: String,
    operation: String,
    raw: Value,
    paths: BTreeSet<Path>,
}

fn entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    let mut paths = BTreeSet::new();
                    from_fields_v1(&e["fieldsV1"], &mut Vec::new(), &mut paths);
                    Entry {
                        manager: e["manager"].as_str().unwrap_or("").to_string(),
                        operation: e["operation"].as_str().unwrap_or("").to_string(),
                        raw: e.clone(),
                        paths,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn dotted(p: &Path) -> String {
    p.iter().map(|k| format!(".{k}")).collect()
}

/// Apply `cfg` as `manager` onto `current` (None when the object does not
/// exist yet). Returns the object to store.
pub fn apply(
    current: Option<&Value>,
    cfg: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
) -> Result<Value, ApiError> {
    if !cfg.is_object() {
        return Err(ApiError::bad_request(
            "an apply configuration must be an object",
        ));
    }
    let mut obj = current.cloned().unwrap_or_else(|| {
        let mut base = json!({"metadata": {}});
        for k in ["apiVersion", "kind"] {
            if let Some(v) = cfg.get(k) {
                base[k] = v.clone();
            }
        }
        for k in ["name", "namespace", "generateName"] {
            if let Some(v) = cfg["metadata"].get(k) {
                base["metadata"][k] = v.clone();
            }
        }
        base
    });
    let mut all = entries(&obj);
    let mine = config_paths(cfg);
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for e in all
        .iter()
        .filter(|e| !(e.manager == manager && e.operation == "Apply"))
    {
        for p in e.paths.intersection(&mine) {
            if get(&obj, p) != get(cfg, p) {
                conflicts.push((e.manager.clone(), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        let mut err = ApiError::new(
            409,
            "Conflict",
            format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                conflicts
                    .iter()
                    .map(|(m, p)| format!("conflict with \"{m}\": {}", dotted(p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        err.causes = conflicts
            .iter()
            .map(|(m, p)| Cause {
                reason: "FieldManagerConflict".into(),
                message: format!("conflict with \"{m}\""),
                field: dotted(p),
            })
            .collect();
        return Err(err);
    }
    for (m, p) in &conflicts {
        if let Some(e) = all
            .iter_mut()
            .find(|e| &e.manager == m && e.paths.contains(p))
        {
            e.paths.remove(p);
        }
    }
    let previous: BTreeSet<Path> = all
        .iter()
        .find(|e| e.manager == manager && e.operation == "Apply")
        .map(|e| e.paths.clone())
        .unwrap_or_default();
    for p in previous.difference(&mine) {
        let owned_by_others = all
            .iter()
            .any(|e| !(e.manager == manager && e.operation == "Apply") && e.paths.contains(p));
        if !owned_by_others {
            remove(&mut obj, p);
        }
    }
    for p in &mine {
        if let Some(v) = get(cfg, p) {
            set(&mut obj, p, v.clone());
        }
    }
    let unchanged = previous == mine;
    let mut out: Vec<Value> = Vec::new();
    let mut placed = false;
    for e in all {
        if e.manager == manager && e.operation == "Apply" {
            placed = true;
            if unchanged {
                out.push(e.raw);
                continue;
            }
        } else if e.paths.is_empty() {
            continue;
        } else {
            let mut raw = e.raw.clone();
            raw["fieldsV1"] = to_fields_v1(&e.paths);
            out.push(raw);
            continue;
        }
        out.push(entry(manager, api_version, &mine));
    }
    if !placed {
        out.push(entry(manager, api_version, &mine));
    }
    obj["metadata"]["managedFields"] = Value::Array(out);
    Ok(obj)
}

fn entry(manager: &str, api_version: &str, paths: &BTreeSet<Path>) -> Value {
    entry_with(manager, "Apply", api_version, paths)
}

fn entry_with(manager: &str, operation: &str, api_version: &str, paths: &BTreeSet<Path>) -> Value {
    json!({
        "manager": manager, "operation": operation, "apiVersion": api_version, "time": now_rfc3339(),
        "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths),
    })
}

/// Record a non-apply write (create, update, patch) by `manager`: the
/// fields it changed become its own (operation `Update`), taken from
/// whoever owned them; fields it removed are owned by nobody. A write that
/// changes nothing leaves `managedFields` as it was.
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, api_version: &str) {
    let before = old.cloned().unwrap_or(Value::Null);
    let now_paths = config_paths(new);
    let before_paths = old.map(config_paths).unwrap_or_default();
    let changed: BTreeSet<Path> = now_paths
        .iter()
        .filter(|p| get(&before, p) != get(new, p))
        .cloned()
        .collect();
    let removed: BTreeSet<Path> = before_paths.difference(&now_paths).cloned().collect();
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    let mut out = Vec::new();
    let mut placed = false;
    for mut e in entries(new) {
        e.paths
            .retain(|p| !changed.contains(p) && !removed.contains(p));
        if e.manager == manager && e.operation == "Update" {
            placed = true;
            e.paths.extend(changed.iter().cloned());
            out.push(entry_with(manager, "Update", api_version, &e.paths));
        } else if !e.paths.is_empty() {
            let mut raw = e.raw;
            raw["fieldsV1"] = to_fields_v1(&e.paths);
            out.push(raw);
        }
    }
    if !placed && !changed.is_empty() {
        out.push(entry_with(manager, "Update", api_version, &changed));
    }
    match new["metadata"].as_object_mut() {
        Some(m) if out.is_empty() => {
            m.remove("managedFields");
        }
        Some(m) => {
            m.insert("managedFields".into(), Value::Array(out));
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(replicas: i64, with_label: bool) -> Value {
        let mut c = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": replicas}});
        if with_label {
            c["metadata"]["labels"] = json!({"team": "a"});
        }
        c
    }

    #[test]
    fn apply_tracks_ownership_and_conflicts() {
        let o = apply(None, &cfg(1, true), "alice", false, "apps/v1").unwrap();
        assert_eq!(o["spec"]["replicas"], 1);
        assert_eq!(
            o["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:replicas"],
            json!({})
        );
        // Bob setting the same value shares ownership; a different value conflicts.
        let o = apply(Some(&o), &cfg(1, false), "bob", false, "apps/v1").unwrap();
        let e = apply(Some(&o), &cfg(2, false), "bob", false, "apps/v1").unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(e.causes[0].field, ".spec.replicas");
        let o = apply(Some(&o), &cfg(2, false), "bob", true, "apps/v1").unwrap();
        assert_eq!(o["spec"]["replicas"], 2);
        // Alice drops her label: it is removed (nobody else owns it).
        let o = apply(
            Some(&o),
            &json!({"metadata": {"name": "d"}}),
            "alice",
            false,
            "apps/v1",
        )
        .unwrap();
        assert!(
            o["metadata"]
                .get("labels")
                .is_none_or(|l| l.get("team").is_none())
        );
        assert_eq!(o["spec"]["replicas"], 2, "bob still owns replicas");
    }

    #[test]
    fn updates_take_over_changed_fields() {
        let a = apply(None, &cfg(1, false), "alice", false, "apps/v1").unwrap();
        let mut edited = a.clone();
        edited["spec"]["replicas"] = json!(3);
        record_update(Some(&a), &mut edited, "editor", "apps/v1");
        let mf = edited["metadata"]["managedFields"].as_array().unwrap();
        assert!(
            mf.iter()
                .any(|e| e["manager"] == "editor" && e["operation"] == "Update")
        );
        let e = apply(Some(&edited), &cfg(1, false), "alice", false, "apps/v1").unwrap_err();
        assert!(
            e.message.contains("conflict with \"editor\""),
            "{}",
            e.message
        );
        let mut same = edited.clone();
        record_update(Some(&edited), &mut same, "other", "apps/v1");
        assert_eq!(same, edited, "a write that changes nothing records nothing");
    }

    #[test]
    fn reapplying_the_same_config_is_stable() {
        let a = apply(None, &cfg(1, true), "alice", false, "apps/v1").unwrap();
        let b = apply(Some(&a), &cfg(1, true), "alice", false, "apps/v1").unwrap();
        assert_eq!(a, b);
    }
}
