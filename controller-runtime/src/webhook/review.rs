//! Serving one review: read the body (content type, size cap, time limit), check it
//! is the review this path takes (`admission.k8s.io/v1` AdmissionReview or
//! `apiextensions.k8s.io/v1` ConversionReview), run the handler catching a
//! panic, write the answer, count it and trace it.
//!
//! The body is read once: the review's envelope is checked and its request
//! decoded in one pass over the bytes, an admission request's objects left
//! as JSON text for the handler to decode as its type; the answer is
//! written straight from the response, without an intermediate
//! `serde_json::Value`. An admission handler runs in the connection's own
//! task (a panic is caught there), so a review costs no task hand-off.
//!
//! Part of the manager layer's webhook server ([`super::WebhookServer`]
//! routes every request here).

use std::collections::HashMap;
use std::sync::Arc;

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::FutureExt as _;
use kube_client::core::Status;
use kube_client::core::admission::AdmissionResponse;
use kube_client::core::conversion::{ConversionRequest, ConversionResponse};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tracing::Instrument;

use super::admission::{AdmissionHandler, AdmissionInput};
use super::conversion::ConversionHandler;
use super::metrics::WebhookMetrics;

/// Where conversion reviews are served.
pub const CONVERT_PATH: &str = "/convert";

pub(crate) struct Routes {
    pub(crate) max_body: usize,
    pub(crate) body_timeout: std::time::Duration,
    pub(crate) admission: HashMap<String, Arc<dyn AdmissionHandler>>,
    pub(crate) conversions: Vec<Arc<dyn ConversionHandler>>,
    pub(crate) metrics: Option<WebhookMetrics>,
}

fn plain(code: StatusCode, message: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

fn json_response<T: Serialize>(body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response(),
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding the response: {e}"),
        ),
    }
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

pub(crate) async fn route(State(routes): State<Arc<Routes>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let (headers, path) = (&parts.headers, parts.uri.path());
    let admission = routes.admission.get(path).cloned();
    let is_convert = path == CONVERT_PATH && !routes.conversions.is_empty();
    if admission.is_none() && !is_convert {
        return plain(
            StatusCode::NOT_FOUND,
            format!("no webhook is served at {path}"),
        );
    }
    let in_flight = routes.metrics.as_ref().map(|m| m.start(path));
    let span = tracing::info_span!(
        "webhook_review",
        webhook = %path,
        uid = tracing::field::Empty,
        kind = tracing::field::Empty,
        operation = tracing::field::Empty,
        namespace = tracing::field::Empty,
        name = tracing::field::Empty,
        allowed = tracing::field::Empty,
    );
    let response = async {
        let bytes = match read_body(headers, body, routes.max_body, routes.body_timeout).await {
            Ok(b) => b,
            Err(r) => return r,
        };
        match admission {
            Some(handler) => admit(handler, &bytes, routes.metrics.as_ref()).await,
            None => convert(&routes, &bytes).await,
        }
    }
    .instrument(span)
    .await;
    if let Some(f) = in_flight {
        f.finish(response.status().as_u16());
    }
    response
}

async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    timeout: std::time::Duration,
) -> Result<Bytes, Response> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type.split(';').next().map(str::trim) != Some("application/json") {
        return Err(plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("content type {content_type:?}: a review must be application/json"),
        ));
    }
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, max)).await {
        Ok(read) => read.map_err(|e| {
            let over = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if over {
                plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("reading the review body (limit {max} bytes): {e}"),
                )
            } else {
                // Cut short, or malformed chunks: the client's fault.
                plain(
                    StatusCode::BAD_REQUEST,
                    format!("reading the review body: {e}"),
                )
            }
        }),
        Err(_) => Err(plain(
            StatusCode::REQUEST_TIMEOUT,
            format!("the review body did not arrive within {timeout:?}"),
        )),
    }
}

/// A string field read leniently: any other JSON value is `None`, as a
/// missing one is.
fn lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    let raw = <&RawValue>::deserialize(d)?;
    Ok(serde_json::from_str::<Cow<'de, str>>(raw.get()).ok())
}

/// A review as it arrives: its type, and its request left as JSON text
/// (borrowed from the body) until the type is known to be right.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, rename = "apiVersion", deserialize_with = "lenient")]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "lenient")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    request: Option<&'a RawValue>,
}

/// Reads `bytes` as a review of `api_version`/`kind` and decodes its
/// request (`None` when it has none); a refusal is the status and message
/// to answer.
fn parse<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    api_version: &str,
    kind: &str,
) -> Result<Option<T>, (StatusCode, String)> {
    let envelope: Envelope<'a> = serde_json::from_slice(bytes).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            format!("malformed JSON in the review: {e}"),
        )
    })?;
    let got_version = envelope.api_version.as_deref().unwrap_or("");
    let got_kind = envelope.kind.as_deref().unwrap_or("");
    if got_version != api_version || got_kind != kind {
        return Err((
            StatusCode::BAD_REQUEST,
            format!("expected a {api_version} {kind}, got {got_version:?} {got_kind:?}"),
        ));
    }
    envelope
        .request
        .map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("reading the {kind}: {e}")))
}

