//! [`ApiListerWatcher`]: LIST and WATCH over a `kube_client::Api<K>`.
//!
//! Requests go through [`Client::send`] rather than `Api::list`/`Api::watch`
//! so that the reflector's exact parameters reach the server (`limit` with
//! `resourceVersion=0`, which `kube_core::params::ListParams` drops), the
//! `Retry-After` header of a 429 survives, and each list item and watch
//! event is decoded on its own: one object that does not fit `K` is
//! reported, not fatal.
//!
//! Over a metadata type (`K` =
//! [`PartialObjectMeta<T>`](kube_core::metadata::PartialObjectMeta), whose
//! `Resource::metadata_api()` is true) requests ask for metadata only; see
//! [`super::metadata`].
//!
//! For built-in kinds (and metadata-only types) requests ask for protobuf
//! with JSON as the second choice, and fall back to JSON for good where
//! the server refuses; see [`super::protobuf`].
//!
//! Requests bypass the client's own retry layer (see [`super::no_retry`]):
//! the reflector decides what a 410, 429 or 504 leads to. What one answer
//! may make the client hold is capped ([`ReadLimits`]).

use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use http::{Request, Response, header};
use http_body_util::BodyExt;
use kube_client::client::Body;
use kube_client::{Api, Client};
use kube_core::Resource;
use kube_core::metadata::PartialObjectMeta;
use serde::de::DeserializeOwned;

use super::decode::decode_list_then;
use super::error::error_from_response;
use super::limits::{ReadLimits, collect_page};
use super::metadata::MetadataMode;
use super::no_retry::unretried_body;
use super::page_ahead::PageAhead;
use super::protobuf::{
    PROTOBUF, PROTOBUF_ACCEPT, PROTOBUF_METADATA_LIST_ACCEPT, PROTOBUF_METADATA_WATCH_ACCEPT,
    ProtobufMode, Target, is_protobuf,
};
use super::stream::{event_stream, frame_stream};
pub(crate) use super::url::{list_url, watch_url};
use super::{
    ListPage, ListRequest, ListWatchError, ListWatchOptions, ListerWatcher, WatchEvent,
    WatchRequest, WatchStream,
};
use crate::metrics::InformerMetrics;

/// A [`ListerWatcher`] over a [`kube_client::Api`].
///
/// Works for every `K: kube_core::Resource` that deserializes: k8s-openapi
/// types, `#[derive(CustomResource)]` types and
/// [`DynamicObject`](kube_core::DynamicObject)s (build the `Api` with
/// `Api::all_with(client, &api_resource)` or `Api::namespaced_with`).
///
/// ```no_run
/// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_client::{Api, Client};
///
/// # async fn demo(client: Client) {
/// let api: Api<ConfigMap> = Api::namespaced(client, "default");
/// let lw = ApiListerWatcher::new(api, ListWatchOptions::default().labels("app=web"));
/// # let _ = lw;
/// # }
/// ```
///
/// Metadata only: an `Api` of
/// [`PartialObjectMeta<K>`](kube_core::metadata::PartialObjectMeta) (or
/// [`ApiListerWatcher::metadata`]) lists and watches `K`'s collection
/// asking for `PartialObjectMetadata`, falling back to full objects stripped
/// to their metadata where the server refuses (counted in
/// [`InformerMetrics::metadata_fallback`] when [`metrics`](Self::metrics)
/// is set):
///
/// ```no_run
/// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
/// use k8s_openapi::api::core::v1::Secret;
/// use kube_client::core::metadata::PartialObjectMeta;
/// use kube_client::{Api, Client};
///
/// # async fn demo(client: Client) {
/// let lw: ApiListerWatcher<PartialObjectMeta<Secret>> =
///     ApiListerWatcher::metadata(Api::<Secret>::all(client), ListWatchOptions::default());
/// assert!(lw.is_metadata_only());
/// # }
/// ```
pub struct ApiListerWatcher<K> {
    client: Client,
    url: String,
    options: ListWatchOptions,
    /// The next page of the list under way, requested ahead.
    ahead: PageAhead<Fetched>,
    /// Metadata only, and whether the server refused it.
    metadata: MetadataMode,
    /// Protobuf, and whether the lister-watcher gave up on it.
    protobuf: Arc<ProtobufMode>,
    /// Caps on one watch event and one LIST answer.
    limits: ReadLimits,
    _kind: PhantomData<fn() -> K>,
}

