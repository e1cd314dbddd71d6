//! Merging the object schemas of a union or an `allOf` into one object:
//! what makes serde's tagged, untagged and flattened enums structural.

use serde_json::{Map, Value, json};

use super::{SchemaError, non_structural, truthy, type_of};

pub(super) fn dedup(values: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(values.len());
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Merges the object schemas of a union: properties are united (the same
/// property in two members is widened to what both accept, see [`widen`]), `required` keeps what every member requires. When every member
/// has exactly one property and requires it (serde's externally tagged
/// enum), a `oneOf` of `required` lists keeps "exactly one variant".
pub(super) fn merge_objects(
    members: Vec<Value>,
    variants: bool,
    path: &str,
) -> Result<Value, SchemaError> {
    let externally_tagged = variants && members.iter().all(|m| {
        let props = m.get("properties").and_then(Value::as_object);
        let req = m.get("required").and_then(Value::as_array);
        matches!((props, req), (Some(p), Some(r)) if p.len() == 1 && r.len() == 1 && p.contains_key(r[0].as_str().unwrap_or_default()))
    });
    let mut props = Map::new();
    let mut required: Option<Vec<Value>> = None;
    let mut one_of = Vec::new();
    let mut preserve = false;
    for m in &members {
        if let Some(p) = m.get("properties").and_then(Value::as_object) {
            for (name, schema) in p {
                let merged = match props.remove(name) {
                    None => schema.clone(),
                    Some(existing) => {
                        merge_same_property(existing, schema.clone(), &format!("{path}.{name}"))?
                    }
                };
                props.insert(name.clone(), merged);
            }
        }
        if truthy(m, "x-kubernetes-preserve-unknown-fields") {
            preserve = true;
        }
        let req = m
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if externally_tagged {
            one_of.push(json!({"required": req.clone()}));
        }
        required = Some(match required {
            None => req,
            Some(prev) => prev.into_iter().filter(|r| req.contains(r)).collect(),
        });
    }
    let mut out = Map::new();
    out.insert("type".into(), "object".into());
    if !props.is_empty() {
        out.insert("properties".into(), Value::Object(props));
    }
    if let Some(req) = required.filter(|r| !r.is_empty()) {
        out.insert("required".into(), Value::Array(req));
    }
    if externally_tagged {
        out.insert("oneOf".into(), Value::Array(one_of));
    }
    if preserve {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    }
    Ok(Value::Object(out))
}

fn merge_same_property(a: Value, b: Value, path: &str) -> Result<Value, SchemaError> {
    if a == b {
        return Ok(a);
    }
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("description");
            o.remove("enum");
            o.remove("default");
        }
        v
    };
    // Internally/adjacently tagged enums: the tag is a one-value string enum per variant.
    if let (Some(ea), Some(eb)) = (
        a.get("enum").and_then(Value::as_array),
        b.get("enum").and_then(Value::as_array),
    ) && strip(&a) == strip(&b)
    {
        let mut out = strip(&a);
        let values = dedup(ea.iter().chain(eb).cloned().collect());
        if let Some(o) = out.as_object_mut() {
            o.insert("enum".into(), Value::Array(values));
        }
        return Ok(out);
    }
    if strip(&a) == strip(&b) {
        return Ok(strip(&a));
    }
    // Adjacently tagged content: objects are merged, anything else must agree.
    if type_of(&a) == Some("object") && type_of(&b) == Some("object") {
        return merge_objects(vec![a, b], false, path);
    }
    Ok(widen(a, b, path))
}

/// One schema for a property two variants type differently. Structural
/// schemas allow one type per node, so what both accept is kept and the rest
/// is given up (a documented loss of validation, never an error):
/// - two objects are merged, two arrays keep an array of the widened items,
///   two scalars of one type keep the type without the constraints that
///   differ;
/// - an integer and a string become `x-kubernetes-int-or-string`;
/// - anything else (a string and an object: an adjacently tagged enum whose
///   variants carry different content) becomes an untyped node with
///   `x-kubernetes-preserve-unknown-fields`, which the API server stores as
///   written.
fn widen(a: Value, b: Value, path: &str) -> Value {
    let nullable = truthy(&a, "nullable") || truthy(&b, "nullable");
    let without_nullable = |mut v: Value| {
        if let Some(o) = v.as_object_mut() {
            o.remove("nullable");
        }
        v
    };
    let (a, b) = (without_nullable(a), without_nullable(b));
    let int_or_string = |v: &Value| {
        truthy(v, "x-kubernetes-int-or-string") || matches!(type_of(v), Some("integer" | "string"))
    };
    let mut out = if a == b {
        a
    } else {
        match (type_of(&a), type_of(&b)) {
            (Some("object"), Some("object")) => {
                merge_objects(vec![a.clone(), b.clone()], false, path).unwrap_or_else(
                    |_| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                )
            }
            (Some("array"), Some("array")) => {
                let items = |v: &Value| {
                    v.get("items")
                        .cloned()
                        .unwrap_or_else(|| json!({"x-kubernetes-preserve-unknown-fields": true}))
                };
                let (ia, ib) = (items(&a), items(&b));
                let items = if ia == ib {
                    ia
                } else {
                    widen(ia, ib, &format!("{path}[*]"))
                };
                json!({"type": "array", "items": items})
            }
            (Some(x), Some(y)) if x == y => json!({"type": x}),
            _ if int_or_string(&a) && int_or_string(&b) => {
                json!({"x-kubernetes-int-or-string": true})
            }
            _ => json!({"x-kubernetes-preserve-unknown-fields": true}),
        }
    };
    if nullable && let Some(o) = out.as_object_mut() {
        o.insert("nullable".into(), true.into());
    }
    out
}

/// Merges `extra` (a rewritten allOf member or union) into `base`.
pub(super) fn merge_into(
    mut base: Map<String, Value>,
    extra: Value,
    path: &str,
) -> Result<Map<String, Value>, SchemaError> {
    let Value::Object(extra) = extra else {
        return Ok(base);
    };
    for (k, v) in extra {
        match (k.as_str(), base.remove(&k)) {
            (_, None) => {
                base.insert(k, v);
            }
            ("properties", Some(Value::Object(mut existing))) => {
                if let Value::Object(more) = v {
                    for (name, schema) in more {
                        let merged = match existing.remove(&name) {
                            None => schema,
                            Some(prev) => {
                                merge_same_property(prev, schema, &format!("{path}.{name}"))?
                            }
                        };
                        existing.insert(name, merged);
                    }
                }
                base.insert(k, Value::Object(existing));
            }
            ("required", Some(Value::Array(mut existing))) => {
                if let Value::Array(more) = v {
                    for r in more {
                        if !existing.contains(&r) {
                            existing.push(r);
                        }
                    }
                }
                base.insert(k, Value::Array(existing));
            }
            ("type", Some(existing)) => {
                if existing != v && !(existing == "object" || v == "object") {
                    return Err(non_structural(
                        path,
                        format!("a value that is both {existing} and {v}"),
                    ));
                }
                base.insert(k, existing);
            }
            (_, Some(existing)) => {
                // The outer schema (written by the type's author) wins.
                base.insert(k, existing);
            }
        }
    }
    Ok(base)
}
