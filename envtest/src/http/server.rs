//! The HTTP front of the server: the axum router, the fault/request-log
//! middleware, request body limits, a per-request deadline, and URL parsing into a resource target
//! (`/api/v1/...`, `/apis/{group}/{version}/...`, namespaced or not, with an
//! optional name and subresource) that is dispatched to the read, write,
//! delete and watch handlers.

use crate::error::ApiError;
use crate::http::authz::IMPERSONATE_USER;
use crate::http::faults::RequestRecord;
use crate::http::state::{Config, Server, Target};
use crate::http::{auth_review, crud, discovery, openapi, watch};
use crate::request::{Query, Req};
use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, Method, header};
use std::sync::Arc;
use std::time::Duration;

/// Build the router for a server.
pub fn router(srv: Arc<Server>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(middleware::from_fn_with_state(srv.clone(), fault_layer))
        .with_state(srv)
}

async fn fault_layer(State(srv): State<Arc<Server>>, mut req: Request, next: Next) -> Response {
    let refused = if srv.config.json_only {
        crate::codec::json_only(req.headers_mut()).err()
    } else {
        None
    };
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let token_user = srv.authz.token_user(req.headers());
    let impersonating = req.headers().contains_key(IMPERSONATE_USER);
    let denied = match (token_user, srv.authz.identify(req.headers())) {
        // Only the admin may impersonate.
        (Some(user), _) if impersonating => Some(ApiError::new(
            403,
            "Forbidden",
            format!(
                "users \"{}\" is forbidden: User \"{}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
                req.headers()
                    .get(IMPERSONATE_USER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default(),
                user.name
            ),
        )),
        (None, _) if !authorized(&srv.config, &path, req.headers()) => Some(ApiError::new(
            401,
            "Unauthorized",
            "Unauthorized: a valid bearer token is required",
        )),
        (_, Some(user)) => srv
            .authz
            .authorize(&srv.store, &user, &method, &path, &query)
            .err(),
        (_, None) => None,
    };
    let resp = match denied.or(refused) {
        Some(e) => e.into_response(),
        None => match srv.faults.before(&method, &path, &query).await {
            Some(e) => e.into_response(),
            None => next.run(req).await,
        },
    };
    srv.faults.record(RequestRecord {
        method,
        path,
        query,
        status: resp.status().as_u16(),
        content_type: resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
    });
    resp
}

fn authorized(config: &Config, path: &str, headers: &HeaderMap) -> bool {
    let Some(token) = &config.bearer_token else {
        return true;
    };
    if matches!(path, "/healthz" | "/livez" | "/readyz") {
        return true;
    }
    crate::http::authz::bearer_token(headers).is_some_and(|t| t == token)
}

async fn handle(State(srv): State<Arc<Server>>, req: Request) -> Response {
    if let Some(r) = crate::http::admin::handle(&srv, req.method(), req.uri().path()) {
        return r;
    }
    let timeout = srv.config.request_timeout;
    match tokio::time::timeout(timeout, handle_inner(srv, req)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => e.into_response(),
        Err(_) => deadline_passed(timeout).into_response(),
    }
}

/// 504 Timeout for a request that did not complete within the deadline
/// (a watch is answered at once and streams on, so only its start counts).
fn deadline_passed(timeout: Duration) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("request did not complete within the allotted timeout of {timeout:?}"),
    );
    e.retry_after_seconds = Some(1);
    e
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn read_body(srv: &Server, req: Request) -> Result<(http::request::Parts, Bytes), ApiError> {
    let limit = srv.config.max_body_bytes;
    let too_large = || {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit} bytes"),
        )
    };
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large())?;
    Ok((parts, bytes))
}