/// One LIST answer: the `Accept` it was asked with, and its body and
/// whether that is protobuf.
type Fetched = (&'static str, Result<(Bytes, bool), ListWatchError>);

impl<K> Clone for ApiListerWatcher<K> {
    /// A lister-watcher for the same collection, with no request of its own
    /// under way.
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            url: self.url.clone(),
            options: self.options.clone(),
            ahead: PageAhead::default(),
            metadata: self.metadata.fresh(),
            protobuf: Arc::new(self.protobuf.fresh()),
            limits: self.limits,
            _kind: PhantomData,
        }
    }
}

impl<K> Debug for ApiListerWatcher<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiListerWatcher")
            .field("url", &self.url)
            .field("options", &self.options)
            .field("metadata_only", &self.metadata.active())
            .field("protobuf", &self.protobuf.active())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<K: Resource + DeserializeOwned + 'static> ApiListerWatcher<K> {
    /// Lists and watches what `api` addresses (all namespaces, one
    /// namespace, or a cluster-scoped collection), filtered by `options`.
    pub fn new(api: Api<K>, options: ListWatchOptions) -> Self {
        let url = api.resource_url().to_owned();
        Self::at(api.into_client(), url, options)
    }

    /// Lists and watches the collection at `url` (as `Api::resource_url`
    /// gives it) through `client`.
    pub(crate) fn at(client: Client, url: String, options: ListWatchOptions) -> Self {
        Self::with_mode(client, url, options, K::metadata_api())
    }

    fn with_mode(client: Client, url: String, options: ListWatchOptions, metadata: bool) -> Self {
        Self {
            client,
            url,
            options,
            ahead: PageAhead::default(),
            metadata: MetadataMode::new(metadata),
            // On for every kind that can be read in protobuf (see
            // `ApiListerWatcher::protobuf`).
            protobuf: Arc::new(ProtobufMode::new(Target::<K>::of(metadata).is_some())),
            limits: ReadLimits::default(),
            _kind: PhantomData,
        }
    }

    /// Counts a fallback from metadata-only to full objects
    /// ([`InformerMetrics::metadata_fallback`]) and from protobuf to JSON
    /// ([`InformerMetrics::protobuf_fallback`]) in `metrics`, under this
    /// lister-watcher's [`describe`](ListerWatcher::describe).
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metadata.metrics = Some(Arc::clone(&metrics));
        let mut mode = self.protobuf.fresh();
        mode.metrics = Some(metrics);
        self.protobuf = Arc::new(mode);
        self
    }

    /// Whether to ask for protobuf (default `true`: in the release bench,
    /// the client took about 0.6 × the JSON path's CPU per ConfigMap and
    /// synced 50,000 of them in about 0.66 × the wall-clock time; see
    /// `docs/performance.md`). `false` asks for JSON only. Only built-in kinds'
    /// k8s-openapi types and metadata-only types can be read in protobuf;
    /// for any other `K` (custom resources, dynamic objects) this has no
    /// effect and requests ask for JSON.
    ///
    /// ```no_run
    /// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kube_client::{Api, Client};
    ///
    /// # async fn demo(client: Client) {
    /// let lw = ApiListerWatcher::new(Api::<Pod>::all(client), ListWatchOptions::default());
    /// assert!(lw.uses_protobuf());
    /// let lw = lw.protobuf(false);
    /// assert!(!lw.uses_protobuf());
    /// # }
    /// ```
    #[must_use]
    pub fn protobuf(mut self, enabled: bool) -> Self {
        let mut mode = self.protobuf.fresh();
        mode.set_wanted(enabled && Target::<K>::of(self.metadata.wanted()).is_some());
        self.protobuf = Arc::new(mode);
        self
    }

    /// Caps on what one answer may make the lister-watcher hold: one watch
    /// event and one LIST answer, 64 MiB each by default. An answer over a
    /// cap ends the call with [`ListWatchError::Oversized`]; the reflector
    /// counts it and lists again after a backoff.
    ///
    /// ```no_run
    /// use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions, ReadLimits};
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_client::{Api, Client};
    ///
    /// # async fn demo(client: Client) {
    /// let limits = ReadLimits::default().max_page_bytes(512 << 20);
    /// let lw = ApiListerWatcher::new(Api::<ConfigMap>::all(client), ListWatchOptions::default())
    ///     .read_limits(limits);
    /// assert_eq!(lw.limits(), limits);
    /// # }
    /// ```
    #[must_use]
    pub fn read_limits(mut self, limits: ReadLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The caps in use ([`read_limits`](Self::read_limits)).
    pub fn limits(&self) -> ReadLimits {
        self.limits
    }

    /// Whether requests ask for protobuf: `K` can be read in protobuf, it
    /// is switched on, and the lister-watcher has not fallen back to JSON.
    pub fn uses_protobuf(&self) -> bool {
        self.protobuf.active()
    }

    /// Whether the lister-watcher gave up on protobuf (the server refused
    /// it, answered JSON, or sent a body that did not decode).
    pub fn fell_back_to_json(&self) -> bool {
        self.protobuf.was_refused()
    }

    /// Whether requests ask for metadata only: `K` is a metadata type and
    /// the server has not refused.
    pub fn is_metadata_only(&self) -> bool {
        self.metadata.active()
    }

    /// Whether the server refused metadata-only requests, so that full
    /// objects are read and stripped to their metadata.
    pub fn fell_back_to_full_objects(&self) -> bool {
        self.metadata.was_refused()
    }

    /// The collection path requests go to (for example `/api/v1/namespaces/default/pods`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The selectors in use.
    pub fn options(&self) -> &ListWatchOptions {
        &self.options
    }
}

