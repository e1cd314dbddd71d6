//! Watch: a chunked HTTP response of newline-delimited `{type, object}`
//! events. RV unset or `0` first sends a synthetic ADDED per current object;
//! RV `X` sends exactly the retained changes after `X` and then live ones,
//! taken atomically from storage so none is missed or repeated; `X` older
//! than the history window gets one ERROR event (410 Expired) and the stream
//! ends. Selectors turn a MODIFIED into ADDED/DELETED when an object enters
//! or leaves the selection. `allowWatchBookmarks` adds periodic BOOKMARKs;
//! `timeoutSeconds` ends the stream cleanly; `sendInitialEvents=true` sends
//! the initial state followed by a BOOKMARK annotated
//! `k8s.io/initial-events-end: "true"`. Each watcher has its own bounded
//! buffer: one that falls too far behind is closed (as a real API server
//! does), so a slow watcher never blocks writers.

use crate::error::ApiError;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::objects::{Filter, render};
use crate::resources::registry::ResourceInfo;
use crate::storage::{Event, EventType, StorageError, StoredObject, WatchFrom, event_line};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, header};
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Default watch length when the client gives no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Lines buffered towards one HTTP connection.
const CONNECTION_BUFFER: usize = 32;

struct Watcher {
    info: Arc<ResourceInfo>,
    filter: Filter,
    table: bool,
    /// Events go out as protobuf frames built from the objects' cached
    /// messages (see `codec::cached`), not as JSON lines.
    protobuf: bool,
    tx: mpsc::Sender<Bytes>,
    stop: CancellationToken,
    deadline: Instant,
    last: u64,
    srv: Arc<Server>,
}

fn streaming_response(rx: mpsc::Receiver<Bytes>, protobuf: bool) -> Response {
    let mut rx = rx;
    let stream =
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|o| o.map(Ok::<_, Infallible>)));
    let mut resp = Response::new(Body::from_stream(stream));
    let media_type = if protobuf {
        crate::codec::PROTOBUF_WATCH
    } else {
        "application/json"
    };
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    resp
}

fn error_line(e: &ApiError) -> Bytes {
    Bytes::from(format!(
        "{{\"type\":\"ERROR\",\"object\":{}}}\n",
        e.to_status()
    ))
}

