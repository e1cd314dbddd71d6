//! The two calls a [`Reflector`](crate::reflector::Reflector) makes against
//! the API server: LIST (one page of a collection) and WATCH (a stream of
//! changes from a resource version on).
//!
//! Layer 1: imports only layer 0.
//!
//! [`ListerWatcher`] is the small trait the reflector is written against, so
//! that tests can script the server and other sources can feed an informer.
//! [`ApiListerWatcher`] implements it over a [`kube_client::Api`] for any
//! resource type: k8s-openapi types, custom resources and
//! [`DynamicObject`](kube_core::DynamicObject)s with an
//! [`ApiResource`](kube_core::discovery::ApiResource). The namespace scope
//! comes from the `Api`; label and field selectors from [`ListWatchOptions`].
//!
//! Each call says exactly which resource version semantics it wants
//! ([`ListRequest`], [`WatchRequest`]); errors keep the Kubernetes `Status`
//! (code and reason) so that the reflector can tell "expired" (410) from
//! "too many requests" (429) from everything else. A watch event whose object
//! does not decode as `K` arrives as [`WatchEvent::Undecodable`] rather than
//! ending the stream.
//!
//! [`ApiListerWatcher`]'s requests pass the client's own retry layer by
//! (kube-client's retry of 429, 503 and 504, on in clients built from a
//! kubeconfig), so every answer reaches the reflector, which decides when
//! to try again; and each answer's size is capped ([`ReadLimits`]).
//!
//! Over [`PartialObjectMeta<K>`](kube_core::metadata::PartialObjectMeta) the
//! [`ApiListerWatcher`] reads metadata only ([`metadata`]).

mod api;
mod decode;
mod error;
mod limits;
pub mod metadata;
mod no_retry;
mod page_ahead;
pub mod protobuf;
mod stream;
mod url;

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use futures::stream::BoxStream;

pub use api::ApiListerWatcher;
pub use error::ListWatchError;
pub use limits::{DEFAULT_MAX_ANSWER_BYTES, OversizedPart, ReadLimits};

/// The annotation a streaming list puts on the bookmark that ends the
/// initial events (value `"true"`).
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// What a lister-watcher selects: server-side label and field selectors.
///
/// The namespace scope is a property of the [`kube_client::Api`] the
/// [`ApiListerWatcher`] is built from.
///
/// ```
/// use informer_core::list_watch::ListWatchOptions;
/// let opts = ListWatchOptions::default().labels("app=web").fields("metadata.name!=skip");
/// assert_eq!(opts.label_selector.as_deref(), Some("app=web"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListWatchOptions {
    /// A label selector in the standard string syntax (`a=b,c!=d,e in (x,y)`).
    pub label_selector: Option<String>,
    /// A field selector (`metadata.name=x,metadata.namespace!=y`).
    pub field_selector: Option<String>,
}

impl ListWatchOptions {
    /// Restricts lists and watches to objects whose labels match `selector`.
    #[must_use]
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Restricts lists and watches to objects whose fields match `selector`.
    #[must_use]
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }
}

/// How the server should interpret a request's resource version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// Data at least as new as the resource version.
    NotOlderThan,
    /// Data at exactly the resource version.
    Exact,
}

impl ResourceVersionMatch {
    /// The query parameter value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotOlderThan => "NotOlderThan",
            Self::Exact => "Exact",
        }
    }
}

/// One LIST call: a page size, a continue token and resource version
/// semantics.
///
/// `resource_version` follows the API: `""` means "most recent" (a quorum
/// read, not sent on the wire), `"0"` means "any" (served from the watch
/// cache), anything else "not older than" unless `resource_version_match`
/// says otherwise. A request with a continue token sends no resource version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// Maximum number of items in the page (`limit`); `None` asks for all.
    pub limit: Option<u32>,
    /// The `continue` token of the previous page.
    pub continue_token: Option<String>,
    /// The `resourceVersion` query parameter (`""` = unset).
    pub resource_version: String,
    /// The `resourceVersionMatch` query parameter.
    pub resource_version_match: Option<ResourceVersionMatch>,
}

/// One WATCH call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchRequest {
    /// Watch changes after this resource version (`""` = from now, or, with
    /// `send_initial_events`, a consistent snapshot first).
    pub resource_version: String,
    /// Ask the server to end the watch after this many seconds.
    pub timeout_seconds: Option<u32>,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
    /// Streaming list: `sendInitialEvents=true` with
    /// `resourceVersionMatch=NotOlderThan`; the initial state arrives as
    /// `Added` events ending with a bookmark annotated
    /// [`INITIAL_EVENTS_END_ANNOTATION`].
    pub send_initial_events: bool,
}

/// One page of a LIST answer.
#[derive(Debug, Clone)]
pub struct ListPage<K> {
    /// The objects that decoded.
    pub items: Vec<K>,
    /// The collection's resource version (`metadata.resourceVersion`).
    pub resource_version: String,
    /// The token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// Items that did not decode as `K`; the rest of the page is usable.
    pub undecodable: Vec<DecodeFailure>,
}

