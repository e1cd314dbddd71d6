//! Errors the server answers with: every failed request gets a `metav1.Status`
//! body carrying an HTTP code, a machine-readable reason and a message a
//! person can act on, exactly as a real API server does. [`ApiError`] is that
//! answer; [`Error`] is what the library's own entry points return.

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// An error from starting or talking to a [`crate::TestEnv`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The loopback listener could not be bound.
    #[error("could not bind the envtest listener on {addr}: {source}")]
    Bind {
        /// The address that was requested.
        addr: String,
        /// The I/O error from the operating system.
        source: std::io::Error,
    },
    /// The generated kubeconfig or client configuration was rejected.
    #[error("could not build a kube client for {url}: {message}")]
    Client {
        /// The server URL.
        url: String,
        /// What kube-client said.
        message: String,
    },
    /// Setting up test fixtures through the API (such as a role and its
    /// binding) failed.
    #[error("could not {what}: {source}")]
    Setup {
        /// What was being set up.
        what: String,
        /// The client error, with the API `Status` when there was one.
        source: kube_client::Error,
    },
    /// Writing a file (such as a kubeconfig) failed.
    #[error("could not write {path}: {source}")]
    Io {
        /// The file path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TLS certificates could not be generated or loaded
    /// ([`crate::TestEnvBuilder::tls`]).
    #[error("could not set up TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// A feature only the in-process server has was asked of an existing
    /// cluster (`USE_EXISTING_CLUSTER=true`); see
    /// [`crate::skip_on_existing_cluster`].
    #[error(
        "`{feature}` needs the in-process envtest server and is not available with \
         USE_EXISTING_CLUSTER=true (skip the test with envtest::skip_on_existing_cluster)"
    )]
    EnvtestOnly {
        /// The method or setting, such as `faults` or `tls`.
        feature: String,
    },
    /// Using an existing cluster (`USE_EXISTING_CLUSTER=true`) failed:
    /// reading the kubeconfig, installing a CRD, creating or deleting the
    /// test's namespace.
    #[error("existing cluster: could not {what}: {message}")]
    ExistingCluster {
        /// What was being done.
        what: String,
        /// What went wrong.
        message: String,
    },
}

/// One cause inside a 422 Invalid answer: which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable cause type such as `FieldValueInvalid`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// JSON path of the offending field, such as `metadata.name`.
    pub field: String,
}

/// An error answer from the API server, rendered as a `metav1.Status`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Status reason such as `NotFound` or `Conflict`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Extra details (`name`, `group`, `kind`), when known.
    pub details: Option<Box<Details>>,
    /// Field causes, for 422 Invalid.
    pub causes: Vec<Cause>,
    /// Seconds a client should wait before retrying (429, 504).
    pub retry_after_seconds: Option<u64>,
}

/// The `details` block of a Status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// Object name.
    pub name: String,
    /// API group (empty for core).
    pub group: String,
    /// Resource plural (Kubernetes calls this `kind` in details).
    pub kind: String,
}

impl ApiError {
    /// A bare error with a code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for a named object of a resource.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(404, "NotFound", format!("{gr} \"{name}\" not found"))
            .with_details(group, plural, name)
    }

    /// 404 NotFound for a path that names no resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {what}"),
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(
            409,
            "AlreadyExists",
            format!("{gr} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {gr} \"{name}\": {why}"),
        )
        .with_details(group, plural, name)
    }

    /// 410 Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 422 Invalid with one field cause.
    pub fn invalid(kind: &str, name: &str, field: &str, cause_reason: &str, message: &str) -> Self {
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {message}"),
        );
        e.causes.push(Cause {
            reason: cause_reason.to_string(),
            message: message.to_string(),
            field: field.to_string(),
        });
        e.details = Some(Box::new(Details {
            name: name.to_string(),
            group: String::new(),
            kind: kind.to_string(),
        }));
        e
    }

    /// 422 Invalid listing several field causes (at least one).
    pub fn invalid_causes(kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = match summary.as_slice() {
            [one] => format!("{kind} \"{name}\" is invalid: {one}"),
            many => format!("{kind} \"{name}\" is invalid: [{}]", many.join(", ")),
        };
        let mut e = Self::new(422, "Invalid", message);
        e.causes = causes;
        e.details = Some(Box::new(Details {
            name: name.to_string(),
            group: String::new(),
            kind: kind.to_string(),
        }));
        e
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 504 Timeout for a resource version the server has not reached yet.
    pub fn too_large_rv(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        );
        e.causes.push(Cause {
            reason: "ResourceVersionTooLarge".into(),
            message: "Too large resource version".into(),
            field: String::new(),
        });
        e.retry_after_seconds = Some(1);
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// Attach the details block.
    #[must_use]
    pub fn with_details(mut self, group: &str, plural: &str, name: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.into(),
            group: group.into(),
            kind: plural.into(),
        }));
        self
    }

    /// The Status object as JSON.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(d) = &self.details {
            if !d.name.is_empty() {
                details.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                details.insert("group".into(), json!(d.group));
            }
            if !d.kind.is_empty() {
                details.insert("kind".into(), json!(d.kind));
            }
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(s) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Bytes::from(self.to_status().to_string());
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(s) = self.retry_after_seconds
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_body_carries_code_reason_and_causes() {
        let e = ApiError::invalid(
            "ConfigMap",
            "Bad",
            "metadata.name",
            "FieldValueInvalid",
            "must be lowercase",
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    }

    #[test]
    fn too_large_rv_is_a_timeout_with_retry_after() {
        let s = ApiError::too_large_rv(10, 5).to_status();
        assert_eq!(s["code"], 504);
        assert_eq!(s["details"]["retryAfterSeconds"], 1);
    }
}
