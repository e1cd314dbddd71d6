//! Fault injection and the request log, scoped to one server. A test can
//! close every open watch, compact history so the next resume gets 410,
//! make the next N matching requests fail with a chosen status (429 carries
//! `Retry-After`), add latency to every request, pause and resume the server,
//! send malformed watch events ([`WatchLineFault`]), and read back which
//! requests were made and how they were answered.

use crate::error::ApiError;
use crate::storage::Store;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Most request records kept; older ones are dropped first.
const LOG_CAPACITY: usize = 100_000;

/// Which requests to fail, how often, and with what.
///
/// ```no_run
/// # async fn demo() -> Result<(), envtest::Error> {
/// use envtest::{FailureRule, TestEnv};
/// let env = TestEnv::start().await?;
/// // The next two LISTs of configmaps answer 429 with Retry-After: 2.
/// env.faults().fail_next(
///     FailureRule::new(2, 429).method(http::Method::GET).path_contains("/configmaps").watch(false).retry_after(2),
/// );
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRule {
    /// How many matching requests fail.
    pub count: usize,
    /// Only requests with this method (any when None).
    pub method: Option<http::Method>,
    /// Only requests whose path contains this (any when None).
    pub path_contains: Option<String>,
    /// Only watch requests (`Some(true)`) or only non-watch ones (`Some(false)`).
    pub watch: Option<bool>,
    /// HTTP status to answer with (500, 429, 409, 410, 504, ...).
    pub status: u16,
    /// `Retry-After` seconds to send (429 defaults to 1).
    pub retry_after_seconds: Option<u64>,
}

impl FailureRule {
    /// Fail the next `count` requests of any kind with `status`.
    pub fn new(count: usize, status: u16) -> Self {
        FailureRule {
            count,
            method: None,
            path_contains: None,
            watch: None,
            status,
            retry_after_seconds: None,
        }
    }

    /// Restrict to one HTTP method.
    #[must_use]
    pub fn method(mut self, m: http::Method) -> Self {
        self.method = Some(m);
        self
    }

    /// Restrict to paths containing `s`.
    #[must_use]
    pub fn path_contains(mut self, s: impl Into<String>) -> Self {
        self.path_contains = Some(s.into());
        self
    }

    /// Restrict to watch (`true`) or non-watch (`false`) requests.
    #[must_use]
    pub fn watch(mut self, w: bool) -> Self {
        self.watch = Some(w);
        self
    }

    /// Send `Retry-After: secs`.
    #[must_use]
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_seconds = Some(secs);
        self
    }

    fn matches(&self, method: &http::Method, path: &str, is_watch: bool) -> bool {
        self.method.as_ref().is_none_or(|m| m == method)
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| path.contains(p))
            && self.watch.is_none_or(|w| w == is_watch)
    }

    fn error(&self) -> ApiError {
        let (reason, message) = match self.status {
            400 => ("BadRequest", "injected fault: bad request"),
            401 => ("Unauthorized", "injected fault: unauthorized"),
            403 => ("Forbidden", "injected fault: forbidden"),
            404 => ("NotFound", "injected fault: not found"),
            409 => (
                "Conflict",
                "injected fault: the object has been modified; please apply your changes to the latest version and try again",
            ),
            410 => ("Expired", "injected fault: too old resource version"),
            429 => (
                "TooManyRequests",
                "injected fault: too many requests, please try again later",
            ),
            503 => ("ServiceUnavailable", "injected fault: service unavailable"),
            504 => (
                "Timeout",
                "injected fault: the server was unable to return a response in the time allotted",
            ),
            _ => ("InternalError", "injected fault: internal error"),
        };
        let mut e = ApiError::new(self.status, reason, message);
        e.retry_after_seconds = self
            .retry_after_seconds
            .or((self.status == 429).then_some(1));
        e
    }
}

/// A way to spoil the next object event (ADDED, MODIFIED, DELETED) a watch
/// sends, to test how clients cope with malformed data from a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchLineFault {
    /// Cut the line in half (the client gets half a JSON document).
    Truncate,
    /// Replace the object with bytes that are not JSON.
    Corrupt,
    /// Add fields no schema knows, at the top, in the object and in its
    /// metadata (a client must ignore them).
    UnknownFields,
    /// Make `metadata.labels` a string instead of a map (valid JSON that
    /// does not fit the type).
    TypeMismatch,
    /// Pad the object with an annotation of this many bytes.
    Oversize(usize),
}