impl<T: Resource + 'static> ApiListerWatcher<PartialObjectMeta<T>> {
    /// Lists and watches the metadata of what `api` addresses: the
    /// metadata-only form of [`new`](Self::new).
    pub fn metadata(api: Api<T>, options: ListWatchOptions) -> Self {
        let url = api.resource_url().to_owned();
        Self::with_mode(api.into_client(), url, options, true)
    }
}

/// Sends a GET for `url`, past the client's retry layer (see
/// [`super::no_retry`]); an error answer becomes [`ListWatchError::Api`].
async fn get(
    client: &Client,
    url: String,
    accept: &'static str,
) -> Result<Response<Body>, ListWatchError> {
    let request = Request::get(url.as_str())
        .header(header::ACCEPT, accept)
        // One JSON document per line, uncompressed, so events can be split as they come.
        .header(header::ACCEPT_ENCODING, "identity")
        .body(unretried_body().await)
        .map_err(|source| ListWatchError::BuildRequest { url, source })?;
    let response = client
        .send(request)
        .await
        .map_err(ListWatchError::Transport)?;
    if response.status().is_client_error() || response.status().is_server_error() {
        return Err(error_from_response(response).await);
    }
    Ok(response)
}

/// Runs `decode` where it does not hold up this worker's other tasks.
///
/// Decoding a page of 500 objects takes a millisecond or more of CPU. On a
/// multi-threaded runtime the worker hands its queued tasks, among them the
/// request for the next page that `decode` starts, to another thread for
/// that time ([`tokio::task::block_in_place`]); without that, a task just
/// spawned waits in the worker's own slot until the decoding is over, and
/// the next page is not asked for any earlier. Elsewhere `decode` simply runs.
fn off_the_worker<T>(decode: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(decode),
        _ => decode(),
    }
}

