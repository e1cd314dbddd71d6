//! [`ReadLimits`]: how much one answer of the API server may make the
//! client hold, and the buffered reads that keep to it.
//!
//! An API server is only as trusted as whoever chose it (with fleets,
//! whoever wrote a member's kubeconfig); without a cap, one endless watch
//! line or one huge LIST page grows a buffer until the process runs out of
//! memory. The defaults sit far above any real object (etcd refuses
//! objects over 1.5 MiB by default) and any real page.

use bytes::{Bytes, BytesMut};
use http::{Response, header};
use http_body_util::BodyExt;
use kube_client::client::Body;

use super::ListWatchError;

/// The default cap on one watch event and on one LIST page: 64 MiB.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 64 << 20;

/// Caps on what one answer may make an
/// [`ApiListerWatcher`](super::ApiListerWatcher) hold in memory. An answer
/// over a cap ends the call with [`ListWatchError::Oversized`], which the
/// reflector counts
/// ([`InformerMetrics::oversized_answer`](crate::metrics::InformerMetrics::oversized_answer))
/// and handles like any other failed call: it backs off and lists again.
///
/// ```
/// use informer_core::list_watch::ReadLimits;
/// let limits = ReadLimits::default().max_event_bytes(8 << 20).max_page_bytes(256 << 20);
/// assert_eq!(limits.max_event_bytes, 8 << 20);
/// assert_eq!(ReadLimits::default().max_page_bytes, 64 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadLimits {
    /// The most bytes of one watch event: a JSON line without its newline,
    /// or a protobuf frame without its length. Default
    /// [`DEFAULT_MAX_ANSWER_BYTES`].
    pub max_event_bytes: usize,
    /// The most bytes of one LIST answer (one page of a paginated list, or
    /// the whole list when the server does not paginate). Default
    /// [`DEFAULT_MAX_ANSWER_BYTES`].
    pub max_page_bytes: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self {
            max_event_bytes: DEFAULT_MAX_ANSWER_BYTES,
            max_page_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }
}

impl ReadLimits {
    /// Sets [`max_event_bytes`](Self::max_event_bytes).
    #[must_use]
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// Sets [`max_page_bytes`](Self::max_page_bytes).
    #[must_use]
    pub fn max_page_bytes(mut self, bytes: usize) -> Self {
        self.max_page_bytes = bytes;
        self
    }
}

/// What part of an answer went over its [`ReadLimits`] cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OversizedPart {
    /// One watch event (a JSON line or a protobuf frame).
    WatchEvent,
    /// One LIST answer.
    ListPage,
}

impl OversizedPart {
    /// The metric label: `watch_event` or `list_page`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WatchEvent => "watch_event",
            Self::ListPage => "list_page",
        }
    }
}

impl std::fmt::Display for OversizedPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::WatchEvent => "a watch event",
            Self::ListPage => "a LIST answer",
        })
    }
}

/// Why a capped read stopped.
#[derive(Debug)]
pub(super) enum CappedError {
    /// The body is longer than the cap (by its `Content-Length`, or as read).
    Oversized,
    /// Reading the body failed.
    Read(kube_client::Error),
}

/// The whole body of `response`, or [`CappedError::Oversized`] as soon as
/// it is known to be longer than `max` bytes (at once when its
/// `Content-Length` says so; otherwise once that much has arrived, so no
/// more than `max` bytes and one chunk are ever held).
pub(super) async fn collect_capped(
    response: Response<Body>,
    max: usize,
) -> Result<Bytes, CappedError> {
    let announced = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|len| len > max as u64) {
        return Err(CappedError::Oversized);
    }
    let mut body = response.into_body();
    let mut out = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(CappedError::Read)?;
        if let Ok(data) = frame.into_data() {
            if out.len().saturating_add(data.len()) > max {
                return Err(CappedError::Oversized);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

/// [`collect_capped`] for a LIST answer: an oversized body is
/// [`ListWatchError::Oversized`].
pub(super) async fn collect_page(
    response: Response<Body>,
    max: usize,
) -> Result<Bytes, ListWatchError> {
    collect_capped(response, max).await.map_err(|e| match e {
        CappedError::Oversized => ListWatchError::Oversized {
            part: OversizedPart::ListPage,
            limit: max,
        },
        CappedError::Read(e) => ListWatchError::Stream(e),
    })
}
