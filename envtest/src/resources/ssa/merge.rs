//! The three walks server-side apply makes over objects, each following the
//! node kinds of `shape`: the field set a value sets (what an applier comes
//! to own), the merge of a configuration onto the live object (map-lists by
//! key, sets by value, granular objects field by field, everything else
//! replaced), and the comparison of two objects (which owned paths a write
//! changes or adds, and which it removes).
//!
//! Part of `resources::ssa`; the ownership rules in its `mod.rs` use them.

use super::fieldset::{FieldSet, Path, field, get, key, value};
use super::shape::{ListKind, Shape, item_keys};
use serde_json::{Map, Value};

/// The element naming one list item, for a set or a map list.
fn item_element(item: &Value, kind: &ListKind) -> Option<String> {
    match kind {
        ListKind::Atomic => None,
        ListKind::Set => Some(value(item)),
        ListKind::Map(keys) => Some(key(&item_keys(item, keys))),
    }
}

/// The paths a value sets, as the API server's field sets have them:
/// scalars, atomic lists and objects, set items and map-list items (the
/// item itself and its fields); objects contribute their fields only.
pub(crate) fn field_set(v: &Value, shape: &Shape<'_>, at_root: bool, out: &mut FieldSet) {
    walk_set(v, shape, at_root, &mut Vec::new(), out);
}

