//! Input checks that keep bad requests from reaching storage: object names
//! (DNS-1123 subdomain or label, DNS-1035 label, path segment), the body's
//! kind/apiVersion/namespace/name against the URL, body size (413), content
//! type (415) and JSON well-formedness and nesting depth (400). Built-in
//! kinds are decoded through their types ([`typed`]), unknown and duplicate
//! fields follow `fieldValidation` ([`field_validation`]), and metadata has
//! its own rules ([`metadata`]). Webhook configurations get the API
//! server's checks of their timeouts and rule scopes ([`admission`]).

mod admission;
mod field_validation;
mod metadata;
mod typed;

pub use admission::check_webhooks;
pub use field_validation::{FieldCheck, FieldValidation, parse_checked};
pub use metadata::{check_immutable, check_metadata};

use crate::error::ApiError;
use crate::resources::registry::{NameRule, ResourceInfo};
use serde_json::Value;

/// Decode an object through its kind's type (built-in kinds; then given
/// Go's JSON form, see [`crate::resources::defaults::go_form`]) or its
/// metadata through `ObjectMeta` (custom resources), replacing it with the
/// decoded value. Answers the paths of the unknown fields it dropped, for
/// the caller to report to a [`FieldCheck`] with any others it finds.
pub fn decode_object(info: &ResourceInfo, obj: &mut Value) -> Result<Vec<String>, ApiError> {
    match typed::decode(info, obj) {
        Some(decoded) => {
            let d = decoded?;
            *obj = d.value;
            // Also here, not only in defaulting: status writes skip that.
            crate::resources::defaults::go_form(obj);
            Ok(d.unknown)
        }
        None => {
            let d = typed::decode_metadata(info, obj)?;
            obj["metadata"] = d.value;
            Ok(d.unknown)
        }
    }
}

/// Deepest JSON nesting accepted in a request body.
pub const MAX_DEPTH: usize = 100;

fn is_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Why `name` is not valid under `rule`, or None.
pub fn name_problem(name: &str, rule: NameRule) -> Option<String> {
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 || !name.split('.').all(|l| is_label(l, 63)) {
                Some("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into())
            } else {
                None
            }
        }
        NameRule::Label => (!is_label(name, 63)).then(|| {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc'), at most 63 characters".into()
        }),
        NameRule::Dns1035 => (!is_label(name, 63) || !name.starts_with(|c: char| c.is_ascii_lowercase())).then(|| {
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or 'abc-123'), at most 63 characters".into()
        }),
        NameRule::PathSegment => {
            if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('%') {
                Some("may not be '.' or '..' and may not contain '/' or '%'".into())
            } else {
                None
            }
        }
    }
}

/// Validate `metadata.name` for a kind; 422 with the field path.
pub fn check_name(info: &ResourceInfo, name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::invalid(
            &info.kind,
            name,
            "metadata.name",
            "FieldValueRequired",
            "Required value: name or generateName is required",
        ));
    }
    if let Some(p) = name_problem(name, info.name_rule) {
        return Err(ApiError::invalid(
            &info.kind,
            name,
            "metadata.name",
            "FieldValueInvalid",
            &format!("Invalid value: {name:?}: {p}"),
        ));
    }
    Ok(())
}

/// Depth of the deepest nesting in a JSON text, counted without parsing so a
/// hostile body cannot exhaust the stack.
pub fn json_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// 400 for a body nested deeper than [`MAX_DEPTH`].
pub fn check_depth(bytes: &[u8]) -> Result<(), ApiError> {
    if json_depth(bytes) > MAX_DEPTH {
        return Err(ApiError::bad_request(format!(
            "the request body is nested more than {MAX_DEPTH} levels deep"
        )));
    }
    Ok(())
}

/// Parse a JSON body, rejecting excessive nesting and malformed text with 400.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    check_depth(bytes)?;
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// Parse a body that may be JSON or YAML (for apply patches), with the
/// paths of duplicate fields (JSON; YAML refuses duplicate keys itself).
pub fn parse_yaml_or_json(bytes: &[u8]) -> Result<(Value, Vec<String>), ApiError> {
    check_depth(bytes)?;
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body is not UTF-8: {e}")))?;
    if text.trim_start().starts_with('{') {
        return parse_checked(bytes);
    }
    serde_saphyr::from_str::<Value>(text)
        .map(|v| (v, Vec::new()))
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")))
}

/// The media type without parameters, lowercased.
pub fn media_type(content_type: Option<&str>) -> String {
    content_type
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Accept only JSON bodies for create/update (415 otherwise): the codec has
/// already turned YAML and protobuf bodies into JSON.
pub fn require_json(content_type: Option<&str>) -> Result<(), ApiError> {
    let mt = media_type(content_type);
    if mt == "application/json" || mt.is_empty() || mt == "*/*" {
        Ok(())
    } else {
        Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {mt:?})"
            ),
        ))
    }
}

/// Check that the body's apiVersion/kind (when set) match the URL, filling them in otherwise.
pub fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let want_av = info.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want_av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
        _ => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if k != info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({}) for {}",
                info.kind,
                info.group_resource()
            )));
        }
        _ => {}
    }
    map.insert("apiVersion".into(), Value::String(want_av));
    map.insert("kind".into(), Value::String(info.kind.clone()));
    match map.get("metadata") {
        None | Some(Value::Null) => {
            map.insert("metadata".into(), Value::Object(Default::default()));
        }
        Some(Value::Object(_)) => {}
        Some(_) => return Err(ApiError::bad_request("metadata must be a JSON object")),
    }
    Ok(())
}

/// Check that `metadata.namespace` in the body agrees with the URL, setting it from the URL.
pub fn check_namespace(
    info: &ResourceInfo,
    obj: &mut Value,
    url_ns: Option<&str>,
) -> Result<(), ApiError> {
    let meta = obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| ApiError::bad_request("metadata must be a JSON object"))?;
    let body_ns = meta
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if info.namespaced {
        let url_ns = url_ns.unwrap_or("");
        if let Some(b) = body_ns
            && b != url_ns
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({b}) does not match the namespace sent on the request ({url_ns})"
            )));
        }
        meta.insert("namespace".into(), Value::String(url_ns.to_string()));
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rules() {
        assert!(name_problem("my-app.v1", NameRule::Subdomain).is_none());
        assert!(name_problem("My_App", NameRule::Subdomain).is_some());
        assert!(name_problem("a.b", NameRule::Label).is_some());
        assert!(name_problem("1abc", NameRule::Dns1035).is_some());
        assert!(name_problem("system:admin", NameRule::PathSegment).is_none());
        assert!(name_problem(&"a".repeat(254), NameRule::Subdomain).is_some());
    }

    #[test]
    fn deep_json_is_rejected_without_recursion() {
        let deep = "[".repeat(100_000);
        assert_eq!(json_depth(deep.as_bytes()), 100_000);
        assert_eq!(parse_json(deep.as_bytes()).unwrap_err().code, 400);
        assert_eq!(json_depth(br#"{"a":"[[[[","b":[1]}"#), 2);
    }

    #[test]
    fn content_types() {
        assert!(require_json(Some("application/json; charset=utf-8")).is_ok());
        assert_eq!(
            require_json(Some("application/vnd.kubernetes.protobuf"))
                .unwrap_err()
                .code,
            415
        );
    }
}
