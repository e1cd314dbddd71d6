//! Server-side table output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`),
//! which `kubectl get` asks for: a Name column, then a custom resource's
//! `additionalPrinterColumns` or, when it declares none (and for built-in
//! kinds), an Age column — as the API server does, so a CRD that declares
//! its own Age column shows it once. Each row carries the object's
//! metadata so kubectl can show namespaces and labels.

use crate::objects::{json_response, value_response};
use crate::registry::ResourceInfo;
use crate::selectors::field_value;
use crate::storage::StoredObject;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;

/// Whether the client asked for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

fn age(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = (jiff::Timestamp::now().as_second() - t.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn columns(info: &ResourceInfo) -> Value {
    let mut cols = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    for (name, ty, _) in &info.printer_columns {
        cols.push(
            json!({"name": name, "type": ty, "format": "", "description": "", "priority": 0}),
        );
    }
    if info.printer_columns.is_empty() {
        cols.push(json!({"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
    }
    Value::Array(cols)
}

fn row(info: &ResourceInfo, v: &Value) -> Value {
    let meta = &v["metadata"];
    let mut cells = vec![meta["name"].clone()];
    for (_, ty, path) in &info.printer_columns {
        let cell = match field_value(v, path) {
            None => Value::Null,
            Some(s) if ty == "integer" || ty == "number" => s
                .parse::<f64>()
                .map(|n| json!(n))
                .unwrap_or(Value::String(s)),
            Some(s) if ty == "date" => Value::String(age(&s)),
            Some(s) => Value::String(s),
        };
        cells.push(cell);
    }
    if info.printer_columns.is_empty() {
        cells.push(Value::String(age(meta["creationTimestamp"]
            .as_str()
            .unwrap_or(""))));
    }
    json!({
        "cells": cells,
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta},
    })
}

/// A Table holding one object's row (for GET and watch events).
pub fn table_value(info: &ResourceInfo, v: &Value) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": v["metadata"]["resourceVersion"]},
        "columnDefinitions": columns(info),
        "rows": [row(info, v)],
    })
}

/// A Table answer for one object.
pub fn single(info: &ResourceInfo, obj: &StoredObject) -> Response {
    value_response(200, &table_value(info, &obj.value))
}

/// A Table answer for a list page.
pub fn list(
    info: &ResourceInfo,
    objs: &[&Arc<StoredObject>],
    rev: u64,
    cont: Option<&str>,
) -> Response {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let v = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns(info),
        "rows": objs.iter().map(|o| row(info, &o.value)).collect::<Vec<_>>(),
    });
    json_response(200, Bytes::from(v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn table_has_name_and_age() {
        let r = Registry::with_builtins();
        let info = r.get("", "v1", "configmaps").unwrap();
        let t = table_value(
            &info,
            &json!({"metadata": {"name": "a", "creationTimestamp": "2020-01-01T00:00:00Z", "resourceVersion": "5"}}),
        );
        assert_eq!(t["rows"][0]["cells"][0], "a");
        assert!(t["rows"][0]["cells"][1].as_str().unwrap().ends_with('d'));
        assert!(wants_table("application/json;as=Table;v=v1;g=meta.k8s.io"));
    }
}