/// Whether an answer's `Content-Type` is protobuf.
fn protobuf_answer(response: &Response<Body>) -> bool {
    is_protobuf(
        response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
}

/// One LIST page's whole body (at most `max` bytes), and whether it is
/// protobuf.
async fn fetch_list(client: Client, url: String, accept: &'static str, max: usize) -> Fetched {
    let body = async {
        let response = get(&client, url, accept).await?;
        let protobuf = protobuf_answer(&response);
        let body = collect_page(response, max).await?;
        Ok((body, protobuf))
    };
    (accept, body.await)
}

impl<K> ApiListerWatcher<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// One LIST answer for `url`, asked with the `Accept` of now.
    async fn fetch(&self, url: String) -> Fetched {
        let max = self.limits.max_page_bytes;
        fetch_list(self.client.clone(), url, self.list_accept(), max).await
    }

    /// The `Accept` of a LIST now.
    fn list_accept(&self) -> &'static str {
        match (self.protobuf.active(), self.metadata.active()) {
            (true, true) => PROTOBUF_METADATA_LIST_ACCEPT,
            (true, false) => PROTOBUF_ACCEPT,
            (false, _) => self.metadata.list_accept(),
        }
    }

    /// The `Accept` of a WATCH now.
    fn watch_accept(&self) -> &'static str {
        match (self.protobuf.active(), self.metadata.active()) {
            (true, true) => PROTOBUF_METADATA_WATCH_ACCEPT,
            (true, false) => PROTOBUF_ACCEPT,
            (false, _) => self.metadata.watch_accept(),
        }
    }

    /// Whether `err`, the answer to a request sent with `accept`, is the
    /// server refusing protobuf or metadata-only; if so, the next request
    /// asks for less (each switch once, counted).
    fn refused(&self, accept: &str, err: &ListWatchError) -> bool {
        let name = self.describe();
        self.protobuf.refused_by(accept, err, &name) || self.metadata.refused_by(accept, err, &name)
    }

    /// A LIST answer as a page, the continue token handed on as soon as it
    /// is read (to ask for the next page while this one decodes). `None`
    /// when a protobuf body does not decode: protobuf is given up, and the
    /// caller asks again in JSON.
    fn decode_page(
        &self,
        req: &ListRequest,
        accept: &'static str,
        body: &[u8],
        protobuf: bool,
    ) -> Option<Result<ListPage<K>, ListWatchError>> {
        let next_accept = self.list_accept();
        let ask_ahead = |token: &str| {
            let next = ListRequest {
                continue_token: Some(token.to_owned()),
                ..req.clone()
            };
            let url = list_url(&self.url, &self.options, &next);
            self.ahead.start(
                url.clone(),
                fetch_list(
                    self.client.clone(),
                    url,
                    next_accept,
                    self.limits.max_page_bytes,
                ),
            );
        };
        let target = Target::<K>::of(self.metadata.wanted()).filter(|_| protobuf);
        let mut page = match target {
            Some(target) => {
                let opts = self.protobuf.options();
                let page = off_the_worker(|| {
                    super::protobuf::decode_list_then(body, &target, opts, ask_ahead)
                });
                match page {
                    Ok(page) => Ok(page),
                    Err(e) => {
                        self.ahead.clear();
                        self.protobuf.give_up(&self.describe(), "undecodable", &e);
                        return None;
                    }
                }
            }
            None => {
                if accept.starts_with(PROTOBUF) {
                    self.protobuf.give_up(
                        &self.describe(),
                        "json_answer",
                        &"the list came in JSON",
                    );
                }
                off_the_worker(|| decode_list_then::<K>(body, ask_ahead))
            }
        };
        if let Ok(page) = &mut page {
            self.strip(page.items.iter_mut());
        }
        Some(page)
    }

    /// Drops managed fields from decoded objects when asked (the JSON path;
    /// protobuf drops them before converting).
    fn strip<'a>(&self, objects: impl Iterator<Item = &'a mut K>) {
        if self.protobuf.strips() {
            for o in objects {
                o.meta_mut().managed_fields = None;
            }
        }
    }
}

