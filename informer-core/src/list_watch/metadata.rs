//! Metadata-only lists and watches: what an [`ApiListerWatcher`] over
//! [`PartialObjectMeta<K>`](kube_core::metadata::PartialObjectMeta) asks
//! for, and its fallback when a server refuses.
//!
//! A metadata-only request names the answer it wants in its `Accept`
//! header (`application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`
//! for a LIST, `...;as=PartialObjectMetadata;...` for a WATCH); the server
//! then sends each object's `metadata` alone, so a Secret's `data` never
//! crosses the wire or reaches the cache. A server that cannot answer so
//! (some aggregated API servers) says 406 Not Acceptable: the
//! lister-watcher then asks for full objects from there on, keeps only
//! their metadata as it decodes them (the rest of each object is skipped
//! by the decoder, never stored), and counts the switch
//! ([`InformerMetrics::metadata_fallback`]).
//!
//! [`ApiListerWatcher`]: super::ApiListerWatcher

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::metrics::InformerMetrics;

use super::ListWatchError;

/// `Accept` of a plain JSON request.
pub(super) const JSON: &str = "application/json";

/// `Accept` of a metadata-only LIST.
pub const METADATA_LIST_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// `Accept` of a metadata-only WATCH (each event carries one
/// `PartialObjectMetadata`).
pub const METADATA_WATCH_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// Whether a lister-watcher asks for metadata only, and whether the server
/// refused that.
#[derive(Default)]
pub(super) struct MetadataMode {
    /// The lister-watcher's `K` is a metadata type.
    wanted: bool,
    /// The server answered 406: ask for full objects from now on.
    refused: AtomicBool,
    /// Where the fallback is counted.
    pub(super) metrics: Option<Arc<dyn InformerMetrics>>,
}

impl MetadataMode {
    pub(super) fn new(wanted: bool) -> Self {
        Self {
            wanted,
            ..Self::default()
        }
    }

    /// The same wish, not yet refused (for a clone of the lister-watcher).
    pub(super) fn fresh(&self) -> Self {
        Self {
            wanted: self.wanted,
            refused: AtomicBool::new(false),
            metrics: self.metrics.clone(),
        }
    }

    /// Whether the lister-watcher is for metadata (refused or not).
    pub(super) fn wanted(&self) -> bool {
        self.wanted
    }

    /// Whether requests ask for metadata only (wanted and not refused).
    pub(super) fn active(&self) -> bool {
        self.wanted && !self.refused.load(Ordering::Relaxed)
    }

    /// Whether the server ever refused metadata-only requests.
    pub(super) fn was_refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The `Accept` of a LIST.
    pub(super) fn list_accept(&self) -> &'static str {
        if self.active() {
            METADATA_LIST_ACCEPT
        } else {
            JSON
        }
    }

    /// The `Accept` of a WATCH.
    pub(super) fn watch_accept(&self) -> &'static str {
        if self.active() {
            METADATA_WATCH_ACCEPT
        } else {
            JSON
        }
    }

    /// Whether `err` is the server refusing a metadata-only request (one
    /// sent with `accept`); if so, switches to full objects (once, counted)
    /// and the caller asks again.
    pub(super) fn refused_by(&self, accept: &str, err: &ListWatchError, name: &str) -> bool {
        if !accept.contains("as=PartialObjectMetadata") || err.code() != Some(406) {
            return false;
        }
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                informer = %name,
                error = %err,
                "the server refuses metadata-only requests; reading full objects and keeping their metadata"
            );
            if let Some(metrics) = &self.metrics {
                metrics.metadata_fallback(name);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests;
