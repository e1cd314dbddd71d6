//! Field paths and field sets as server-side apply records them in
//! `managedFields` (`fieldsType: FieldsV1`). A path is a list of elements
//! written as the API server writes them: `f:name` (a field of an object),
//! `k:{"type":"Ready"}` (the item of a map-list with these key values, keys
//! sorted), `v:"a"` (the item of a set-list with this value) and `i:3` (an
//! index, read but never written). A set of paths is a tree of JSON objects
//! keyed by those elements; a path that is in the set and also has children
//! carries `".": {}`.
//!
//! Part of `resources::ssa`: the merge and ownership rules build on these.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// One path: its elements in FieldsV1 form.
pub(crate) type Path = Vec<String>;
/// A set of paths.
pub(crate) type FieldSet = BTreeSet<Path>;

/// The element of a field.
pub(crate) fn field(name: &str) -> String {
    format!("f:{name}")
}

/// The element of a map-list item: its key fields (sorted by name).
pub(crate) fn key(keys: &[(String, Value)]) -> String {
    let mut sorted: Vec<&(String, Value)> = keys.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut m = Map::new();
    for (k, v) in sorted {
        m.insert(k.clone(), v.clone());
    }
    // serde_json's maps keep their keys sorted, so this is the API server's
    // form whatever order the fields were inserted in.
    format!("k:{}", Value::Object(m))
}

/// The element of a set-list item.
pub(crate) fn value(v: &Value) -> String {
    format!("v:{v}")
}

/// A set as the FieldsV1 JSON tree.
pub(crate) fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for e in p {
            let next = cur
                .entry(e.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(m) = next else {
                break;
            };
            cur = m;
        }
    }
    // Members with children are marked with ".".
    for p in set {
        let node = p.iter().try_fold(&mut root, |cur, e| match cur.get_mut(e) {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        });
        if let Some(m) = node
            && !m.is_empty()
            && !p.is_empty()
        {
            m.insert(".".into(), Value::Object(Map::new()));
        }
    }
    Value::Object(root)
}

/// A FieldsV1 JSON tree as a set (anything but objects is ignored).
pub(crate) fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        for (k, child) in m {
            if k == "." {
                if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
                continue;
            }
            prefix.push(k.clone());
            if child.as_object().is_some_and(Map::is_empty) {
                out.insert(prefix.clone());
            } else {
                walk(child, prefix, out);
            }
            prefix.pop();
        }
    }
    let mut out = FieldSet::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// A path as the API server prints it in conflicts:
/// `.status.conditions[type="Ready"].status`, `.metadata.finalizers[="a"]`.
pub(crate) fn display(p: &[String]) -> String {
    let mut out = String::new();
    for e in p {
        match e.split_at_checked(2) {
            Some(("f:", name)) => {
                out.push('.');
                out.push_str(name);
            }
            Some(("k:", json)) => {
                let keys: Map<String, Value> = serde_json::from_str(json).unwrap_or_default();
                let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
                out.push('[');
                out.push_str(&parts.join(","));
                out.push(']');
            }
            Some(("v:", json)) => {
                out.push_str("[=");
                out.push_str(json);
                out.push(']');
            }
            Some(("i:", n)) => {
                out.push('[');
                out.push_str(n);
                out.push(']');
            }
            _ => out.push_str(e),
        }
    }
    out
}

/// Does this list item match a `k:` element's key values?
fn matches_keys(item: &Value, keys: &Map<String, Value>) -> bool {
    keys.iter().all(|(k, v)| item.get(k) == Some(v))
}

/// The position of the item an element names in a list.
fn position(list: &[Value], e: &str) -> Option<usize> {
    match e.split_at_checked(2)? {
        ("k:", json) => {
            let keys: Map<String, Value> = serde_json::from_str(json).ok()?;
            list.iter().position(|i| matches_keys(i, &keys))
        }
        ("v:", json) => {
            let v: Value = serde_json::from_str(json).ok()?;
            list.iter().position(|i| *i == v)
        }
        ("i:", n) => n.parse().ok().filter(|i: &usize| *i < list.len()),
        _ => None,
    }
}

fn step<'a>(v: &'a Value, e: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m.get(e.strip_prefix("f:")?),
        Value::Array(list) => list.get(position(list, e)?),
        _ => None,
    }
}

/// The value at a path.
pub(crate) fn get<'a>(v: &'a Value, p: &[String]) -> Option<&'a Value> {
    p.iter().try_fold(v, |cur, e| step(cur, e))
}

/// Remove the value at a path (a field, or a list item); nothing when the
/// path leads nowhere.
pub(crate) fn remove(v: &mut Value, p: &[String]) {
    let Some((last, parents)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for e in parents {
        let next = match cur {
            Value::Object(m) => e.strip_prefix("f:").and_then(|n| m.get_mut(n)),
            Value::Array(list) => match position(list, e) {
                Some(i) => list.get_mut(i),
                None => None,
            },
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match cur {
        Value::Object(m) => {
            if let Some(n) = last.strip_prefix("f:") {
                m.remove(n);
            }
        }
        Value::Array(list) => {
            if let Some(i) = position(list, last) {
                list.remove(i);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(els: &[&str]) -> Path {
        els.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_v1_round_trips_with_member_markers() {
        let ready = key(&[("type".into(), json!("Ready"))]);
        let set: FieldSet = [
            path(&["f:status", "f:conditions", &ready]),
            path(&["f:status", "f:conditions", &ready, "f:status"]),
            path(&["f:metadata", "f:finalizers", &value(&json!("a"))]),
        ]
        .into_iter()
        .collect();
        let v = to_fields_v1(&set);
        assert_eq!(
            v,
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}}}},
                "f:metadata": {"f:finalizers": {"v:\"a\"": {}}}})
        );
        assert_eq!(from_fields_v1(&v), set);
    }

    #[test]
    fn keys_are_sorted_and_paths_print_as_the_api_server_prints_them() {
        let k = key(&[
            ("protocol".into(), json!("TCP")),
            ("containerPort".into(), json!(80)),
        ]);
        assert_eq!(k, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}");
        let p = path(&["f:spec", "f:ports", &k, "f:name"]);
        assert_eq!(
            display(&p),
            ".spec.ports[containerPort=80,protocol=\"TCP\"].name"
        );
        assert_eq!(
            display(&path(&["f:metadata", "f:finalizers", "v:\"a\""])),
            ".metadata.finalizers[=\"a\"]"
        );
    }

    #[test]
    fn get_and_remove_follow_keys_and_values() {
        let mut obj = json!({"spec": {"ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"},
            {"containerPort": 443, "protocol": "TCP"}]}, "f": ["a", "b"]});
        let k = key(&[
            ("containerPort".into(), json!(80)),
            ("protocol".into(), json!("TCP")),
        ]);
        let p = path(&["f:spec", "f:ports", &k, "f:name"]);
        assert_eq!(get(&obj, &p), Some(&json!("http")));
        remove(&mut obj, &p);
        assert_eq!(get(&obj, &p), None);
        remove(&mut obj, &path(&["f:spec", "f:ports", &k]));
        assert_eq!(obj["spec"]["ports"].as_array().unwrap().len(), 1);
        remove(&mut obj, &path(&["f:f", "v:\"a\""]));
        assert_eq!(obj["f"], json!(["b"]));
    }
}