fn walk_set(v: &Value, shape: &Shape<'_>, at_root: bool, prefix: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !shape.atomic_object() || at_root => {
            for (k, child) in m {
                prefix.push(field(k));
                walk_set(child, &shape.child(k, at_root), false, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            let kind = shape.list_kind();
            if kind == ListKind::Atomic {
                out.insert(prefix.clone());
                return;
            }
            let item_shape = shape.item();
            for item in items {
                let Some(e) = item_element(item, &kind) else {
                    continue;
                };
                prefix.push(e);
                if matches!(kind, ListKind::Map(_)) {
                    walk_set(item, &item_shape, false, prefix, out);
                }
                out.insert(prefix.clone());
                prefix.pop();
            }
        }
        _ if prefix.is_empty() => {}
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// `cfg` merged onto `live`: objects field by field (atomic ones replaced),
/// map-lists and sets item by item, the rest replaced by `cfg`.
pub(crate) fn merge(live: Option<&Value>, cfg: &Value, shape: &Shape<'_>, at_root: bool) -> Value {
    let Some(live) = live else {
        return cfg.clone();
    };
    match (live, cfg) {
        (Value::Object(l), Value::Object(c)) if at_root || !shape.atomic_object() => {
            let mut out = l.clone();
            for (k, cv) in c {
                let merged = merge(l.get(k), cv, &shape.child(k, at_root), false);
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => {
            let kind = shape.list_kind();
            if kind == ListKind::Atomic {
                return cfg.clone();
            }
            Value::Array(merge_items(l, c, &kind, &shape.item()))
        }
        _ => cfg.clone(),
    }
}

/// Two lists merged by item the way the API server orders them: items only
/// the live list has keep their places, the configuration's items come in
/// its order, and an item both have is merged where the configuration
/// puts it.
fn merge_items(live: &[Value], cfg: &[Value], kind: &ListKind, shape: &Shape<'_>) -> Vec<Value> {
    let name = |i: &Value| item_element(i, kind).unwrap_or_default();
    let lpe: Vec<String> = live.iter().map(name).collect();
    let rpe: Vec<String> = cfg.iter().map(name).collect();
    let in_live = |e: &String| lpe.iter().position(|x| x == e);
    let in_cfg = |e: &String| rpe.contains(e);
    let mut shared = rpe.iter().filter(|e| in_live(e).is_some());
    let mut next_shared = shared.next();
    let mut taken: Vec<&String> = Vec::new();
    let mut out = Vec::with_capacity(live.len() + cfg.len());
    let item = |l: Option<usize>, r: &Value| match kind {
        ListKind::Map(_) => merge(l.map(|i| &live[i]), r, shape, false),
        _ => r.clone(),
    };
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < cfg.len() {
        if li < live.len() && ri < cfg.len() {
            if lpe[li] == rpe[ri] {
                out.push(item(Some(li), &cfg[ri]));
                taken.push(&rpe[ri]);
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_cfg(&lpe[li]) && next_shared.is_some_and(|n| *n != lpe[li]) {
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            if !in_cfg(&lpe[li]) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
            if taken.contains(&&lpe[li]) {
                li += 1;
                continue;
            }
        }
        if ri < cfg.len() {
            let pe = &rpe[ri];
            out.push(item(in_live(pe), &cfg[ri]));
            taken.push(pe);
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// What a write from `before` to `after` does to owned paths:
/// (changed or added, removed). Leaves count when their value differs; a
/// map-list or set item when it appears or disappears (its fields count on
/// their own).
pub(crate) fn compare(before: &Value, after: &Value, shape: &Shape<'_>) -> (FieldSet, FieldSet) {
    let (mut b, mut a) = (FieldSet::new(), FieldSet::new());
    field_set(before, shape, true, &mut b);
    field_set(after, shape, true, &mut a);
    let changed = a
        .iter()
        .filter(|p| {
            let item = p.last().is_some_and(|e| e.starts_with("k:"));
            match get(before, p) {
                None => true,
                Some(_) if item => false,
                Some(old) => Some(old) != get(after, p),
            }
        })
        .cloned()
        .collect();
    let removed = b.into_iter().filter(|p| get(after, p).is_none()).collect();
    (changed, removed)
}

/// Fill in the defaults of map-list key fields a configuration leaves out,
/// so its items meet the live ones they name.
pub(crate) fn default_keys(cfg: &mut Value, shape: &Shape<'_>, at_root: bool) {
    match cfg {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if let Some(child) = m.get_mut(&k) {
                    default_keys(child, &shape.child(&k, at_root), false);
                }
            }
        }
        Value::Array(items) => {
            let ListKind::Map(keys) = shape.list_kind() else {
                return;
            };
            let item_shape = shape.item();
            for item in items.iter_mut() {
                if let Value::Object(m) = item {
                    for (k, default) in &keys {
                        if let (None, Some(d)) = (m.get(k), default) {
                            m.insert(k.clone(), d.clone());
                        }
                    }
                }
                default_keys(item, &item_shape, false);
            }
        }
        _ => {}
    }
}

/// An empty object, for a missing live object.
pub(crate) fn empty() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd_shape() -> Value {
        json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"], "items": {"type": "object"}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}}})
    }

    #[test]
    fn map_lists_merge_by_key_and_keep_live_only_items_in_place() {
        let schema = crd_shape();
        let shape = Shape::root(Some(&schema), true);
        let live = json!({"status": {"conditions": [
            {"type": "A", "status": "True"}, {"type": "B", "status": "True"}, {"type": "C", "status": "True"}],
            "tags": ["x", "y"]}});
        let cfg = json!({"status": {"conditions": [
            {"type": "D", "status": "False"}, {"type": "B", "status": "False"}],
            "tags": ["z", "x"]}});
        let merged = merge(Some(&live), &cfg, &shape, true);
        let types: Vec<&str> = merged["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["A", "D", "B", "C"]);
        assert_eq!(merged["status"]["conditions"][2]["status"], "False");
        assert_eq!(merged["status"]["tags"], json!(["z", "x", "y"]));

        let mut set = FieldSet::new();
        field_set(&cfg, &shape, true, &mut set);
        let b = key(&[("type".into(), json!("B"))]);
        assert!(set.contains(&vec!["f:status".into(), "f:conditions".into(), b.clone()]));
        assert!(set.contains(&vec![
            "f:status".into(),
            "f:conditions".into(),
            b.clone(),
            "f:status".into()
        ]));
        assert!(set.contains(&vec!["f:status".into(), "f:tags".into(), "v:\"z\"".into()]));

        let (changed, removed) = compare(&live, &merged, &shape);
        assert!(changed.contains(&vec![
            "f:status".into(),
            "f:conditions".into(),
            b.clone(),
            "f:status".into()
        ]));
        assert!(
            !changed.contains(&vec!["f:status".into(), "f:conditions".into(), b]),
            "an item that stays is not changed itself"
        );
        assert!(removed.is_empty());
    }
}