impl<K> ListerWatcher<K> for ApiListerWatcher<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<K>, ListWatchError>> {
        async move {
            let url = list_url(&self.url, &self.options, &req);
            let ahead = match self.ahead.take(&url) {
                Some(pending) => pending.answer().await,
                None => None,
            };
            let mut fetched = match ahead {
                Some(answer) => answer,
                None => self.fetch(url.clone()).await,
            };
            // At most: protobuf refused, metadata refused, protobuf undecodable.
            for _ in 0..3 {
                let (accept, result) = fetched;
                let (body, protobuf) = match result {
                    Err(e) if self.refused(accept, &e) => {
                        fetched = self.fetch(url.clone()).await;
                        continue;
                    }
                    other => other?,
                };
                if let Some(page) = self.decode_page(&req, accept, &body, protobuf) {
                    return page;
                }
                fetched = self.fetch(url.clone()).await;
            }
            let (accept, result) = fetched;
            let (body, _) = result?;
            self.decode_page(&req, accept, &body, false)
                .unwrap_or_else(|| Ok(ListPage::default()))
        }
        .boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<K>, ListWatchError>> {
        async move {
            // A watch follows a finished list: nothing asked ahead is wanted.
            self.ahead.clear();
            let url = watch_url(&self.url, &self.options, &req);
            let mut accept = self.watch_accept();
            let mut response = get(&self.client, url.clone(), accept).await;
            for _ in 0..2 {
                match &response {
                    Err(e) if self.refused(accept, e) => {
                        accept = self.watch_accept();
                        response = get(&self.client, url.clone(), accept).await;
                    }
                    _ => break,
                }
            }
            let response = response?;
            let protobuf = protobuf_answer(&response);
            let body = response.into_body().into_data_stream();
            let target = Target::<K>::of(self.metadata.wanted()).filter(|_| protobuf);
            match target {
                Some(target) => Ok(frame_stream(
                    body,
                    target,
                    Arc::clone(&self.protobuf),
                    self.describe(),
                    self.limits.max_event_bytes,
                )
                .boxed()),
                None => {
                    if accept.starts_with(PROTOBUF) {
                        self.protobuf.give_up(
                            &self.describe(),
                            "json_answer",
                            &"the watch came in JSON",
                        );
                    }
                    let strip = self.protobuf.strips();
                    Ok(event_stream::<K, _>(body, self.limits.max_event_bytes)
                        .map(move |ev| match ev {
                            Ok(WatchEvent::Added(o)) => Ok(WatchEvent::Added(stripped(o, strip))),
                            Ok(WatchEvent::Modified(o)) => {
                                Ok(WatchEvent::Modified(stripped(o, strip)))
                            }
                            Ok(WatchEvent::Deleted(o)) => {
                                Ok(WatchEvent::Deleted(stripped(o, strip)))
                            }
                            other => other,
                        })
                        .boxed())
                }
            }
        }
        .boxed()
    }

    /// An API server streams lists from Kubernetes 1.27 on (a default
    /// from 1.34) and refuses the request before that, so the reflector
    /// can fall back to LIST.
    fn supports_streaming_list(&self) -> bool {
        true
    }

    /// Clears `managedFields` as objects are decoded; in protobuf before
    /// converting, so that their `fieldsV1` is never parsed.
    fn drop_managed_fields(&self, drop: bool) {
        self.protobuf.set_strip(drop);
    }

    fn describe(&self) -> String {
        let mut out = self.url.clone();
        for (name, sel) in [
            ("labels", &self.options.label_selector),
            ("fields", &self.options.field_selector),
        ] {
            if let Some(sel) = sel.as_deref().filter(|s| !s.is_empty()) {
                out.push_str(&format!(" {name}={sel}"));
            }
        }
        if self.metadata.wanted() {
            out.push_str(" metadata-only");
        }
        out
    }
}

/// `o` without its managed fields when `strip`.
fn stripped<K: Resource>(mut o: K, strip: bool) -> K {
    if strip {
        o.meta_mut().managed_fields = None;
    }
    o
}

#[cfg(test)]
mod tests;
