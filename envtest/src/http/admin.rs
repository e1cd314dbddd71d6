//! Test-only administration over HTTP: endpoints that let a client in
//! another process provoke what a real cluster does on its own schedule.
//!
//! They exist for benchmarks and out-of-process tests, which cannot reach
//! [`crate::Faults`] in memory. They are off unless the server was started
//! with [`crate::TestEnvBuilder::admin_endpoints`] (`envtest-server --admin`);
//! a server without them answers 404 there, as a cluster does.
//!
//! - `POST /envtest/v1/compact`: forget all watch history, so resuming a
//!   watch from any earlier resourceVersion gets 410 Gone and continue tokens
//!   issued before expire ([`crate::Faults::compact`]).
//! - `POST /envtest/v1/drop-watches`: close every watch open now
//!   ([`crate::Faults::drop_watches`]).
//!
//! Both answer 200 with a `Status` of `Success`; another method is 405.

use crate::error::ApiError;
use crate::http::state::Server;
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode, header};

/// Prefix of every admin path.
pub(crate) const PREFIX: &str = "/envtest/v1/";

/// One admin action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Compact,
    DropWatches,
}

impl Action {
    fn from_path(path: &str) -> Option<Self> {
        match path.strip_prefix(PREFIX)?.trim_end_matches('/') {
            "compact" => Some(Action::Compact),
            "drop-watches" => Some(Action::DropWatches),
            _ => None,
        }
    }
}

/// Answer `method path` when it is an admin request and the server has the
/// endpoints on; `None` leaves the request to the API routes (which answer
/// 404 for these paths, as a cluster does).
pub(crate) fn handle(srv: &Server, method: &Method, path: &str) -> Option<Response> {
    if !srv.config.admin || !path.starts_with(PREFIX) {
        return None;
    }
    let Some(action) = Action::from_path(path) else {
        return Some(ApiError::no_route(path).into_response());
    };
    if method != Method::POST {
        return Some(ApiError::method_not_allowed(method.as_str(), path).into_response());
    }
    match action {
        Action::Compact => srv.faults.compact(),
        Action::DropWatches => srv.faults.drop_watches(),
    }
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 200,
    });
    Some(
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_action() {
        assert_eq!(
            Action::from_path("/envtest/v1/compact"),
            Some(Action::Compact)
        );
        assert_eq!(
            Action::from_path("/envtest/v1/drop-watches/"),
            Some(Action::DropWatches)
        );
        assert_eq!(Action::from_path("/envtest/v1/other"), None);
        assert_eq!(Action::from_path("/api/v1/compact"), None);
    }
}
