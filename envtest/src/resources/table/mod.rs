//! Server-side table output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`),
//! which `kubectl get` asks for. Each built-in kind has a [`Printer`]: its
//! column definitions (name, type, and `priority` 1 for the columns only
//! `-o wide` shows) and a function giving one object's cells, as the API
//! server prints them (pods' READY/STATUS/RESTARTS, services' CLUSTER-IP and
//! PORT(S), ...). A custom resource shows a Name column, then its
//! `additionalPrinterColumns` or, when it declares none, an Age column.
//! Each row carries the object's metadata so kubectl can show namespaces
//! and labels.

mod admission;
mod core_v1;
mod format;
mod pod;
mod workloads;

use crate::resources::objects::{json_response, value_response};
use crate::resources::registry::{PrinterColumn, ResourceInfo};
use crate::resources::selectors::field_value;
use crate::storage::StoredObject;
use axum::response::Response;
use bytes::Bytes;
use jiff::Timestamp;
use serde_json::{Value, json};
use std::sync::Arc;

/// One column of a kind's table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Header, as kubectl prints it upper-cased.
    pub name: &'static str,
    /// `string`, `integer`, `boolean` or `date`.
    pub ty: &'static str,
    /// `name` for the column holding the object's name, else empty.
    pub format: &'static str,
    /// 0 for default columns, 1 for those only `-o wide` shows.
    pub priority: u8,
    /// What the column shows.
    pub description: &'static str,
}

/// A default column.
pub const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Column {
    Column {
        name,
        ty,
        format: "",
        priority: 0,
        description,
    }
}

/// A string column shown only by `-o wide`.
pub const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        priority: 1,
        ..col(name, "string", description)
    }
}

/// The Name column.
pub const NAME: Column = Column {
    format: "name",
    ..col(
        "Name",
        "string",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically.",
    )
};

/// The Age column.
pub const AGE: Column = col(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
);

/// How one kind is printed: its columns, and the cells of one object (one
/// per column, in order).
pub struct Printer {
    /// Column definitions.
    pub columns: &'static [Column],
    /// One object's cells at the given time (ages are relative to it).
    pub cells: fn(&Value, Timestamp) -> Vec<Value>,
}

/// The printer of a built-in resource, by group and plural.
pub fn printer(group: &str, plural: &str) -> Option<&'static Printer> {
    Some(match (group, plural) {
        ("", "pods") => &pod::POD,
        ("", "services") => &core_v1::SERVICE,
        ("", "configmaps") => &core_v1::CONFIG_MAP,
        ("", "secrets") => &core_v1::SECRET,
        ("", "namespaces") => &core_v1::NAMESPACE,
        ("", "serviceaccounts") => &core_v1::SERVICE_ACCOUNT,
        ("", "nodes") => &core_v1::NODE,
        ("", "endpoints") => &core_v1::ENDPOINTS,
        ("", "persistentvolumeclaims") => &core_v1::PVC,
        ("" | "events.k8s.io", "events") => &core_v1::EVENT,
        ("apps", "deployments") => &workloads::DEPLOYMENT,
        ("apps", "replicasets") => &workloads::REPLICA_SET,
        ("apps", "statefulsets") => &workloads::STATEFUL_SET,
        ("apps", "daemonsets") => &workloads::DAEMON_SET,
        ("apps", "controllerrevisions") => &workloads::CONTROLLER_REVISION,
        ("batch", "jobs") => &workloads::JOB,
        ("batch", "cronjobs") => &workloads::CRON_JOB,
        ("coordination.k8s.io", "leases") => &workloads::LEASE,
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
        | ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            &admission::WEBHOOK_CONFIGURATION
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => &admission::POLICY,
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            &admission::POLICY_BINDING
        }
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => &workloads::CREATED,
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            &workloads::BINDING
        }
        _ => return None,
    })
}

/// Whether the client asked for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

fn column_value(c: &Column) -> Value {
    json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
}

fn builtin_printer(info: &ResourceInfo) -> Option<&'static Printer> {
    if info.custom {
        None
    } else {
        printer(&info.group, &info.plural)
    }
}

fn columns(info: &ResourceInfo) -> Value {
    if let Some(p) = builtin_printer(info) {
        return Value::Array(p.columns.iter().map(column_value).collect());
    }
    let mut cols = vec![column_value(&NAME)];
    for c in &info.printer_columns {
        cols.push(json!({
            "name": c.name,
            "type": c.ty,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        }));
    }
    if info.printer_columns.is_empty() {
        cols.push(column_value(&AGE));
    }
    Value::Array(cols)
}

fn cells(info: &ResourceInfo, v: &Value, now: Timestamp) -> Vec<Value> {
    if let Some(p) = builtin_printer(info) {
        return (p.cells)(v, now);
    }
    let mut cells = vec![v["metadata"]["name"].clone()];
    for PrinterColumn { ty, path, .. } in &info.printer_columns {
        let cell = match field_value(v, path) {
            None => Value::Null,
            Some(s) if ty == "integer" || ty == "number" => s
                .parse::<f64>()
                .map(|n| json!(n))
                .unwrap_or(Value::String(s)),
            Some(s) if ty == "date" => Value::String(format::since(&s, now)),
            Some(s) => Value::String(s),
        };
        cells.push(cell);
    }
    if info.printer_columns.is_empty() {
        let created = v["metadata"]["creationTimestamp"].as_str().unwrap_or("");
        cells.push(Value::String(format::since(created, now)));
    }
    cells
}

fn row(info: &ResourceInfo, v: &Value, now: Timestamp) -> Value {
    json!({
        "cells": cells(info, v, now),
        "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"]},
    })
}

/// A Table holding one object's row, with ages counted to `now`.
pub fn table_at(info: &ResourceInfo, v: &Value, now: Timestamp) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": v["metadata"]["resourceVersion"]},
        "columnDefinitions": columns(info),
        "rows": [row(info, v, now)],
    })
}

/// A Table holding one object's row (for GET and watch events).
pub fn table_value(info: &ResourceInfo, v: &Value) -> Value {
    table_at(info, v, Timestamp::now())
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
    let now = Timestamp::now();
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let v = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns(info),
        "rows": objs.iter().map(|o| row(info, &o.value, now)).collect::<Vec<_>>(),
    });
    json_response(200, Bytes::from(v.to_string()))
}

#[cfg(test)]
mod tests;