impl WatchLineFault {
    fn apply(&self, line: &[u8]) -> Vec<u8> {
        let mut out = match self {
            WatchLineFault::Truncate => line[..line.len() / 2].to_vec(),
            WatchLineFault::Corrupt => {
                let kind = serde_json::from_slice::<serde_json::Value>(line)
                    .ok()
                    .and_then(|v| v["type"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                format!("{{\"type\":\"{kind}\",\"object\":{{\"metadata\":\u{1}%corrupt%}}")
                    .into_bytes()
            }
            WatchLineFault::UnknownFields
            | WatchLineFault::TypeMismatch
            | WatchLineFault::Oversize(_) => {
                let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(line) else {
                    return line.to_vec();
                };
                match self {
                    WatchLineFault::UnknownFields => {
                        v["unknownTop"] = serde_json::json!(1);
                        v["object"]["unknownField"] = serde_json::json!({"nested": [1, 2, 3]});
                        v["object"]["metadata"]["unknownMeta"] = serde_json::json!(true);
                    }
                    WatchLineFault::TypeMismatch => {
                        v["object"]["metadata"]["labels"] = serde_json::json!("not-a-map");
                    }
                    WatchLineFault::Oversize(n) => {
                        v["object"]["metadata"]["annotations"]["envtest.io/padding"] =
                            serde_json::json!("x".repeat(*n));
                    }
                    _ => {}
                }
                v.to_string().into_bytes()
            }
        };
        out.push(b'\n');
        out
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: http::Method,
    /// URL path.
    pub path: String,
    /// Raw query string ("" when none).
    pub query: String,
    /// The HTTP status answered.
    pub status: u16,
    /// The answer's `Content-Type` ("" when none): whether a client got
    /// JSON or protobuf.
    pub content_type: String,
}

impl RequestRecord {
    /// Whether this was a watch request.
    pub fn is_watch(&self) -> bool {
        is_watch_query(&self.query)
    }
}

pub(crate) fn is_watch_query(query: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// The fault controls of one server (see the module docs).
///
/// ```no_run
/// # async fn demo() -> Result<(), envtest::Error> {
/// let env = envtest::TestEnv::start().await?;
/// env.faults().drop_watches(); // every open watch ends now
/// env.faults().compact(); // resuming from any earlier RV gets 410 Expired
/// env.faults().set_latency(std::time::Duration::from_millis(50));
/// assert!(env.request_log().iter().all(|r| r.status < 600));
/// # Ok(()) }
/// ```
pub struct Faults {
    store: Arc<Store>,
    drop_token: Mutex<CancellationToken>,
    rules: Mutex<Vec<FailureRule>>,
    latency: Mutex<Duration>,
    paused: tokio::sync::watch::Sender<bool>,
    log: Mutex<VecDeque<RequestRecord>>,
    spoil: Mutex<VecDeque<WatchLineFault>>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("rules", &*self.rules.lock())
            .finish_non_exhaustive()
    }
}

impl Faults {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Faults {
            store,
            drop_token: Mutex::new(CancellationToken::new()),
            rules: Mutex::new(Vec::new()),
            latency: Mutex::new(Duration::ZERO),
            paused: tokio::sync::watch::channel(false).0,
            log: Mutex::new(VecDeque::new()),
            spoil: Mutex::new(VecDeque::new()),
        }
    }

    /// Close every watch that is open now (new watches are unaffected).
    pub fn drop_watches(&self) {
        let old = std::mem::replace(&mut *self.drop_token.lock(), CancellationToken::new());
        old.cancel();
    }

    /// Forget all watch history: resuming from any earlier revision gets 410,
    /// and continue tokens issued before now expire.
    pub fn compact(&self) {
        self.store.compact();
    }

    /// Fail the next matching requests (rules are checked in the order added).
    pub fn fail_next(&self, rule: FailureRule) {
        if rule.count > 0 {
            self.rules.lock().push(rule);
        }
    }

    /// Remove every pending failure rule.
    pub fn clear_failures(&self) {
        self.rules.lock().clear();
    }

    /// Delay every request by `d` (zero to turn off).
    pub fn set_latency(&self, d: Duration) {
        *self.latency.lock() = d;
    }

    /// Hold every new request until [`Faults::resume`].
    pub fn pause(&self) {
        self.paused.send_replace(true);
    }

    /// Release held requests.
    pub fn resume(&self) {
        self.paused.send_replace(false);
    }

    /// Spoil the next object event any watch sends with `fault` (queued
    /// faults apply one per event, in order).
    pub fn spoil_next_watch_event(&self, fault: WatchLineFault) {
        self.spoil.lock().push_back(fault);
    }

    /// How many queued [`WatchLineFault`]s have not been applied yet.
    pub fn pending_watch_event_faults(&self) -> usize {
        self.spoil.lock().len()
    }

    /// The watch hook: spoils `line` if a fault is queued and it is an
    /// object event (bookmarks and errors pass untouched).
    pub(crate) fn spoil_watch_line(&self, line: bytes::Bytes) -> bytes::Bytes {
        let is_object_event = [
            &b"{\"type\":\"ADDED\""[..],
            b"{\"type\":\"MODIFIED\"",
            b"{\"type\":\"DELETED\"",
        ]
        .iter()
        .any(|p| line.starts_with(p));
        if !is_object_event {
            return line;
        }
        match self.spoil.lock().pop_front() {
            Some(fault) => bytes::Bytes::from(fault.apply(&line)),
            None => line,
        }
    }

    /// The token that open watches watch for [`Faults::drop_watches`].
    pub(crate) fn watch_drop_token(&self) -> CancellationToken {
        self.drop_token.lock().clone()
    }

    /// Wait while paused, then apply latency; returns an injected error if a
    /// rule matches.
    pub(crate) async fn before(
        &self,
        method: &http::Method,
        path: &str,
        query: &str,
    ) -> Option<ApiError> {
        let mut rx = self.paused.subscribe();
        // An error here means the sender is gone, which cannot happen while self lives.
        let _ = rx.wait_for(|p| !*p).await;
        let d = *self.latency.lock();
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
        let is_watch = is_watch_query(query);
        let mut rules = self.rules.lock();
        let idx = rules
            .iter()
            .position(|r| r.matches(method, path, is_watch))?;
        let err = rules[idx].error();
        rules[idx].count -= 1;
        if rules[idx].count == 0 {
            rules.remove(idx);
        }
        Some(err)
    }

    pub(crate) fn record(&self, rec: RequestRecord) {
        let mut log = self.log.lock();
        if log.len() >= LOG_CAPACITY {
            log.pop_front();
        }
        log.push_back(rec);
    }

    /// Every request answered so far (oldest first).
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.log.lock().iter().cloned().collect()
    }

    /// Forget the request log.
    pub fn clear_request_log(&self) {
        self.log.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn rules_fire_count_times_and_only_on_matches() {
        let f = Faults::new(Arc::new(Store::new(10, 16)));
        f.fail_next(
            FailureRule::new(2, 429)
                .method(http::Method::GET)
                .path_contains("configmaps")
                .watch(false),
        );
        assert!(
            f.before(&http::Method::POST, "/api/v1/namespaces/d/configmaps", "")
                .await
                .is_none()
        );
        assert!(
            f.before(
                &http::Method::GET,
                "/api/v1/namespaces/d/configmaps",
                "watch=true"
            )
            .await
            .is_none()
        );
        let e = f
            .before(&http::Method::GET, "/api/v1/namespaces/d/configmaps", "")
            .await
            .unwrap();
        assert_eq!((e.code, e.retry_after_seconds), (429, Some(1)));
        assert!(
            f.before(&http::Method::GET, "/api/v1/configmaps", "")
                .await
                .is_some()
        );
        assert!(
            f.before(&http::Method::GET, "/api/v1/configmaps", "")
                .await
                .is_none()
        );
    }

    #[test]
    fn watch_line_faults_spoil_only_object_events_once_each() {
        let f = Faults::new(Arc::new(Store::new(10, 16)));
        let line = bytes::Bytes::from_static(
            b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"7\"}}}\n",
        );
        let bookmark = bytes::Bytes::from_static(b"{\"type\":\"BOOKMARK\",\"object\":{}}\n");
        let parse = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b);
        for fault in [
            WatchLineFault::Truncate,
            WatchLineFault::Corrupt,
            WatchLineFault::UnknownFields,
            WatchLineFault::TypeMismatch,
            WatchLineFault::Oversize(1000),
        ] {
            f.spoil_next_watch_event(fault);
        }
        assert_eq!(f.spoil_watch_line(bookmark.clone()), bookmark);
        let truncated = f.spoil_watch_line(line.clone());
        assert!(truncated.ends_with(b"\n") && parse(&truncated).is_err());
        let corrupt = f.spoil_watch_line(line.clone());
        assert!(corrupt.starts_with(b"{\"type\":\"MODIFIED\"") && parse(&corrupt).is_err());
        let unknown = parse(&f.spoil_watch_line(line.clone())).unwrap();
        assert_eq!(unknown["object"]["metadata"]["unknownMeta"], true);
        assert_eq!(unknown["object"]["metadata"]["name"], "a");
        let mismatch = parse(&f.spoil_watch_line(line.clone())).unwrap();
        assert_eq!(mismatch["object"]["metadata"]["labels"], "not-a-map");
        let big = f.spoil_watch_line(line.clone());
        assert!(big.len() > 1000 && parse(&big).is_ok());
        assert_eq!(f.pending_watch_event_faults(), 0);
        assert_eq!(
            f.spoil_watch_line(line.clone()),
            line,
            "one event per fault"
        );
    }

    #[test]
    fn drop_watches_cancels_only_current_token() {
        let f = Faults::new(Arc::new(Store::new(10, 16)));
        let t = f.watch_drop_token();
        f.drop_watches();
        assert!(t.is_cancelled());
        assert!(!f.watch_drop_token().is_cancelled());
    }
}