/// Serve a watch request.
pub fn serve(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let info = t.info.clone();
    let q = &r.query;
    let mut filter = Filter::from_query(&info, t.namespace.as_deref(), q)?;
    if let Some(name) = &t.name {
        // Watching one object by URL is a watch with a metadata.name selector.
        filter.fields = std::mem::take(&mut filter.fields).and_equals("metadata.name", name);
    }
    let rv = crate::http::crud::parse_rv(q.get("resourceVersion"))?;
    let bookmarks = q.flag("allowWatchBookmarks");
    let initial_events = match q.get("sendInitialEvents") {
        None | Some("") => None,
        Some("true" | "1") => Some(true),
        Some("false" | "0") => Some(false),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "sendInitialEvents: Invalid value: {other:?}: must be true or false"
            )));
        }
    };
    let rv_match = q.get("resourceVersionMatch").unwrap_or("");
    match (initial_events, rv_match) {
        (None, "") => {}
        (Some(_), "NotOlderThan") => {}
        (Some(_), _) => {
            return Err(ApiError::bad_request(
                "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
            ));
        }
        (None, m) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch {m:?} is forbidden for watch unless sendInitialEvents is provided"
            )));
        }
    }
    if initial_events == Some(true) && !bookmarks {
        return Err(ApiError::bad_request(
            "sendInitialEvents=true requires allowWatchBookmarks=true",
        ));
    }
    let timeout =
        match q.get("timeoutSeconds") {
            None | Some("") => DEFAULT_TIMEOUT,
            Some(s) => Duration::from_secs(s.parse().map_err(|_| {
                ApiError::bad_request(format!("timeoutSeconds: Invalid value: {s:?}"))
            })?),
        };
    let from = match (initial_events, rv) {
        (Some(true), _) | (_, None) | (_, Some(0)) => WatchFrom::Now,
        (_, Some(x)) => WatchFrom::Rev(x),
    };
    if initial_events == Some(true)
        && let Some(x) = rv
    {
        let current = srv.store.rev();
        if x > current {
            return Err(ApiError::too_large_rv(x, current));
        }
    }
    let send_initial = initial_events.unwrap_or(from == WatchFrom::Now);
    let (tx, rx) = mpsc::channel(CONNECTION_BUFFER);
    let start = match srv.store.watch(&info.storage_key(), from) {
        Ok(s) => s,
        Err(StorageError::Expired { requested, oldest }) => {
            let e = ApiError::expired(format!("too old resource version: {requested} ({oldest})"));
            // The receiver is ours and empty, so this cannot fail.
            let _ = tx.try_send(error_line(&e));
            return Ok(streaming_response(rx, false));
        }
        Err(StorageError::TooLarge { requested, current }) => {
            return Err(ApiError::too_large_rv(requested, current));
        }
    };
    let protobuf = crate::codec::wants_protobuf(&info, r.accept());
    let w = Watcher {
        info,
        filter,
        table: crate::resources::table::wants_table(r.accept()),
        protobuf,
        tx,
        stop: srv.faults.watch_drop_token(),
        deadline: Instant::now() + timeout,
        last: match from {
            WatchFrom::Now => start.rev,
            WatchFrom::Rev(x) => x,
        },
        srv: srv.clone(),
    };
    let ctx = RunCtx {
        srv: srv.clone(),
        bookmarks: bookmarks.then_some(srv.config.bookmark_interval),
        initial_end_bookmark: initial_events == Some(true),
        send_initial,
    };
    tokio::spawn(w.run(ctx, start.initial, start.backlog, start.rx, start.rev));
    Ok(streaming_response(rx, protobuf))
}

struct RunCtx {
    srv: Arc<Server>,
    bookmarks: Option<Duration>,
    initial_end_bookmark: bool,
    send_initial: bool,
}

impl Watcher {
    /// Send one line; false when the watch must end.
    async fn send(&self, line: Bytes) -> bool {
        // Protobuf frames had their fault applied as JSON (see `line_of`);
        // an empty one is an event dropped from a protobuf stream.
        let line = if self.protobuf {
            line
        } else {
            self.srv.faults.spoil_watch_line(line)
        };
        if line.is_empty() {
            return true;
        }
        tokio::select! {
            r = self.tx.send(line) => r.is_ok(),
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep_until(self.deadline) => false,
        }
    }

    /// The event line of `obj` for this watcher: converted to its version
    /// by the CRD's conversion webhook when stored in another (an error
    /// ends the watch).
    async fn line(
        &self,
        kind: &str,
        obj: &Arc<StoredObject>,
        natural: Option<&Event>,
    ) -> Result<Bytes, ApiError> {
        let shown =
            crate::http::conversion::present_one(&self.srv, &self.info, obj.clone()).await?;
        let natural = natural.filter(|_| Arc::ptr_eq(&shown, obj));
        Ok(self.line_of(kind, &shown, natural))
    }

    fn line_of(&self, kind: &str, obj: &StoredObject, natural: Option<&Event>) -> Bytes {
        if self.protobuf {
            return self.frame_of(kind, obj);
        }
        if self.table {
            let mut v = crate::resources::table::table_value(&self.info, &obj.value);
            if let Some(rows) = v["rows"].as_array_mut() {
                for row in rows {
                    row["object"]["metadata"]["resourceVersion"] = json!(obj.rev.to_string());
                }
            }
            return Bytes::from(format!("{{\"type\":\"{kind}\",\"object\":{v}}}\n"));
        }
        // The line written with the event serves unless this reader sees the
        // object differently (another version, or defaults added since).
        match natural {
            Some(ev)
                if ev.kind.as_str() == kind
                    && crate::resources::objects::read_view(obj, &self.info).is_none() =>
            {
                ev.line.clone()
            }
            _ => event_line(kind, &render(obj, &self.info)),
        }
    }

