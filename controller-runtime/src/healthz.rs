//! Liveness and readiness endpoints: `/healthz` and `/readyz`.
//!
//! Layer 1 (building blocks): imports nothing else of this crate.
//!
//! A [`Checks`] set holds named [`HealthCheck`]s; [`router`] serves two sets
//! the way controller-runtime's `healthz` package does, so probes and
//! runbooks carry over:
//!
//! - `GET /healthz` (or `/readyz`) runs every check. All pass: `200` with the
//!   body `ok`. Any fails: `500` with one line per check, `[+]name ok` or
//!   `[-]name failed: reason`, then `healthz check failed` (or
//!   `readyz check failed`).
//! - `?verbose` lists every check even when all pass, ending with
//!   `healthz check passed`.
//! - `?exclude=name` (repeatable) skips a check (`[+]name excluded: ok`).
//! - `GET /healthz/name` runs that one check: `200 ok` or `500` with the
//!   reason; an unknown name is `404`.
//!
//! A set without checks answers with a built-in `ping` check that always
//! passes. The manager fills `/readyz` with `caches synced` and, when leader
//! election is on, `leadership settled`.
//!
//! ```
//! use controller_runtime::healthz::{Checks, check_fn};
//! let ready = Checks::new();
//! ready.add("db", check_fn(|| Err("connection refused".to_string()))).unwrap();
//! let report = ready.run(&[], true);
//! assert!(!report.healthy());
//! assert_eq!(report.render("readyz"), "[-]db failed: connection refused\nreadyz check failed\n");
//! ```

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::RwLock;

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HealthzError {
    /// A check with this name is already registered.
    #[error("health check {0:?} is already registered")]
    Duplicate(String),
    /// Check names appear in URLs and in the report: they must be non-empty
    /// and must not contain `/` or a line break.
    #[error("invalid health check name {0:?}: must be non-empty without '/' or line breaks")]
    InvalidName(String),
}

/// One named health or readiness check.
///
/// `Ok(())` means healthy; `Err(reason)` means failed, with a reason shown
/// in the verbose report.
pub trait HealthCheck: Send + Sync + 'static {
    /// Runs the check.
    fn check(&self) -> Result<(), String>;
}

/// A [`HealthCheck`] from a closure; see [`check_fn`].
pub struct CheckFn<F>(F);

impl<F> HealthCheck for CheckFn<F>
where
    F: Fn() -> Result<(), String> + Send + Sync + 'static,
{
    fn check(&self) -> Result<(), String> {
        (self.0)()
    }
}

/// A check from a closure.
///
/// ```
/// use controller_runtime::healthz::{HealthCheck, check_fn};
/// assert_eq!(check_fn(|| Ok(())).check(), Ok(()));
/// ```
pub fn check_fn<F>(f: F) -> CheckFn<F>
where
    F: Fn() -> Result<(), String> + Send + Sync + 'static,
{
    CheckFn(f)
}

/// The check controller-runtime calls `Ping`: always healthy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ping;

impl HealthCheck for Ping {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A named set of checks behind one endpoint. Cheap to clone; clones share
/// the set, so checks added later are served at once.
#[derive(Clone, Default)]
pub struct Checks {
    checks: Arc<RwLock<BTreeMap<String, Arc<dyn HealthCheck>>>>,
}

impl std::fmt::Debug for Checks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.checks.read().keys()).finish()
    }
}

impl Checks {
    /// An empty set (served as a single passing `ping`).
    pub fn new() -> Self {
        Checks::default()
    }

    /// Adds `check` under `name`.
    pub fn add(
        &self,
        name: impl Into<String>,
        check: impl HealthCheck,
    ) -> Result<(), HealthzError> {
        let name = name.into();
        if name.is_empty() || name.contains(['/', '\n', '\r']) {
            return Err(HealthzError::InvalidName(name));
        }
        let mut checks = self.checks.write();
        if checks.contains_key(&name) {
            return Err(HealthzError::Duplicate(name));
        }
        checks.insert(name, Arc::new(check));
        Ok(())
    }

    /// The names of the registered checks, sorted.
    pub fn names(&self) -> Vec<String> {
        self.checks.read().keys().cloned().collect()
    }

    /// Runs every check except those named in `exclude`. `verbose` asks for
    /// every line even when all pass.
    pub fn run(&self, exclude: &[String], verbose: bool) -> Report {
        let checks: Vec<(String, Arc<dyn HealthCheck>)> = self
            .checks
            .read()
            .iter()
            .map(|(name, check)| (name.clone(), Arc::clone(check)))
            .collect();
        let mut unknown: HashSet<&str> = exclude.iter().map(String::as_str).collect();
        let mut lines = Vec::with_capacity(checks.len().max(1));
        for (name, check) in checks {
            let status = if unknown.remove(name.as_str()) {
                Status::Excluded
            } else {
                match check.check() {
                    Ok(()) => Status::Ok,
                    Err(reason) => {
                        tracing::debug!(check = %name, %reason, "health check failed");
                        Status::Failed(reason)
                    }
                }
            };
            lines.push((name, status));
        }
        if lines.is_empty() {
            lines.push(("ping".to_string(), Status::Ok));
        }
        let mut unknown_excludes: Vec<String> = unknown.into_iter().map(str::to_string).collect();
        unknown_excludes.sort();
        Report {
            lines,
            unknown_excludes,
            verbose,
        }
    }

