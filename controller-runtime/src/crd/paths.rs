//! JSONPaths named by a version (printer columns, scale paths, selectable
//! fields) checked against the version's finished schema: the macro checks
//! what it can see at compile time, this checks the rest (deeper segments,
//! `.status`) when the CRD is built, with a "did you mean".

use serde_json::Value;

use super::{CrdError, CrdVersionInfo};

/// The JSONPaths `info` names, each with what names it.
fn named_paths(info: &CrdVersionInfo) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = info
        .printer_columns
        .iter()
        .map(|c| ("printer column", c.json_path))
        .collect();
    if let Some(s) = info.scale {
        out.push(("scale spec path", s.spec_replicas_path));
        out.push(("scale status path", s.status_replicas_path));
        if let Some(sel) = s.label_selector_path {
            out.push(("scale selector path", sel));
        }
    }
    out.extend(
        info.selectable_fields
            .iter()
            .map(|p| ("selectable field", *p)),
    );
    out
}

/// Checks that every path `info` names exists in `root` (the version's
/// `openAPIV3Schema`). A node that keeps unknown fields, a map or an
/// int-or-string ends the check (anything below may exist).
pub(super) fn check_paths(info: &CrdVersionInfo, root: &Value) -> Result<(), CrdError> {
    for (what, path) in named_paths(info) {
        let mut node = root;
        let mut seen = String::new();
        for segment in path.trim_start_matches('.').split('.') {
            if seen == ".metadata" {
                break; // ObjectMeta: checked by the macro
            }
            if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
                || node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                || node.get("additionalProperties").is_some()
            {
                break;
            }
            let props = node.get("properties").and_then(Value::as_object);
            match props.and_then(|p| p.get(segment)) {
                Some(next) => node = next,
                None => {
                    let names: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(CrdError::UnknownPath {
                        what,
                        path: path.to_owned(),
                        missing: segment.to_owned(),
                        parent: if seen.is_empty() { ".".into() } else { seen },
                        suggestion: informer_naming::closest(segment, &names)
                            .map(|n| (*n).to_owned()),
                    });
                }
            }
            seen.push('.');
            seen.push_str(segment);
        }
    }
    Ok(())
}
