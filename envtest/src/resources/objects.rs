//! Helpers shared by the request handlers: rendering stored objects at the
//! requested version, JSON responses, timestamps, selector matching against
//! an object, and the opaque continue tokens of paginated lists.

use crate::error::ApiError;
use crate::resources::registry::ResourceInfo;
use crate::resources::selectors::{FieldSelector, LabelSelector, field_value};
use crate::storage::{ObjKey, StoredObject};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;

/// The object's JSON at the resource's version (custom resources may be
/// stored at one served version and read at another), with its schema's
/// defaults filled in (see [`read_view`]).
pub fn render(obj: &StoredObject, info: &ResourceInfo) -> Bytes {
    match read_view(obj, info) {
        None => obj.json.clone(),
        Some(v) => Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
    }
}

/// The object as a reader of `info` sees it, when that differs from the
/// stored bytes: at the resource's version, and with the CRD schema's
/// `default`s applied as the API server applies them when it decodes from
/// storage. `None` when the stored bytes are what the reader sees.
pub fn read_view(obj: &StoredObject, info: &ResourceInfo) -> Option<Value> {
    let av = info.api_version();
    let mut v = info
        .schema
        .as_ref()
        .and_then(|s| crate::resources::schema::default_on_read(s, &obj.value));
    if obj.value.get("apiVersion").and_then(Value::as_str) != Some(av.as_str()) {
        v.get_or_insert_with(|| obj.value.clone())["apiVersion"] = Value::String(av);
    }
    v
}

/// A JSON response with a status code.
pub fn json_response(code: u16, body: Bytes) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A JSON response from a value.
pub fn value_response(code: u16, v: &Value) -> Response {
    json_response(code, Bytes::from(v.to_string()))
}

/// Now, as an RFC 3339 timestamp with second precision.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Storage key of an object.
pub fn obj_key(info: &ResourceInfo, ns: Option<&str>, name: &str) -> ObjKey {
    let ns = if info.namespaced {
        ns.unwrap_or("")
    } else {
        ""
    };
    (ns.to_string(), name.to_string())
}

/// Reject field selectors on fields this resource does not support (400).
pub fn check_field_selector(info: &ResourceInfo, fs: &FieldSelector) -> Result<(), ApiError> {
    for f in fs.fields() {
        let known = f == "metadata.name"
            || f == "metadata.namespace"
            || info.field_selectors.iter().any(|(n, _)| n == f);
        if !known {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {f} (supported for {}: metadata.name, metadata.namespace{})",
                info.group_resource(),
                info.field_selectors
                    .iter()
                    .map(|(n, _)| format!(", {n}"))
                    .collect::<String>()
            )));
        }
    }
    Ok(())
}

/// Parsed list/watch filters.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this namespace (None = all).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Filter {
    /// Parse from query parameters (400 on malformed selectors).
    pub fn from_query(
        info: &ResourceInfo,
        ns: Option<&str>,
        q: &crate::request::Query,
    ) -> Result<Self, ApiError> {
        let labels: LabelSelector = q.get("labelSelector").unwrap_or("").parse().map_err(
            |e: crate::resources::selectors::SelectorError| {
                ApiError::bad_request(format!("invalid labelSelector: {e}"))
            },
        )?;
        let fields: FieldSelector = q.get("fieldSelector").unwrap_or("").parse().map_err(
            |e: crate::resources::selectors::SelectorError| {
                ApiError::bad_request(format!("invalid fieldSelector: {e}"))
            },
        )?;
        check_field_selector(info, &fields)?;
        Ok(Filter {
            namespace: if info.namespaced {
                ns.map(str::to_string)
            } else {
                None
            },
            labels,
            fields,
        })
    }

    /// Whether selectors are set (namespace aside).
    pub fn has_selectors(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }

    /// Does the object match?
    pub fn matches(&self, info: &ResourceInfo, obj: &Value) -> bool {
        let meta = &obj["metadata"];
        if let Some(ns) = &self.namespace
            && meta["namespace"].as_str().unwrap_or("") != ns
        {
            return false;
        }
        if !self.labels.matches(meta.get("labels")) {
            return false;
        }
        self.fields.matches(|f| match f {
            "metadata.name" => meta["name"].as_str().map(str::to_string),
            "metadata.namespace" => Some(meta["namespace"].as_str().unwrap_or("").to_string()),
            other => info
                .field_selectors
                .iter()
                .find(|(n, _)| n == other)
                .and_then(|(_, path)| field_value(obj, path)),
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Encode a continue token: the snapshot revision and the last key served.
pub fn encode_continue(rev: u64, last: &ObjKey) -> String {
    hex(format!("{rev}\u{0}{}\u{0}{}", last.0, last.1).as_bytes())
}

/// Decode a continue token (400 if it is not one of ours).
pub fn decode_continue(token: &str) -> Result<(u64, ObjKey), ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "continue key is not valid: {token:?} was not issued by this server"
        ))
    };
    let bytes = unhex(token).ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.split('\u{0}');
    let rev = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?.to_string();
    let name = parts.next().ok_or_else(bad)?.to_string();
    Ok((rev, (ns, name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let k = ("ns".to_string(), "a-b".to_string());
        let t = encode_continue(42, &k);
        assert_eq!(decode_continue(&t).unwrap(), (42, k));
        assert_eq!(decode_continue("zz").unwrap_err().code, 400);
        assert_eq!(decode_continue("abc").unwrap_err().code, 400);
    }
}
