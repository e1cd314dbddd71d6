//! Content negotiation, in one place: which encoding a request body is in
//! and which one the answer goes out in. Request bodies may be JSON, YAML
//! (`application/yaml`) or, for built-in kinds, protobuf
//! (`application/vnd.kubernetes.protobuf`); they are turned into the JSON the
//! rest of the server works on before a handler sees them. Answers are JSON,
//! or protobuf when the client prefers it in `Accept` and the kind has a
//! protobuf form (objects, lists, `Status` errors, and watch streams as
//! length-prefixed frames). Custom resources are JSON only, as on a cluster:
//! a protobuf body is 415 and a protobuf-only `Accept` is 406.
//! `as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1` (or `v1beta1`)
//! asks for metadata-only answers (see `partial`), in JSON or protobuf for
//! every kind, custom ones included; `Accept` ranges are tried in the
//! client's order and one this server cannot answer is passed over.
//!
//! Lists and watches of whole built-in objects in protobuf are built from
//! each stored object's protobuf message, encoded once (see `cached`);
//! every other protobuf answer is its JSON answer converted.
//!
//! The conversion between the two forms lives in the `informer-codec`
//! crate (shared with informer-core's lister-watcher); [`to_protobuf`],
//! [`from_protobuf`] and [`watch_frame`] are re-exported from it for tests
//! and tools.

mod cached;
mod partial;

use crate::error::ApiError;
use crate::request::Req;
use crate::resources::registry::ResourceInfo;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
pub(crate) use cached::{PROTOBUF_WATCH, line_as_frame, wants_protobuf};
pub(crate) use cached::{list as protobuf_list, watch_event as protobuf_watch_event};
use futures::StreamExt;
use http::{HeaderValue, Method, header};
pub use informer_codec::{
    CodecError, PROTOBUF, from_protobuf, from_watch_frame, to_protobuf, watch_frame,
};
use partial::{Conversion, Partial, Shaped};
use serde_json::Value;

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

/// How an answer goes out: its encoding, and the metadata-only shape the
/// client asked for, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// JSON or protobuf.
    pub(crate) encoding: Answer,
    /// `as=PartialObjectMetadata(List)`: the answer is reshaped (see `partial`).
    pub(crate) metadata: Option<Partial>,
    /// The resource is a custom one (named so in 406 messages).
    pub(crate) custom: bool,
}

impl From<Answer> for Negotiated {
    fn from(encoding: Answer) -> Self {
        Negotiated {
            encoding,
            metadata: None,
            custom: false,
        }
    }
}

/// Which encoding (and shape) answers a request for this resource, taking
/// the `Accept` media ranges in the client's order as kube-apiserver does:
/// a range whose `as=`/`g=`/`v=` this server cannot convert to, or a plain
/// protobuf range for a custom resource, is passed over for the next one;
/// 406 when none is left. `as=PartialObjectMetadata(List)` may be answered
/// in protobuf for custom resources too, as on a cluster.
pub(crate) fn negotiate(info: &ResourceInfo, accept: &str) -> Result<Negotiated, ApiError> {
    let types = accepted(accept);
    let plain = |encoding| Negotiated {
        encoding,
        metadata: None,
        custom: info.custom,
    };
    if types.is_empty() {
        return Ok(plain(Answer::Json));
    }
    for (mt, params) in &types {
        let conversion = partial::conversion(params);
        let encoding = match mt.as_str() {
            PROTOBUF => Answer::Protobuf,
            "application/json" | "application/yaml" | "application/*" | "*/*" => Answer::Json,
            // Other media types keep the leniency they always had: JSON.
            _ if conversion == Conversion::None => return Ok(plain(Answer::Json)),
            _ => continue,
        };
        match conversion {
            Conversion::None if encoding == Answer::Protobuf && info.custom => {}
            Conversion::None => return Ok(plain(encoding)),
            // Tables are rendered by the handlers, in JSON.
            Conversion::Table if encoding == Answer::Json => return Ok(plain(Answer::Json)),
            Conversion::Table | Conversion::Unsupported => {}
            Conversion::Metadata(p) => {
                return Ok(Negotiated {
                    encoding,
                    metadata: Some(p),
                    custom: info.custom,
                });
            }
        }
    }
    let only = if info.custom {
        format!("; {} is served in JSON only", info.group_resource())
    } else {
        String::new()
    };
    Err(ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {accept:?}{only})"
        ),
    ))
}

/// A LIST answer in the `PartialObjectMetadataList` shape, when that is
/// what the request negotiates: built from the objects' metadata alone, so
/// a metadata-only list costs less than a full one. `meta` is the list's
/// metadata (`resourceVersion`, `continue`, `remainingItemCount`).
pub(crate) fn metadata_list(
    info: &ResourceInfo,
    accept: &str,
    objects: &[&serde_json::Value],
    meta: &Value,
) -> Option<Response> {
    let n = negotiate(info, accept).ok()?;
    let want = n.metadata.filter(|p| p.list)?;
    let av = want.api_version;
    let (body, media_type) = match n.encoding {
        Answer::Protobuf => {
            let meta = partial::list_meta(meta, av);
            match informer_codec::encode_partial_list(objects, &meta, av) {
                Ok(pb) => (pb, PROTOBUF),
                Err(e) => {
                    tracing::warn!("metadata list not built as protobuf: {e}");
                    return None;
                }
            }
        }
        Answer::Json => (partial::list_of(objects, meta, av), "application/json"),
    };
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    resp.extensions_mut().insert(Shaped);
    Some(resp)
}