impl<K> Default for ListPage<K> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            resource_version: String::new(),
            continue_token: None,
            undecodable: Vec::new(),
        }
    }
}

/// A bookmark: the server's word that the watch has seen everything up to a
/// resource version. It carries no object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bookmark {
    /// The resource version the watch has reached.
    pub resource_version: String,
    /// The bookmark object's annotations.
    pub annotations: BTreeMap<String, String>,
}

impl Bookmark {
    /// Whether this bookmark ends the initial events of a streaming list.
    pub fn is_initial_events_end(&self) -> bool {
        self.annotations
            .get(INITIAL_EVENTS_END_ANNOTATION)
            .is_some_and(|v| v == "true")
    }
}

/// An object (or watch event) that could not be decoded as `K`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeFailure {
    /// The watch event type (`ADDED`, ...) or `LIST` for a list item;
    /// `None` when not even the event envelope could be read.
    pub event_type: Option<String>,
    /// The object's key (`namespace/name` or `name`) when its metadata was readable.
    pub key: Option<String>,
    /// The object's resource version when its metadata was readable.
    pub resource_version: Option<String>,
    /// What the decoder said.
    pub error: String,
}

impl fmt::Display for DecodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "could not decode {} object {}: {}",
            self.event_type.as_deref().unwrap_or("unknown"),
            self.key.as_deref().unwrap_or("<unknown key>"),
            self.error
        )
    }
}

/// One event of a watch stream.
///
/// Server-side `ERROR` events arrive as `Err(ListWatchError::Api { .. })`
/// items of the stream instead, which then ends.
#[derive(Debug, Clone)]
pub enum WatchEvent<K> {
    /// An object was created (or, in a streaming list, is part of the initial state).
    Added(K),
    /// An object changed.
    Modified(K),
    /// An object was deleted; this is its last state.
    Deleted(K),
    /// The watch reached a resource version; no object changed.
    Bookmark(Bookmark),
    /// An event that could not be decoded; the stream goes on.
    Undecodable(DecodeFailure),
}

/// The stream a WATCH call returns.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, ListWatchError>>;

/// Lists and watches one collection of `K`.
///
/// Implementations decide where the collection lives (an API server, a
/// scripted test double); the [`Reflector`](crate::reflector::Reflector)
/// decides which resource versions to ask for.
///
/// ```
/// use futures::future::BoxFuture;
/// use futures::{FutureExt, StreamExt};
/// use informer_core::list_watch::{
///     ListPage, ListRequest, ListWatchError, ListerWatcher, WatchRequest, WatchStream,
/// };
///
/// /// A collection that is always empty and never changes.
/// struct Empty;
///
/// impl ListerWatcher<String> for Empty {
///     fn list(&self, _req: ListRequest) -> BoxFuture<'_, Result<ListPage<String>, ListWatchError>> {
///         async { Ok(ListPage { resource_version: "1".into(), ..ListPage::default() }) }.boxed()
///     }
///     fn watch(&self, _req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<String>, ListWatchError>> {
///         async { Ok(futures::stream::pending().boxed()) }.boxed()
///     }
/// }
/// ```
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Fetches one page of the collection.
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<K>, ListWatchError>>;

    /// Opens a watch. The future fails if the server refuses the watch; the
    /// stream then yields events until the server ends it.
    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<K>, ListWatchError>>;

    /// Whether [`watch`](Self::watch) honours
    /// [`WatchRequest::send_initial_events`] (a streaming list), or refuses
    /// it with an error. An informer left to its default streams its first
    /// list only from a lister-watcher that says so (then falls back to LIST
    /// if the server refuses); [`ApiListerWatcher`] does. Default `false`.
    fn supports_streaming_list(&self) -> bool {
        false
    }

    /// The informer's word, given before it starts, that objects may lose
    /// `metadata.managedFields` as they are decoded: it clears them anyway
    /// and no transform wants to see them first. A lister-watcher that
    /// decodes may skip them (cheaper than clearing them later). Default:
    /// ignored.
    fn drop_managed_fields(&self, drop: bool) {
        let _ = drop;
    }

    /// A short description of what is listed (for logs and metrics).
    fn describe(&self) -> String {
        std::any::type_name::<K>()
            .rsplit("::")
            .next()
            .unwrap_or("unknown")
            .to_owned()
    }
}

impl<K, T: ListerWatcher<K> + ?Sized> ListerWatcher<K> for std::sync::Arc<T> {
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<K>, ListWatchError>> {
        (**self).list(req)
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<K>, ListWatchError>> {
        (**self).watch(req)
    }

    fn supports_streaming_list(&self) -> bool {
        (**self).supports_streaming_list()
    }

    fn drop_managed_fields(&self, drop: bool) {
        (**self).drop_managed_fields(drop)
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}
