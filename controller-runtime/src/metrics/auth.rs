//! Authentication and authorization of metrics scrapes, as
//! controller-runtime's `filters.WithAuthenticationAndAuthorization`: the
//! bearer token of every request is reviewed with a TokenReview, the user
//! it names with a SubjectAccessReview of the request's verb on the
//! non-resource URL of its path. Answers are cached briefly (by a SHA-256
//! of the token, so the cache does not hold tokens) and the cache is
//! bounded. Denied requests are counted in
//! `controller_runtime_metrics_requests_denied_total{code}` and logged once
//! per review (not per cached answer).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use parking_lot::Mutex;
use prometheus::{IntCounterVec, Opts, Registry};
use tokio::time::Instant;

use super::MetricsError;
use super::secure::SecureMetrics;

/// What the reviews said about one token, verb and path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    Allowed,
    /// The TokenReview did not authenticate the token; why.
    Unauthenticated(String),
    /// The SubjectAccessReview did not allow the user.
    Forbidden {
        user: String,
        reason: String,
    },
}

/// The cache key: SHA-256 of the token, the verb, the path.
type Key = ([u8; 32], String, String);

/// Answers kept for `ttl`, at most `capacity` of them.
#[derive(Debug)]
struct DecisionCache {
    ttl: Duration,
    capacity: usize,
    entries: HashMap<Key, (Decision, Instant)>,
}

impl DecisionCache {
    fn new(ttl: Duration, capacity: usize) -> Self {
        DecisionCache {
            ttl,
            capacity,
            entries: HashMap::new(),
        }
    }

    fn get(&mut self, key: &Key, now: Instant) -> Option<Decision> {
        match self.entries.get(key) {
            Some((decision, expires)) if *expires > now => Some(decision.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: Key, decision: Decision, now: Instant) {
        if self.ttl.is_zero() || self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, expires)| *expires > now);
            if self.entries.len() >= self.capacity {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
            }
        }
        self.entries.insert(key, (decision, now + self.ttl));
    }
}

/// Guards a router with TokenReviews and SubjectAccessReviews.
pub(crate) struct MetricsAuth {
    client: Client,
    review_timeout: Duration,
    max_token_bytes: usize,
    cache: Mutex<DecisionCache>,
    denied: IntCounterVec,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth").finish_non_exhaustive()
    }
}

/// Why a request carries no usable token.
#[derive(Debug, PartialEq, Eq)]
enum NoToken {
    Missing,
    Malformed,
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in
/// any case, as the API server reads it).
fn bearer_token(headers: &HeaderMap) -> Result<&str, NoToken> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or(NoToken::Missing)?
        .to_str()
        .map_err(|_| NoToken::Malformed)?
        .trim();
    let (scheme, token) = value.split_once(' ').ok_or(NoToken::Malformed)?;
    let token = token.trim();
    if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' ') {
        Ok(token)
    } else {
        Err(NoToken::Malformed)
    }
}

fn unauthorized(message: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        format!("Unauthorized: {message}\n"),
    )
        .into_response()
}

impl MetricsAuth {
    /// A guard asking the API server through `client`, its denied counter
    /// registered in `registry`.
    pub(crate) fn new(
        client: Client,
        options: &SecureMetrics,
        registry: &Registry,
    ) -> Result<Self, MetricsError> {
        let denied = IntCounterVec::new(
            Opts::new(
                "controller_runtime_metrics_requests_denied_total",
                "Requests to the secure metrics server refused, by HTTP status (401, 403, or 500 when a review failed)",
            ),
            &["code"],
        )?;
        registry.register(Box::new(denied.clone()))?;
        Ok(MetricsAuth {
            client,
            review_timeout: options.review_timeout,
            max_token_bytes: options.max_token_bytes,
            cache: Mutex::new(DecisionCache::new(
                options.cache_ttl,
                options.cache_capacity,
            )),
            denied,
        })
    }

    /// `router` with every request authenticated and authorized first.
    pub(crate) fn protect(self: Arc<Self>, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self, guard))
    }

    fn deny(&self, code: StatusCode, response: Response) -> Response {
        self.denied.with_label_values(&[code.as_str()]).inc();
        response
    }

    /// The decision for `token` doing `verb` on `path`: cached, or
    /// reviewed now. Err: a review failed.
    async fn decide(&self, token: &str, verb: &str, path: &str) -> Result<Decision, String> {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut hash = [0u8; 32];
        hash.copy_from_slice(digest.as_ref());
        let key: Key = (hash, verb.to_owned(), path.to_owned());
        if let Some(decision) = self.cache.lock().get(&key, Instant::now()) {
            return Ok(decision);
        }
        let decision = tokio::time::timeout(self.review_timeout, self.review(token, verb, path))
            .await
            .map_err(|_| {
                format!(
                    "the API server did not answer the review within {:?}",
                    self.review_timeout
                )
            })??;
        match &decision {
            Decision::Allowed => {}
            Decision::Unauthenticated(why) => {
                tracing::info!(%path, reason = %why, "metrics request with a token the API server did not authenticate");
            }
            Decision::Forbidden { user, reason } => {
                tracing::info!(%user, %verb, %path, %reason, "metrics request forbidden");
            }
        }
        self.cache
            .lock()
            .insert(key, decision.clone(), Instant::now());
        Ok(decision)
    }

    async fn review(&self, token: &str, verb: &str, path: &str) -> Result<Decision, String> {
        // `token` is an `Option<String>` up to Kubernetes 1.35 and a
        // `String` from 1.36: `.into()` is one spelling for both.
        #[allow(clippy::useless_conversion)]
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned().into(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| format!("TokenReview failed: {e}"))?;
        let status = reviewed.status.unwrap_or_default();
        let user = match status.user {
            Some(user) if status.authenticated == Some(true) => user,
            _ => {
                let why = status
                    .error
                    .filter(|e| !e.is_empty())
                    .unwrap_or_else(|| "token not authenticated".to_owned());
                return Ok(Decision::Unauthenticated(why));
            }
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                resource_attributes: None,
            },
            ..SubjectAccessReview::default()
        };
        let answered = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
        let status = answered.status.unwrap_or_default();
        Ok(if status.allowed && status.denied != Some(true) {
            Decision::Allowed
        } else {
            Decision::Forbidden {
                user: name,
                reason: status.reason.unwrap_or_default(),
            }
        })
    }
}