async fn handle_inner(srv: Arc<Server>, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = read_body(&srv, req).await?;
    let path = parts.uri.path().to_string();
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let r = Req {
        method: parts.method.clone(),
        query: Query::parse(parts.uri.query())?,
        headers: parts.headers,
        body,
    };
    let get_only = |resp: Result<Response, ApiError>| {
        if r.method == Method::GET {
            resp
        } else {
            Err(ApiError::method_not_allowed(r.method.as_str(), &path))
        }
    };
    match segs.as_slice() {
        [] => get_only(Ok(discovery::root_paths(&srv))),
        ["version"] => get_only(Ok(discovery::version())),
        ["healthz" | "livez" | "readyz", ..] => get_only(Ok("ok".into_response())),
        ["api"] if discovery::wants_aggregated(r.accept()) => {
            get_only(Ok(discovery::aggregated(&srv, true)))
        }
        ["api"] => discovered(&r, get_only(Ok(discovery::api_versions(&srv)))).await,
        ["api", "v1"] => discovered(&r, get_only(discovery::resource_list(&srv, "", "v1"))).await,
        ["api", "v1", rest @ ..] => resource(&srv, "", "v1", rest, r, &path).await,
        ["apis"] if discovery::wants_aggregated(r.accept()) => {
            get_only(Ok(discovery::aggregated(&srv, false)))
        }
        ["apis"] => discovered(&r, get_only(Ok(discovery::group_list(&srv)))).await,
        ["apis", g] => discovered(&r, get_only(discovery::group(&srv, g))).await,
        ["apis", g, v] => discovered(&r, get_only(discovery::resource_list(&srv, g, v))).await,
        ["apis", g, v, plural] if auth_review::kind(g, v, plural).is_some() => {
            auth_review::serve(&srv, g, v, plural, &r, &path)
        }
        ["apis", g, v, rest @ ..] => resource(&srv, g, v, rest, r, &path).await,
        ["openapi", "v3"] => get_only(Ok(openapi::root(&srv))),
        ["openapi", "v3", gv @ ..] => get_only(openapi::group_version(&srv, &gv.join("/"))),
        _ => Err(ApiError::no_route(&path)),
    }
}

/// A discovery document (or its error) in the encoding the client prefers:
/// client-go and kubectl ask for protobuf first.
async fn discovered(r: &Req, result: Result<Response, ApiError>) -> Result<Response, ApiError> {
    let answer = crate::codec::negotiate_discovery(r.accept());
    Ok(crate::codec::encode_response(answer, false, result).await)
}

fn parse_target(
    srv: &Server,
    group: &str,
    version: &str,
    rest: &[&str],
    path: &str,
) -> Result<Target, ApiError> {
    let is_ns_sub = rest.len() == 3 && matches!(rest[2], "status" | "finalize");
    let (namespace, tail) = if rest.first() == Some(&"namespaces") && rest.len() >= 3 && !is_ns_sub
    {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, sub) = match tail {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(ApiError::no_route(path)),
    };
    let info = srv
        .registry
        .get(group, version, plural)
        .ok_or_else(|| ApiError::no_route(path))?;
    if (info.namespaced && namespace.is_none() && name.is_some())
        || (!info.namespaced && namespace.is_some())
    {
        return Err(ApiError::no_route(path));
    }
    if let Some(s) = &sub
        && !((s == "status" && info.status) || (s == "scale" && info.scale.is_some()))
    {
        return Err(ApiError::no_route(path));
    }
    Ok(Target {
        info,
        namespace,
        name,
        sub,
    })
}

async fn resource(
    srv: &Arc<Server>,
    group: &str,
    version: &str,
    rest: &[&str],
    mut r: Req,
    path: &str,
) -> Result<Response, ApiError> {
    // Legacy watch paths: /api/v1/watch/... and /apis/{g}/{v}/watch/...
    let rest = match rest.split_first() {
        Some((&"watch", tail)) if !tail.is_empty() => {
            r.query.push("watch", "true");
            tail
        }
        _ => rest,
    };
    let t = parse_target(srv, group, version, rest, path)?;
    let answer = crate::codec::negotiate(&t.info, r.accept())?;
    let watch = r.method == Method::GET && r.query.flag("watch");
    let result = match crate::codec::decode_request(&t.info, &mut r) {
        Ok(()) => dispatch(srv, &t, &r, path).await,
        Err(e) => Err(e),
    };
    Ok(crate::codec::encode_response(answer, watch, result).await)
}

async fn dispatch(
    srv: &Arc<Server>,
    t: &Target,
    r: &Req,
    path: &str,
) -> Result<Response, ApiError> {
    let collection = t.name.is_none();
    match (&r.method, collection) {
        (&Method::GET, true) if r.query.flag("watch") => watch::serve(srv, t, r),
        (&Method::GET, true) => crud::list(srv, t, r).await,
        (m, false) if t.sub.as_deref() == Some("scale") => crud::scale(srv, t, r, m),
        (&Method::GET, false) if t.sub.is_none() && r.query.flag("watch") => {
            watch::serve(srv, t, r)
        }
        (&Method::GET, false) => crud::get(srv, t, r).await,
        (&Method::POST, true) => crud::create(srv, t, r).await,
        (&Method::PUT, false) => crud::update(srv, t, r).await,
        (&Method::PATCH, false) => crud::patch(srv, t, r).await,
        (&Method::DELETE, false) => crud::delete(srv, t, r).await,
        (&Method::DELETE, true) => crud::delete_collection(srv, t, r).await,
        (m, _) => Err(ApiError::method_not_allowed(m.as_str(), path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("system%3Aadmin"), "system:admin");
        assert_eq!(percent_decode("a%2"), "a%2");
    }
}
