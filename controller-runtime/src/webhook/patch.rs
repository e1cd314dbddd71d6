//! The JSON patch a defaulter's change becomes, computed against the
//! object as the API server sent it.
//!
//! The defaulter sees a typed `K`; `before` and `after` are that `K`
//! serialized before and after the call, `raw` is the object as sent. The
//! change from `before` to `after` is merged into `raw` (a three-way
//! merge): maps key by key, so fields `K` does not know (or does not
//! serialize) stay as sent; a field `K` fills in by default but the object
//! lacks is written only if the defaulter changed it; lists item by item
//! when their lengths agree or items were only appended or cut off the end. A list whose
//! items the defaulter reordered, removed or inserted, and whose items as
//! sent differ from what `K` saw (fields `K` does not know), is refused
//! with an error naming its path instead of being replaced by `K`'s view,
//! which would drop those fields. The patch is the diff from `raw` to the
//! merge.
//!
//! Part of the webhook layer's admission handling; pure JSON, no I/O.

use serde_json::{Map, Value};

/// The patch turning `raw` into `raw` with the defaulter's change from
/// `before` to `after`; `Ok(None)` when nothing changes. The error names
/// the path that cannot be changed without dropping fields of `raw`.
pub(crate) fn patch_for(
    raw: &Value,
    before: &Value,
    after: &Value,
) -> Result<Option<json_patch::Patch>, String> {
    if before == after {
        return Ok(None);
    }
    let mut merged = raw.clone();
    merge(&mut merged, before, after, &mut String::new())?;
    let patch = json_patch::diff(raw, &merged);
    Ok((!patch.0.is_empty()).then_some(patch))
}

/// Merges the change `before` -> `after` into `raw`, which sits at `path`
/// (a JSON pointer).
fn merge(raw: &mut Value, before: &Value, after: &Value, path: &mut String) -> Result<(), String> {
    if before == after {
        return Ok(());
    }
    match (after, &mut *raw) {
        (Value::Object(after), Value::Object(raw)) => {
            let empty = Map::new();
            let before = before.as_object().unwrap_or(&empty);
            merge_maps(raw, before, after, path)
        }
        (Value::Object(after), Value::Null) => {
            *raw = Value::Object(after.clone());
            Ok(())
        }
        (Value::Array(after), Value::Array(items)) => match before.as_array() {
            Some(before) => merge_lists(items, before, after, path),
            None => {
                *raw = Value::Array(after.clone());
                Ok(())
            }
        },
        // A scalar, or a value of another type than before: what K wants.
        _ => {
            *raw = after.clone();
            Ok(())
        }
    }
}

fn merge_maps(
    raw: &mut Map<String, Value>,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    path: &mut String,
) -> Result<(), String> {
    for (key, a) in after {
        let b = before.get(key);
        if b == Some(a) {
            continue;
        }
        match raw.get_mut(key) {
            Some(r) => {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                merge(r, b.unwrap_or(&Value::Null), a, path)?;
                path.truncate(len);
            }
            None => {
                raw.insert(key.clone(), a.clone());
            }
        }
    }
    for key in before.keys() {
        if !after.contains_key(key) {
            raw.remove(key);
        }
    }
    Ok(())
}

fn merge_lists(
    raw: &mut Vec<Value>,
    before: &[Value],
    after: &[Value],
    path: &mut String,
) -> Result<(), String> {
    let item = |path: &mut String, i: usize| {
        let len = path.len();
        path.push('/');
        path.push_str(&i.to_string());
        len
    };
    if raw.len() == before.len()
        && (after.len() == before.len() || after.starts_with(before) || before.starts_with(after))
    {
        for (i, (r, (b, a))) in raw.iter_mut().zip(before.iter().zip(after)).enumerate() {
            let len = item(path, i);
            merge(r, b, a, path)?;
            path.truncate(len);
        }
        raw.truncate(after.len());
        raw.extend(after[before.len().min(after.len())..].iter().cloned());
        return Ok(());
    }
    if raw.as_slice() == before {
        // K sees these items as sent: its list loses nothing.
        *raw = after.to_vec();
        return Ok(());
    }
    let at = if path.is_empty() { "/" } else { path.as_str() };
    Err(format!(
        "the defaulter reordered, removed or inserted items of the list at {at}, whose items as sent carry fields the webhook's type does not know; patching that list would drop them"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn applied(raw: &Value, before: &Value, after: &Value) -> Value {
        let mut out = raw.clone();
        if let Some(patch) = patch_for(raw, before, after).unwrap() {
            json_patch::patch(&mut out, &patch).unwrap();
        }
        out
    }

    #[test]
    fn the_patch_touches_only_what_the_defaulter_changed() {
        let raw = json!({"metadata": {"name": "a", "unknownField": 1}, "spec": {"x": null}});
        let before = json!({"metadata": {"name": "a"}, "spec": {}});
        let after = json!({"metadata": {"name": "a"}, "spec": {"replicas": 1}});
        assert_eq!(
            applied(&raw, &before, &after),
            json!({"metadata": {"name": "a", "unknownField": 1}, "spec": {"x": null, "replicas": 1}})
        );
        assert!(patch_for(&raw, &before, &before).unwrap().is_none());
    }

    #[test]
    fn a_parent_the_type_defaults_but_the_object_lacks_keeps_unknown_fields() {
        // K serializes a required `template` the object does not have; the
        // defaulter writes under it.
        let raw = json!({"metadata": {"name": "a", "future": 1}, "spec": {"replicas": 1}});
        let before = json!({"metadata": {"name": "a"}, "spec": {"replicas": 1, "selector": {}, "template": {}}});
        let mut after = before.clone();
        after["spec"]["template"] = json!({"metadata": {"labels": {"app": "a"}}});
        assert_eq!(
            applied(&raw, &before, &after),
            json!({"metadata": {"name": "a", "future": 1},
                   "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "a"}}}}})
        );
    }

    #[test]
    fn lists_merge_item_by_item_and_appended_items_are_added() {
        let raw = json!({"items": [{"name": "a", "future": 1}]});
        let before = json!({"items": [{"name": "a"}]});
        // Changed in place.
        let after = json!({"items": [{"name": "a", "image": "x"}]});
        assert_eq!(
            applied(&raw, &before, &after),
            json!({"items": [{"name": "a", "future": 1, "image": "x"}]})
        );
        // Appended.
        let after = json!({"items": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(
            applied(&raw, &before, &after),
            json!({"items": [{"name": "a", "future": 1}, {"name": "b"}]})
        );
        // Items cut off the end are removed, unknown fields and all.
        let after = json!({"items": []});
        assert_eq!(applied(&raw, &before, &after), json!({"items": []}));
        // Changed and appended: which item is which cannot be told.
        let after = json!({"items": [{"name": "a", "image": "x"}, {"name": "b"}]});
        assert!(patch_for(&raw, &before, &after).is_err());
    }

    #[test]
    fn a_reordered_list_with_unknown_fields_is_refused_naming_it() {
        let raw = json!({"spec": {"items": [{"name": "a", "future": 1}, {"name": "b"}]}});
        let before = json!({"spec": {"items": [{"name": "a"}, {"name": "b"}]}});
        let after = json!({"spec": {"items": [{"name": "b"}]}});
        let err = patch_for(&raw, &before, &after).unwrap_err();
        assert!(err.contains("/spec/items"), "{err}");
        // Without unknown fields the list is K's to replace.
        let raw = before.clone();
        assert_eq!(applied(&raw, &before, &after), after);
    }
}
