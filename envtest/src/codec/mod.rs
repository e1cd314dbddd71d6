//! Content negotiation, in one place: which encoding a request body is in
//! and which one the answer goes out in. Request bodies may be JSON, YAML
//! (`application/yaml`) or, for built-in kinds, protobuf
//! (`application/vnd.kubernetes.protobuf`); they are turned into the JSON the
//! rest of the server works on before a handler sees them. Answers are JSON,
//! or protobuf when the client prefers it in `Accept` and the kind has a
//! protobuf form (objects, lists, `Status` errors, and watch streams as
//! length-prefixed frames). Custom resources are JSON only, as on a cluster:
//! a protobuf body is 415 and a protobuf-only `Accept` is 406.
//!
//! The conversion between the two forms lives in `bridge` (field by field)
//! and `proto` (envelopes, lists, watch frames); [`to_protobuf`],
//! [`from_protobuf`] and [`watch_frame`] expose it to tests and tools.

mod bridge;
mod proto;

use crate::error::ApiError;
use crate::request::Req;
use crate::resources::registry::ResourceInfo;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Method, header};
use serde_json::Value;

/// The protobuf media type.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Why a body could not be converted between JSON and protobuf.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes do not start with the `k8s\0` magic.
    #[error("the protobuf body does not start with the Kubernetes magic bytes")]
    NoMagic,
    /// The protobuf message is malformed.
    #[error("the protobuf body is not valid: {0}")]
    Protobuf(String),
    /// The JSON form does not fit the kind's type.
    #[error("the object does not fit its kind: {0}")]
    Json(String),
    /// The object carries no `kind`.
    #[error("the object has no kind")]
    NoKind,
    /// The kind has no protobuf form here.
    #[error("no protobuf form for {0}")]
    NotProtobuf(String),
    /// One value cannot be carried in the other form.
    #[error("invalid {what}: {message}")]
    Field {
        /// The type of the value.
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// A built-in object (or list) in the protobuf form the API server sends:
/// `k8s\0`, then a `runtime.Unknown` envelope around the object's message.
///
/// ```
/// let cm = serde_json::json!({
///     "apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "settings"}, "data": {"mode": "fast"},
/// });
/// let bytes = envtest::codec::to_protobuf(&cm)?;
/// assert!(bytes.starts_with(b"k8s\0"));
/// assert_eq!(envtest::codec::from_protobuf(&bytes)?, cm);
/// # Ok::<(), envtest::codec::CodecError>(())
/// ```
pub fn to_protobuf(object: &Value) -> Result<Vec<u8>, CodecError> {
    proto::encode_object(object)
}

/// The JSON form of a protobuf object (or list), `apiVersion` and `kind`
/// taken from its envelope. See [`to_protobuf`] for an example.
pub fn from_protobuf(bytes: &[u8]) -> Result<Value, CodecError> {
    proto::decode_object(bytes)
}

/// One watch event (`{"type": ..., "object": ...}`) as the length-prefixed
/// `WatchEvent` frame of a protobuf watch stream.
///
/// ```
/// let ev = serde_json::json!({"type": "ADDED", "object": {
///     "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}});
/// let frame = envtest::codec::watch_frame(&ev)?;
/// let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
/// assert_eq!(len + 4, frame.len());
/// assert_eq!(envtest::codec::from_watch_frame(&frame[4..])?, ev);
/// # Ok::<(), envtest::codec::CodecError>(())
/// ```
pub fn watch_frame(event: &Value) -> Result<Vec<u8>, CodecError> {
    proto::encode_watch_event(event)
}

/// A `WatchEvent` message (one frame without its length) back to
/// `{"type", "object"}`. See [`watch_frame`] for an example.
pub fn from_watch_frame(message: &[u8]) -> Result<Value, CodecError> {
    proto::decode_watch_event(message)
}

/// The encoding chosen for an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Json,
    Protobuf,
}

/// A media type and its parameters (without `q`).
type MediaRange = (String, Vec<(String, String)>);

