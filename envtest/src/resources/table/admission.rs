//! Columns and cells of the `admissionregistration.k8s.io` kinds, as the API
//! server prints them for `kubectl get`: webhook configurations (NAME
//! WEBHOOKS AGE), admission policies (NAME VALIDATIONS PARAMKIND AGE) and
//! their bindings (NAME POLICYNAME PARAMREF AGE).

use super::format::{at, list, since, text};
use super::{AGE, NAME, Printer, col};
use jiff::Timestamp;
use serde_json::{Value, json};

fn name(v: &Value) -> Value {
    json!(text(v, "metadata.name"))
}

fn age(v: &Value, now: Timestamp) -> Value {
    json!(since(text(v, "metadata.creationTimestamp"), now))
}

/// Validating and mutating webhook configurations: NAME WEBHOOKS AGE.
pub const WEBHOOK_CONFIGURATION: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Webhooks",
            "integer",
            "Webhooks indicates the number of webhooks included in this configuration",
        ),
        AGE,
    ],
    cells: |v, now| vec![name(v), json!(list(v, "webhooks").len()), age(v, now)],
};

/// `apiVersion/kind` of a policy's `paramKind`, or `<unset>`.
fn param_kind(v: &Value) -> String {
    match at(v, "spec.paramKind") {
        Some(p) if p.is_object() => format!(
            "{}/{}",
            p["apiVersion"].as_str().unwrap_or(""),
            p["kind"].as_str().unwrap_or("")
        ),
        _ => "<unset>".into(),
    }
}

/// ValidatingAdmissionPolicies: NAME VALIDATIONS PARAMKIND AGE.
pub const POLICY: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        col(
            "ParamKind",
            "string",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ],
    cells: |v, now| {
        vec![
            name(v),
            json!(list(v, "spec.validations").len()),
            json!(param_kind(v)),
            age(v, now),
        ]
    },
};

/// `namespace/name` (`*` for a missing part) of a binding's `paramRef`.
fn param_ref(v: &Value) -> String {
    let Some(p) = at(v, "spec.paramRef").filter(|p| p.is_object()) else {
        return "<unset>".into();
    };
    let ns = p["namespace"].as_str().filter(|s| !s.is_empty());
    let name = p["name"].as_str().filter(|s| !s.is_empty()).unwrap_or("*");
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// ValidatingAdmissionPolicyBindings: NAME POLICYNAME PARAMREF AGE.
pub const POLICY_BINDING: Printer = Printer {
    columns: &[
        NAME,
        col(
            "PolicyName",
            "string",
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        col(
            "ParamRef",
            "string",
            "ParamRef indicates the param resource which sets the configration param",
        ),
        AGE,
    ],
    cells: |v, now| {
        vec![
            name(v),
            json!(text(v, "spec.policyName")),
            json!(param_ref(v)),
            age(v, now),
        ]
    },
};