    /// Runs the one check `name`: `None` if there is no such check.
    pub fn run_one(&self, name: &str) -> Option<Result<(), String>> {
        let check = self.checks.read().get(name).cloned();
        match check {
            Some(check) => Some(check.check()),
            None if name == "ping" && self.checks.read().is_empty() => Some(Ok(())),
            None => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    Ok,
    Excluded,
    Failed(String),
}

/// The result of running a [`Checks`] set.
#[derive(Debug, Clone)]
pub struct Report {
    lines: Vec<(String, Status)>,
    unknown_excludes: Vec<String>,
    verbose: bool,
}

impl Report {
    /// Whether every (non-excluded) check passed.
    pub fn healthy(&self) -> bool {
        !self
            .lines
            .iter()
            .any(|(_, status)| matches!(status, Status::Failed(_)))
    }

    /// The names of the failed checks, sorted.
    pub fn failed(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|(_, status)| matches!(status, Status::Failed(_)))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The HTTP status: `200` when healthy, `500` otherwise.
    pub fn status_code(&self) -> StatusCode {
        if self.healthy() {
            StatusCode::OK
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }

    /// The response body for the endpoint called `endpoint` (`healthz` or
    /// `readyz`): `ok` when healthy and not verbose, else one line per check.
    pub fn render(&self, endpoint: &str) -> String {
        let healthy = self.healthy();
        if healthy && !self.verbose {
            return "ok".to_string();
        }
        let mut out = String::new();
        for (name, status) in &self.lines {
            // Writing to a String cannot fail.
            let _ = match status {
                Status::Ok => writeln!(out, "[+]{name} ok"),
                Status::Excluded => writeln!(out, "[+]{name} excluded: ok"),
                Status::Failed(reason) => writeln!(out, "[-]{name} failed: {reason}"),
            };
        }
        if !self.unknown_excludes.is_empty() {
            let quoted: Vec<String> = self
                .unknown_excludes
                .iter()
                .map(|n| format!("{n:?}"))
                .collect();
            let _ = writeln!(
                out,
                "warn: some health checks cannot be excluded: no matches for {}",
                quoted.join(", ")
            );
        }
        if healthy {
            let _ = writeln!(out, "{endpoint} check passed");
        } else {
            let _ = writeln!(out, "{endpoint} check failed");
        }
        out
    }
}

/// Parses `verbose` and `exclude=` from a raw query string.
fn parse_query(query: Option<&str>) -> (bool, Vec<String>) {
    let mut verbose = false;
    let mut exclude = Vec::new();
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "verbose" => verbose = true,
            "exclude" if !value.is_empty() => exclude.push(percent_decode(value)),
            _ => {}
        }
    }
    (verbose, exclude)
}

/// Decodes `%XX` escapes and `+` (check names are plain text, so a minimal
/// decoder is enough; invalid escapes are kept as written).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

fn aggregated(checks: &Checks, endpoint: &str, query: Option<&str>) -> Response {
    let (verbose, exclude) = parse_query(query);
    let report = checks.run(&exclude, verbose);
    if !report.healthy() {
        tracing::info!(endpoint, failed = ?report.failed(), "health endpoint reports failure");
    }
    text(report.status_code(), report.render(endpoint))
}

fn single(checks: &Checks, name: &str) -> Response {
    match checks.run_one(name) {
        Some(Ok(())) => text(StatusCode::OK, "ok".to_string()),
        Some(Err(reason)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
        None => text(
            StatusCode::NOT_FOUND,
            format!("no health check named {name:?}\n"),
        ),
    }
}

/// Runs `answer` (which runs checks) on tokio's blocking pool: a check is
/// a plain function that may block its thread (blocking I/O, a lock), and
/// one that did so on a runtime worker stalled every task queued behind it
/// on that worker (timers, the manager's own stop) for as long as it blocked.
async fn off_the_runtime(answer: impl FnOnce() -> Response + Send + 'static) -> Response {
    match tokio::task::spawn_blocking(answer).await {
        Ok(response) => response,
        Err(error) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: a health check panicked: {error}\n"),
        ),
    }
}

/// An axum router serving `/healthz`, `/healthz/{name}`, `/readyz` and
/// `/readyz/{name}` from the two sets.
pub fn router(healthz: Checks, readyz: Checks) -> Router {
    Router::new()
        .merge(endpoint("healthz", healthz))
        .merge(endpoint("readyz", readyz))
}

/// The aggregated `/{endpoint}` route and the per-check
/// `/{endpoint}/{name}` route, both served from `checks`.
fn endpoint(endpoint: &'static str, checks: Checks) -> Router {
    Router::new()
        .route(
            &format!("/{endpoint}"),
            get(move |State(c): State<Checks>, RawQuery(q): RawQuery| {
                off_the_runtime(move || aggregated(&c, endpoint, q.as_deref()))
            }),
        )
        .route(
            &format!("/{endpoint}/{{name}}"),
            get(|State(c): State<Checks>, Path(name): Path<String>| {
                off_the_runtime(move || single(&c, &name))
            }),
        )
        .with_state(checks)
}

#[cfg(test)]
mod tests;