/// The media types of an `Accept` header in the client's order of
/// preference (by `q`, then by position), with their parameters.
fn accepted(accept: &str) -> Vec<MediaRange> {
    let mut out: Vec<(f32, usize, MediaRange)> = Vec::new();
    for (i, part) in accept.split(',').enumerate() {
        let mut bits = part.split(';');
        let mt = bits.next().unwrap_or("").trim().to_ascii_lowercase();
        if mt.is_empty() {
            continue;
        }
        let mut q = 1.0;
        let mut params = Vec::new();
        for p in bits {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "q" {
                q = v.parse().unwrap_or(0.0);
            } else {
                params.push((k, v));
            }
        }
        if q > 0.0 {
            out.push((q, i, (mt, params)));
        }
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    out.into_iter().map(|(_, _, m)| m).collect()
}

/// Which encoding answers a request for this resource (406 when the client
/// accepts only protobuf and the resource is a custom one).
pub(crate) fn negotiate(info: &ResourceInfo, accept: &str) -> Result<Answer, ApiError> {
    let types = accepted(accept);
    if types.is_empty() {
        return Ok(Answer::Json);
    }
    for (mt, params) in &types {
        // `as=Table` and friends are other answers; their handlers render JSON.
        let plain = !params.iter().any(|(k, _)| k == "as");
        match mt.as_str() {
            PROTOBUF if plain && !info.custom => return Ok(Answer::Protobuf),
            PROTOBUF => {}
            _ => return Ok(Answer::Json),
        }
    }
    Err(ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: application/json, application/yaml, application/json;stream=watch (got {accept:?}; {} is served in JSON only)",
            info.group_resource()
        ),
    ))
}

/// Which encoding answers a discovery request (`/api`, `/apis`, a group or
/// a group version): protobuf when the client prefers it, JSON otherwise
/// (discovery documents are built-in kinds, so nothing is refused).
pub(crate) fn negotiate_discovery(accept: &str) -> Answer {
    let preferred = accepted(accept).into_iter().next();
    match preferred {
        Some((mt, params)) if mt == PROTOBUF && !params.iter().any(|(k, _)| k == "as") => {
            Answer::Protobuf
        }
        _ => Answer::Json,
    }
}

/// Turn a protobuf or YAML request body into JSON, so every handler reads
/// JSON (415 for protobuf on a custom resource, as a cluster answers).
pub(crate) fn decode_request(info: &ResourceInfo, r: &mut Req) -> Result<(), ApiError> {
    if !matches!(r.method, Method::POST | Method::PUT | Method::DELETE) || r.body.is_empty() {
        return Ok(());
    }
    let mt = crate::resources::validation::media_type(r.content_type());
    let json = match mt.as_str() {
        PROTOBUF if info.custom => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({} is served in JSON only)",
                    info.group_resource()
                ),
            ));
        }
        PROTOBUF => from_protobuf(&r.body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid: {e}")))?,
        "application/yaml" => serde_saphyr::from_slice::<Value>(&r.body).map_err(|e| {
            ApiError::bad_request(format!("the request body is not valid YAML: {e}"))
        })?,
        _ => return Ok(()),
    };
    r.body = Bytes::from(json.to_string());
    r.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(())
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

fn set_type(resp: &mut Response, value: &'static str) {
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
}

/// Re-encode a handler's JSON answer (or error) in the negotiated encoding:
/// objects, lists and `Status` of kinds with a protobuf form, and watch
/// streams event by event. Anything else (tables, kinds without a protobuf
/// form) stays JSON, which clients read by its `Content-Type`.
pub(crate) async fn encode_response(
    answer: Answer,
    watch: bool,
    result: Result<Response, ApiError>,
) -> Response {
    let resp = result.unwrap_or_else(IntoResponse::into_response);
    if answer == Answer::Json || !is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    if watch && parts.status.is_success() {
        let mut pending: Vec<u8> = Vec::new();
        let frames = body.into_data_stream().map(move |chunk| {
            let chunk = chunk?;
            pending.extend_from_slice(&chunk);
            let mut out = Vec::new();
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let frame = serde_json::from_slice::<Value>(&line)
                    .map_err(|e| CodecError::Json(e.to_string()))
                    .and_then(|ev| watch_frame(&ev));
                match frame {
                    Ok(f) => out.extend_from_slice(&f),
                    Err(e) => tracing::warn!("watch event not sent as protobuf: {e}"),
                }
            }
            Ok::<_, axum::Error>(Bytes::from(out))
        });
        let mut resp = Response::from_parts(parts, Body::from_stream(frames));
        set_type(
            &mut resp,
            "application/vnd.kubernetes.protobuf;stream=watch",
        );
        return resp;
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::new(500, "InternalError", "the answer could not be read").into_response();
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(|v| {
            let kind = v["kind"].as_str().unwrap_or("");
            let av = match v["apiVersion"].as_str() {
                None if kind == "APIVersions" => "v1",
                av => av.unwrap_or(""),
            };
            proto::has_protobuf(av, kind)
        })
        .and_then(|v| {
            to_protobuf(&v)
                .inspect_err(|e| tracing::warn!("answer not sent as protobuf: {e}"))
                .ok()
        });
    match encoded {
        Some(pb) => {
            parts.headers.remove(header::CONTENT_LENGTH);
            let mut resp = Response::from_parts(parts, Body::from(pb));
            set_type(&mut resp, PROTOBUF);
            resp
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod tests;