async fn admit(
    handler: Arc<dyn AdmissionHandler>,
    bytes: &[u8],
    metrics: Option<&WebhookMetrics>,
) -> Response {
    let req: AdmissionInput<'_> = match parse(bytes, "admission.k8s.io/v1", "AdmissionReview") {
        Ok(Some(req)) => req,
        Ok(None) => {
            return plain(
                StatusCode::BAD_REQUEST,
                "the AdmissionReview has no request".into(),
            );
        }
        Err((code, message)) => return plain(code, message),
    };
    let span = tracing::Span::current();
    span.record("uid", req.uid.as_str());
    span.record("kind", req.kind.kind.as_str());
    span.record("operation", tracing::field::debug(&req.operation));
    span.record("name", req.name.as_str());
    if let Some(ns) = &req.namespace {
        span.record("namespace", ns.as_str());
    }
    let fallback = req.allowed();
    // A panic in the handler unwinds to here, in this task.
    let resp = match AssertUnwindSafe(handler.review(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            let message = panic_message(&*panic);
            tracing::error!(panic = %message, "admission webhook handler panicked");
            if let Some(m) = metrics {
                m.panicked();
            }
            let mut resp = fallback.deny(format!("the admission webhook panicked: {message}"));
            resp.result.code = 500;
            resp.result.reason = "InternalError".into();
            resp
        }
    };
    span.record("allowed", resp.allowed);
    json_response(&admission_review(resp))
}

/// An answer in its review: `{"apiVersion", "kind", "response"}`.
#[derive(Serialize)]
struct ReviewOut<R> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    response: R,
}

/// An admission response with its patch as the API server's Go code
/// writes a `[]byte`: a base64 string.
#[derive(Serialize)]
struct AdmissionOut {
    #[serde(flatten)]
    response: AdmissionResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
}

/// The review sent back: `admission.k8s.io/v1`, with the patch base64.
fn admission_review(mut response: AdmissionResponse) -> ReviewOut<AdmissionOut> {
    use base64::Engine as _;
    let patch = response
        .patch
        .take()
        .map(|p| base64::engine::general_purpose::STANDARD.encode(p));
    ReviewOut {
        api_version: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: AdmissionOut { response, patch },
    }
}

async fn convert(routes: &Arc<Routes>, bytes: &[u8]) -> Response {
    let parsed = parse::<ConversionRequest>(bytes, "apiextensions.k8s.io/v1", "ConversionReview");
    let req = match parsed {
        Ok(Some(req)) => req,
        Ok(None) => {
            return plain(
                StatusCode::BAD_REQUEST,
                "the ConversionReview has no request".into(),
            );
        }
        Err((code, message)) => return plain(code, message),
    };
    let span = tracing::Span::current();
    span.record("uid", req.uid.as_str());
    let group = req
        .desired_api_version
        .rsplit_once('/')
        .map_or("", |(g, _)| g)
        .to_owned();
    let kind = req
        .objects
        .first()
        .and_then(|o| o.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    span.record("kind", kind.as_str());
    if req.objects.is_empty() {
        return json_response(&conversion_review(
            ConversionResponse::for_request(req).success(Vec::new()),
        ));
    }
    let Some(handler) = routes
        .conversions
        .iter()
        .find(|c| c.group_kind() == (group.clone(), kind.clone()))
        .cloned()
    else {
        let failure = Status::failure(
            &format!("no conversion is registered for {group}/{kind}"),
            "NotFound",
        );
        return json_response(&conversion_review(
            ConversionResponse::for_request(req).failure(failure),
        ));
    };
    let fallback = ConversionResponse::for_request(req.clone());
    // Conversion is plain CPU work: run it off the reactor, and a panic
    // there is a JoinError here.
    let resp = match tokio::task::spawn_blocking(move || handler.review(req)).await {
        Ok(resp) => resp,
        Err(e) => {
            let message = if e.is_panic() {
                panic_message(&*e.into_panic())
            } else {
                e.to_string()
            };
            tracing::error!(panic = %message, "conversion webhook panicked");
            if let Some(m) = &routes.metrics {
                m.panicked();
            }
            fallback.failure(Status::failure(
                &format!("the conversion webhook panicked: {message}"),
                "InternalError",
            ))
        }
    };
    json_response(&conversion_review(resp))
}

/// The review sent back: `apiextensions.k8s.io/v1`.
fn conversion_review(response: ConversionResponse) -> ReviewOut<ConversionResponse> {
    ReviewOut {
        api_version: "apiextensions.k8s.io/v1",
        kind: "ConversionReview",
        response,
    }
}