/// A JSON-only server's view of a request (see
/// `TestEnvBuilder::json_only`): protobuf ranges are dropped from `Accept`
/// (406 when only protobuf was acceptable) and a protobuf body is 415.
pub(crate) fn json_only(headers: &mut http::HeaderMap) -> Result<(), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if crate::resources::validation::media_type(content_type) == PROTOBUF {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        ));
    }
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let ranges: Vec<&str> = accept.split(',').collect();
    let kept: Vec<&str> = ranges
        .iter()
        .copied()
        .filter(|r| {
            let mt = r.split(';').next().unwrap_or("").trim();
            !mt.eq_ignore_ascii_case(PROTOBUF)
        })
        .collect();
    if kept.len() == ranges.len() {
        return Ok(());
    }
    if kept.iter().all(|r| r.trim().is_empty()) {
        return Err(ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml (got {accept:?})"
            ),
        ));
    }
    let kept = kept.join(",");
    if let Ok(v) = HeaderValue::from_str(&kept) {
        headers.insert(header::ACCEPT, v);
    }
    Ok(())
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

/// Re-encode a handler's JSON answer (or error) in the negotiated encoding
/// and shape: metadata-only answers are reshaped first (see `partial`);
/// then objects, lists and `Status` of kinds with a protobuf form, and
/// watch streams event by event, go out in protobuf when it was chosen.
/// Anything else (tables, kinds without a protobuf form) stays JSON, which
/// clients read by its `Content-Type`.
pub(crate) async fn encode_response(
    answer: impl Into<Negotiated>,
    watch: bool,
    result: Result<Response, ApiError>,
) -> Response {
    let answer: Negotiated = answer.into();
    let resp = result.unwrap_or_else(IntoResponse::into_response);
    let reshape = answer
        .metadata
        .filter(|_| resp.status().is_success() && resp.extensions().get::<Shaped>().is_none());
    if (answer.encoding == Answer::Json && reshape.is_none()) || !is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    if watch && parts.status.is_success() {
        return watch_stream(answer.encoding, reshape, parts, body);
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::new(500, "InternalError", "the answer could not be read").into_response();
    };
    let mut value = serde_json::from_slice::<Value>(&bytes).ok();
    if let (Some(want), Some(v)) = (reshape, value.as_mut()) {
        match partial::reshape(v, want, answer.custom) {
            Ok(shaped) => *v = shaped,
            Err(e) => return encode_error(answer.encoding, e),
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    let encoded = match answer.encoding {
        Answer::Protobuf => value
            .as_ref()
            .filter(|v| {
                let kind = v["kind"].as_str().unwrap_or("");
                let av = match v["apiVersion"].as_str() {
                    None if kind == "APIVersions" => "v1",
                    av => av.unwrap_or(""),
                };
                informer_codec::has_protobuf(av, kind)
            })
            .and_then(|v| {
                to_protobuf(v)
                    .inspect_err(|e| tracing::warn!("answer not sent as protobuf: {e}"))
                    .ok()
            }),
        Answer::Json => None,
    };
    match (encoded, value) {
        (Some(pb), _) => {
            let mut resp = Response::from_parts(parts, Body::from(pb));
            set_type(&mut resp, PROTOBUF);
            resp
        }
        (None, Some(v)) if reshape.is_some() => {
            Response::from_parts(parts, Body::from(v.to_string()))
        }
        (None, _) => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// An error raised while shaping an answer, in the negotiated encoding.
fn encode_error(encoding: Answer, e: ApiError) -> Response {
    let pb = match encoding {
        Answer::Protobuf => to_protobuf(&e.to_status()).ok(),
        Answer::Json => None,
    };
    let resp = e.into_response();
    match pb {
        Some(pb) => {
            let (mut parts, _) = resp.into_parts();
            parts.headers.remove(header::CONTENT_LENGTH);
            let mut resp = Response::from_parts(parts, Body::from(pb));
            set_type(&mut resp, PROTOBUF);
            resp
        }
        None => resp,
    }
}

/// A watch stream re-encoded event by event: each newline-delimited JSON
/// event is reshaped (metadata-only) and written as a JSON line or a
/// protobuf frame. A line that is not JSON passes through a JSON stream
/// unchanged and is dropped (with a warning) from a protobuf one.
fn watch_stream(
    encoding: Answer,
    reshape: Option<Partial>,
    parts: http::response::Parts,
    body: Body,
) -> Response {
    let mut pending: Vec<u8> = Vec::new();
    let frames = body.into_data_stream().map(move |chunk| {
        let chunk = chunk?;
        pending.extend_from_slice(&chunk);
        let mut out = Vec::new();
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let event = serde_json::from_slice::<Value>(&line)
                .map(|ev| match reshape {
                    Some(p) => partial::event(ev, p.api_version),
                    None => ev,
                })
                .map_err(|e| CodecError::Json(e.to_string()));
            match (encoding, event) {
                (Answer::Json, Ok(ev)) => {
                    out.extend_from_slice(ev.to_string().as_bytes());
                    out.push(b'\n');
                }
                (Answer::Json, Err(_)) => out.extend_from_slice(&line),
                (Answer::Protobuf, ev) => match ev.and_then(|ev| watch_frame(&ev)) {
                    Ok(f) => out.extend_from_slice(&f),
                    Err(e) => tracing::warn!("watch event not sent as protobuf: {e}"),
                },
            }
        }
        Ok::<_, axum::Error>(Bytes::from(out))
    });
    let mut resp = Response::from_parts(parts, Body::from_stream(frames));
    if encoding == Answer::Protobuf {
        set_type(&mut resp, PROTOBUF_WATCH);
    }
    resp
}

#[cfg(test)]
mod tests;
