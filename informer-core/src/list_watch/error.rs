//! The error of a LIST or WATCH call, keeping the server's `Status`.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use kube_client::client::Body;
use kube_core::Status;

use super::limits::{CappedError, OversizedPart, collect_capped};

/// The most bytes of an error answer that are read (a `Status` is a few
/// hundred); a longer one is reported by its code alone.
const MAX_ERROR_BODY_BYTES: usize = 1 << 20;

/// Why a LIST or WATCH call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListWatchError {
    /// The server answered with a failure `Status` (an HTTP error status, or
    /// an `ERROR` event inside a watch stream).
    #[error(
        "the API server answered {code} {reason}: {message}",
        code = .status.code,
        reason = .status.reason,
        message = .status.message
    )]
    Api {
        /// The server's `Status`, reason and code preserved.
        status: Box<Status>,
        /// The `Retry-After` header (or `details.retryAfterSeconds`), if given.
        retry_after: Option<Duration>,
    },
    /// The request did not reach the server or its answer did not arrive.
    #[error("request to the API server failed: {0}")]
    Transport(#[source] kube_client::Error),
    /// The request could not be built (for example a selector with
    /// characters a URL cannot carry).
    #[error("could not build the request for {url}: {source}")]
    BuildRequest {
        /// The URL that was being built.
        url: String,
        /// What the HTTP builder said.
        #[source]
        source: http::Error,
    },
    /// A LIST answer was not a list.
    #[error("could not decode the list answer: {0}")]
    DecodeList(#[source] serde_json::Error),
    /// Reading an open watch stream failed (the connection broke).
    #[error("reading the watch stream failed: {0}")]
    Stream(#[source] kube_client::Error),
    /// An answer went over the lister-watcher's
    /// [`ReadLimits`](super::ReadLimits): the call ended there, without
    /// holding more of it.
    #[error(
        "{part} from the API server is larger than the limit of {limit} bytes \
         (raise it with ReadLimits if such objects are expected)"
    )]
    Oversized {
        /// What went over the cap.
        part: OversizedPart,
        /// The cap, in bytes.
        limit: usize,
    },
}

/// The `Status` cause type the API server uses for a resource version that
/// is newer than anything it has seen.
const CAUSE_RESOURCE_VERSION_TOO_LARGE: &str = "ResourceVersionTooLarge";

impl ListWatchError {
    /// An API error with the given code, reason and message (what servers
    /// and test doubles send).
    pub fn api(code: u16, reason: &str, message: &str) -> Self {
        let status = Status::failure(message, reason).with_code(code);
        Self::Api {
            status: Box::new(status),
            retry_after: None,
        }
    }

    /// The server's `Status`, if the server answered.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::Api { status, .. } => Some(status),
            _ => None,
        }
    }

    /// The HTTP status code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        self.status().map(|s| s.code)
    }

    /// The `Status` reason (`Expired`, `TooManyRequests`, ...), if any.
    pub fn reason(&self) -> Option<&str> {
        self.status()
            .map(|s| s.reason.as_str())
            .filter(|r| !r.is_empty())
    }

    /// How long the server asked us to wait before retrying.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api {
                retry_after: Some(d),
                ..
            } => Some(*d),
            Self::Api { status, .. } => status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(u64::from(s))),
            _ => None,
        }
    }

    /// 410 Gone / reason `Expired` or `Gone`: the requested resource version
    /// (or continue token) is older than the server's history.
    pub fn is_expired(&self) -> bool {
        self.code() == Some(410) || matches!(self.reason(), Some("Expired" | "Gone"))
    }

    /// The requested resource version is newer than the server has seen
    /// (after talking to a different, more current, server).
    pub fn is_too_large_resource_version(&self) -> bool {
        let Some(status) = self.status() else {
            return false;
        };
        let by_cause = status.details.as_ref().is_some_and(|d| {
            d.causes
                .iter()
                .any(|c| c.reason == CAUSE_RESOURCE_VERSION_TOO_LARGE)
        });
        by_cause
            || status
                .message
                .to_ascii_lowercase()
                .contains("too large resource version")
    }

    /// 429 Too Many Requests.
    pub fn is_too_many_requests(&self) -> bool {
        self.code() == Some(429) || self.reason() == Some("TooManyRequests")
    }

    /// What went over a [`ReadLimits`](super::ReadLimits) cap, if that is
    /// what ended the call.
    pub fn oversized(&self) -> Option<OversizedPart> {
        match self {
            Self::Oversized { part, .. } => Some(*part),
            _ => None,
        }
    }

    /// The request never got an answer from the server (connection refused,
    /// reset, timed out).
    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Transport(_) | Self::Stream(_))
    }
}