async fn guard(State(auth): State<Arc<MetricsAuth>>, req: Request, next: Next) -> Response {
    let token = match bearer_token(req.headers()) {
        Ok(token) => token.to_owned(),
        Err(NoToken::Missing) => {
            return auth.deny(
                StatusCode::UNAUTHORIZED,
                unauthorized("no bearer token; send `Authorization: Bearer <token>`"),
            );
        }
        Err(NoToken::Malformed) => {
            return auth.deny(
                StatusCode::UNAUTHORIZED,
                unauthorized("the Authorization header is not `Bearer <token>`"),
            );
        }
    };
    if token.len() > auth.max_token_bytes {
        return auth.deny(
            StatusCode::UNAUTHORIZED,
            unauthorized(&format!(
                "the bearer token is longer than {} bytes",
                auth.max_token_bytes
            )),
        );
    }
    let verb = req.method().as_str().to_ascii_lowercase();
    let path = req.uri().path().to_owned();
    match auth.decide(&token, &verb, &path).await {
        Ok(Decision::Allowed) => next.run(req).await,
        Ok(Decision::Unauthenticated(why)) => {
            auth.deny(StatusCode::UNAUTHORIZED, unauthorized(&why))
        }
        Ok(Decision::Forbidden { user, reason }) => {
            let mut message = format!("Forbidden: user {user:?} may not {verb} {path}");
            if !reason.is_empty() {
                message = format!("{message}: {reason}");
            }
            auth.deny(
                StatusCode::FORBIDDEN,
                (StatusCode::FORBIDDEN, format!("{message}\n")).into_response(),
            )
        }
        Err(error) => {
            tracing::warn!(%error, %path, "cannot review a metrics request");
            auth.deny(
                StatusCode::INTERNAL_SERVER_ERROR,
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Internal Server Error: {error}\n"),
                )
                    .into_response(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn key(n: u8) -> Key {
        ([n; 32], "get".into(), "/metrics".into())
    }

    #[tokio::test(start_paused = true)]
    async fn answers_expire_after_the_ttl() {
        let mut cache = DecisionCache::new(Duration::from_secs(10), 8);
        cache.insert(key(1), Decision::Allowed, Instant::now());
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(cache.get(&key(1), Instant::now()), Some(Decision::Allowed));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(cache.get(&key(1), Instant::now()), None);
        assert!(cache.entries.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_is_bounded_and_drops_the_oldest() {
        let mut cache = DecisionCache::new(Duration::from_secs(10), 3);
        for n in 0..3 {
            cache.insert(key(n), Decision::Allowed, Instant::now());
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        cache.insert(key(9), Decision::Allowed, Instant::now());
        assert_eq!(cache.entries.len(), 3);
        assert_eq!(cache.get(&key(0), Instant::now()), None);
        assert!(cache.get(&key(1), Instant::now()).is_some());
        // Expired entries go first.
        tokio::time::advance(Duration::from_millis(8500)).await;
        cache.insert(key(10), Decision::Allowed, Instant::now());
        assert_eq!(cache.entries.len(), 3);
        assert!(cache.get(&key(9), Instant::now()).is_some());
        // A zero TTL or capacity caches nothing.
        let mut none = DecisionCache::new(Duration::ZERO, 3);
        none.insert(key(1), Decision::Allowed, Instant::now());
        assert!(none.entries.is_empty());
    }

    #[test]
    fn only_a_bearer_token_is_a_token() {
        let with = |v: &[u8]| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                header::HeaderValue::from_bytes(v).unwrap(),
            );
            bearer_token(&h).map(str::to_owned)
        };
        assert_eq!(with(b"Bearer abc"), Ok("abc".into()));
        assert_eq!(with(b"bearer  abc "), Ok("abc".into()));
        assert_eq!(with(b"Basic abc"), Err(NoToken::Malformed));
        assert_eq!(with(b"Bearer"), Err(NoToken::Malformed));
        assert_eq!(with(b"Bearer "), Err(NoToken::Malformed));
        assert_eq!(with(b"Bearer a b"), Err(NoToken::Malformed));
        assert_eq!(with(b"Bearer \xff\xfe"), Err(NoToken::Malformed));
        assert_eq!(bearer_token(&HeaderMap::new()), Err(NoToken::Missing));
    }
}
