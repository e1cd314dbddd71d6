//! `default` values of a CRD schema, applied as the API server applies them
//! after pruning: a property missing from its object (or null where the
//! schema is not `nullable`) takes its default, at every depth — in
//! objects, array items and `additionalProperties` values — and a default
//! that is itself an object gets the defaults of its own properties.
//! `apiVersion`, `kind` and `metadata` at the root are left alone.
//!
//! Defaults are applied on writes and again on reads ([`super::default_on_read`]):
//! an object stored before its CRD gained a default shows it on the next
//! GET, LIST or watch event, without being rewritten in storage.

use serde_json::Value;

/// Fill in defaults in `v` from `schema` (`root` for the object itself);
/// true when anything was filled in.
pub fn apply(schema: &Value, v: &mut Value, root: bool) -> bool {
    let mut changed = false;
    match v {
        Value::Object(map) => {
            let props = schema["properties"].as_object();
            for (k, sub) in props.into_iter().flatten() {
                if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(d) = sub.get("default") {
                    let missing = match map.get(k) {
                        None => true,
                        Some(Value::Null) => sub["nullable"] != true,
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(k.clone(), d.clone());
                        changed = true;
                    }
                }
                if let Some(child) = map.get_mut(k) {
                    changed |= apply(sub, child, false);
                }
            }
            let additional = &schema["additionalProperties"];
            if additional.is_object() {
                for (k, child) in map.iter_mut() {
                    if props.is_none_or(|p| !p.contains_key(k)) {
                        changed |= apply(additional, child, false);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for i in items {
                    changed |= apply(item_schema, i, false);
                }
            }
        }
        _ => {}
    }
    changed
}

/// Whether `schema` declares a `default` anywhere (so reads need defaulting).
pub fn declares_any(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    map.contains_key("default")
        || map
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(declares_any))
        || map.get("additionalProperties").is_some_and(declares_any)
        || map.get("items").is_some_and(declares_any)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_missing_fields_at_every_depth() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}},
            "spec": {"type": "object", "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "auto"},
                "note": {"type": "string", "nullable": true, "default": "n"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"}}}},
                "extra": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "on": {"type": "boolean", "default": true}}}}
            }}
        }});
        let mut empty = json!({"metadata": {}});
        assert!(apply(&schema, &mut empty, true));
        assert!(!apply(&schema, &mut empty, true), "nothing left to fill");
        assert!(declares_any(&schema));
        assert!(!declares_any(&json!({"type": "object", "properties": {
            "a": {"type": "array", "items": {"type": "string"}}}})));
        assert_eq!(
            empty["spec"],
            json!({"replicas": 1, "mode": "auto", "note": "n"})
        );
        assert!(empty["metadata"].get("name").is_none());

        let mut obj = json!({"spec": {"replicas": 3, "mode": null, "note": null,
            "ports": [{"port": 80}, {"protocol": "UDP"}], "extra": {"a": {}}}});
        apply(&schema, &mut obj, true);
        assert_eq!(obj["spec"]["replicas"], 3);
        assert_eq!(
            obj["spec"]["mode"], "auto",
            "null is defaulted unless nullable"
        );
        assert_eq!(obj["spec"]["note"], Value::Null);
        assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(obj["spec"]["ports"][1]["protocol"], "UDP");
        assert_eq!(obj["spec"]["extra"]["a"]["on"], true);
    }
}