    /// The protobuf frame of an object event: from the object's cached
    /// message, or, while a fault is queued, from the spoiled JSON line
    /// (empty when that does not convert: the event is dropped).
    fn frame_of(&self, kind: &str, obj: &StoredObject) -> Bytes {
        if self.srv.faults.pending_watch_event_faults() > 0 {
            let line = event_line(kind, &render(obj, &self.info));
            let line = self.srv.faults.spoil_watch_line(line);
            return crate::codec::line_as_frame(&line).unwrap_or_default();
        }
        crate::codec::protobuf_watch_event(kind, obj, &self.info).unwrap_or_default()
    }

    /// A JSON line (bookmark, error) in this watch's encoding.
    fn encoded(&self, line: Bytes) -> Bytes {
        if self.protobuf {
            crate::codec::line_as_frame(&line).unwrap_or_default()
        } else {
            line
        }
    }

    fn error(&self, e: &ApiError) -> Bytes {
        self.encoded(error_line(e))
    }

    fn bookmark(&self, rev: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rev.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta});
        self.encoded(Bytes::from(format!(
            "{{\"type\":\"BOOKMARK\",\"object\":{obj}}}\n"
        )))
    }

    /// Translate a storage event for this watcher's selection.
    async fn translate(&self, ev: &Event) -> Option<Result<Bytes, ApiError>> {
        let now = self.filter.matches(&self.info, &ev.object.value);
        let before = ev
            .prev
            .as_ref()
            .is_some_and(|p| self.filter.matches(&self.info, &p.value));
        let kind = match ev.kind {
            EventType::Added if now => "ADDED",
            EventType::Deleted if before || now => "DELETED",
            EventType::Modified if before && now => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            _ => return None,
        };
        Some(self.line(kind, &ev.object, Some(ev)).await)
    }

    async fn deliver(&mut self, ev: &Event) -> bool {
        if ev.rev <= self.last {
            return true;
        }
        self.last = ev.rev;
        match self.translate(ev).await {
            Some(Ok(line)) => self.send(line).await,
            Some(Err(e)) => {
                self.send(self.error(&e)).await;
                false
            }
            None => true,
        }
    }

    async fn run(
        mut self,
        ctx: RunCtx,
        initial: Vec<Arc<StoredObject>>,
        backlog: Vec<Arc<Event>>,
        mut rx: broadcast::Receiver<Arc<Event>>,
        start_rev: u64,
    ) {
        if ctx.send_initial {
            for obj in &initial {
                if !self.filter.matches(&self.info, &obj.value) {
                    continue;
                }
                let line = match self.line("ADDED", obj, None).await {
                    Ok(l) => l,
                    Err(e) => {
                        self.send(self.error(&e)).await;
                        return;
                    }
                };
                if !self.send(line).await {
                    return;
                }
            }
        }
        if ctx.initial_end_bookmark && !self.send(self.bookmark(start_rev, true)).await {
            return;
        }
        for ev in &backlog {
            if !self.deliver(ev).await {
                return;
            }
        }
        let period = ctx.bookmarks.unwrap_or(Duration::from_secs(3600));
        let mut tick = tokio::time::interval_at(Instant::now() + period, period);
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = self.tx.closed() => return,
                _ = tokio::time::sleep_until(self.deadline) => return,
                r = rx.recv() => match r {
                    Ok(ev) => if !self.deliver(&ev).await { return },
                    // Lagged: this watcher fell too far behind; close it.
                    Err(_) => return,
                },
                _ = tick.tick(), if ctx.bookmarks.is_some() => {
                    let rev = ctx.srv.store.rev();
                    loop {
                        match rx.try_recv() {
                            Ok(ev) => if !self.deliver(&ev).await { return },
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            Err(_) => return,
                        }
                    }
                    let at = rev.max(self.last);
                    self.last = at;
                    if !self.send(self.bookmark(at, false)).await {
                        return;
                    }
                }
            }
        }
    }
}