/// Turns an error answer into [`ListWatchError::Api`], keeping its `Status`
/// (or making one from the code and text when the body is not a `Status`).
pub(super) async fn error_from_response(response: Response<Body>) -> ListWatchError {
    let code = response.status();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = match collect_capped(response, MAX_ERROR_BODY_BYTES).await {
        Ok(body) => body,
        Err(CappedError::Read(e)) => return ListWatchError::Stream(e),
        Err(CappedError::Oversized) => {
            let text = format!("an error answer over {MAX_ERROR_BODY_BYTES} bytes, not read");
            Bytes::from(text)
        }
    };
    let decoded = if body.starts_with(informer_codec::MAGIC) {
        informer_codec::Envelope::read(&body)
            .and_then(super::protobuf::status_of)
            .ok()
    } else {
        serde_json::from_slice::<Status>(&body).ok()
    };
    let status = match decoded {
        Some(mut status) if status.is_failure() || status.code != 0 => {
            if status.code == 0 {
                status.code = code.as_u16();
            }
            status
        }
        _ => {
            let text = String::from_utf8_lossy(&body);
            let reason = reason_for_code(code);
            Status::failure(text.trim(), reason).with_code(code.as_u16())
        }
    };
    ListWatchError::Api {
        status: Box::new(status),
        retry_after,
    }
}

fn reason_for_code(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_expired_by_code_and_reason() {
        assert!(ListWatchError::api(410, "Gone", "too old").is_expired());
        assert!(ListWatchError::api(0, "Expired", "too old").is_expired());
        assert!(!ListWatchError::api(500, "InternalError", "boom").is_expired());
    }

    #[test]
    fn classifies_too_large_resource_version() {
        let err = ListWatchError::api(504, "Timeout", "Too large resource version: 12, current: 3");
        assert!(err.is_too_large_resource_version());
        let status: Status = serde_json::from_value(serde_json::json!({
            "code": 504, "reason": "Timeout", "message": "timeout",
            "details": {"causes": [{"reason": CAUSE_RESOURCE_VERSION_TOO_LARGE}]}
        }))
        .unwrap();
        let err = ListWatchError::Api {
            status: Box::new(status),
            retry_after: None,
        };
        assert!(err.is_too_large_resource_version());
        assert!(!ListWatchError::api(504, "Timeout", "slow").is_too_large_resource_version());
    }

    #[test]
    fn retry_after_from_header_or_details() {
        let err = ListWatchError::Api {
            status: Box::new(Status::failure("slow down", "TooManyRequests").with_code(429)),
            retry_after: Some(Duration::from_secs(3)),
        };
        assert!(err.is_too_many_requests());
        assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
        let status: Status = serde_json::from_value(serde_json::json!({
            "code": 429, "reason": "TooManyRequests", "message": "slow down",
            "details": {"retryAfterSeconds": 2}
        }))
        .unwrap();
        let err = ListWatchError::Api {
            status: Box::new(status),
            retry_after: None,
        };
        assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn message_includes_code_and_reason() {
        let msg = ListWatchError::api(410, "Expired", "rv 3 is too old").to_string();
        assert!(msg.contains("410") && msg.contains("Expired") && msg.contains("rv 3 is too old"));
    }
}
