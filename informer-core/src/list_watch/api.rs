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

use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use http::{Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use kube_client::client::Body;
use kube_client::{Api, Client};
use kube_core::metadata::PartialObjectMeta;
use kube_core::{Resource, Status};
use serde::de::DeserializeOwned;

use super::decode::{decode_event, decode_list_then};
use super::metadata::{JSON, MetadataMode};
use super::page_ahead::PageAhead;
use super::{
    ListPage, ListRequest, ListWatchError, ListWatchOptions, ListerWatcher, ResourceVersionMatch,
    WatchEvent, WatchRequest, WatchStream,
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
    ahead: PageAhead<Result<Bytes, ListWatchError>>,
    /// Metadata only, and whether the server refused it.
    metadata: MetadataMode,
    _kind: PhantomData<fn() -> K>,
}

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
            .finish_non_exhaustive()
    }
}

impl<K: Resource> ApiListerWatcher<K> {
    /// Lists and watches what `api` addresses (all namespaces, one
    /// namespace, or a cluster-scoped collection), filtered by `options`.
    pub fn new(api: Api<K>, options: ListWatchOptions) -> Self {
        let url = api.resource_url().to_owned();
        Self {
            client: api.into_client(),
            url,
            options,
            ahead: PageAhead::default(),
            metadata: MetadataMode::new(K::metadata_api()),
            _kind: PhantomData,
        }
    }

    /// Lists and watches the collection at `url` (as `Api::resource_url`
    /// gives it) through `client`.
    pub(crate) fn at(client: Client, url: String, options: ListWatchOptions) -> Self {
        Self {
            client,
            url,
            options,
            ahead: PageAhead::default(),
            metadata: MetadataMode::new(K::metadata_api()),
            _kind: PhantomData,
        }
    }

    /// Counts a fallback from metadata-only to full objects in `metrics`
    /// ([`InformerMetrics::metadata_fallback`], under this lister-watcher's
    /// [`describe`](ListerWatcher::describe)).
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn InformerMetrics>) -> Self {
        self.metadata.metrics = Some(metrics);
        self
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

impl<T: Resource> ApiListerWatcher<PartialObjectMeta<T>> {
    /// Lists and watches the metadata of what `api` addresses: the
    /// metadata-only form of [`new`](Self::new).
    pub fn metadata(api: Api<T>, options: ListWatchOptions) -> Self {
        let url = api.resource_url().to_owned();
        Self {
            client: api.into_client(),
            url,
            options,
            ahead: PageAhead::default(),
            metadata: MetadataMode::new(true),
            _kind: PhantomData,
        }
    }
}

/// Sends a GET for `url`; an error answer becomes [`ListWatchError::Api`].
async fn get(
    client: &Client,
    url: String,
    accept: &'static str,
) -> Result<Response<Body>, ListWatchError> {
    let request = Request::get(url.as_str())
        .header(header::ACCEPT, accept)
        // One JSON document per line, uncompressed, so events can be split as they come.
        .header(header::ACCEPT_ENCODING, "identity")
        .body(Body::empty())
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

/// One LIST page's whole body.
async fn fetch_list(
    client: Client,
    url: String,
    accept: &'static str,
) -> Result<Bytes, ListWatchError> {
    get(&client, url, accept)
        .await?
        .into_body()
        .collect_bytes()
        .await
        .map_err(ListWatchError::Stream)
}

fn selectors(q: &mut form_urlencoded::Serializer<'_, String>, options: &ListWatchOptions) {
    if let Some(s) = options.label_selector.as_deref().filter(|s| !s.is_empty()) {
        q.append_pair("labelSelector", s);
    }
    if let Some(s) = options.field_selector.as_deref().filter(|s| !s.is_empty()) {
        q.append_pair("fieldSelector", s);
    }
}

/// The URL of one LIST call.
pub(crate) fn list_url(base: &str, options: &ListWatchOptions, req: &ListRequest) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    selectors(&mut q, options);
    if let Some(limit) = req.limit {
        q.append_pair("limit", &limit.to_string());
    }
    match req.continue_token.as_deref() {
        // The server refuses a resource version together with a continue token.
        Some(token) => {
            q.append_pair("continue", token);
        }
        None => {
            if !req.resource_version.is_empty() {
                q.append_pair("resourceVersion", &req.resource_version);
                if let Some(m) = req.resource_version_match {
                    q.append_pair("resourceVersionMatch", m.as_str());
                }
            }
        }
    }
    join(base, q.finish())
}

/// The URL of one WATCH call.
pub(crate) fn watch_url(base: &str, options: &ListWatchOptions, req: &WatchRequest) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("watch", "true");
    selectors(&mut q, options);
    if !req.resource_version.is_empty() {
        q.append_pair("resourceVersion", &req.resource_version);
    }
    if let Some(t) = req.timeout_seconds {
        q.append_pair("timeoutSeconds", &t.to_string());
    }
    if req.allow_bookmarks || req.send_initial_events {
        q.append_pair("allowWatchBookmarks", "true");
    }
    if req.send_initial_events {
        q.append_pair("sendInitialEvents", "true");
        q.append_pair(
            "resourceVersionMatch",
            ResourceVersionMatch::NotOlderThan.as_str(),
        );
    }
    join(base, q.finish())
}

fn join(url: &str, query: String) -> String {
    if query.is_empty() {
        url.to_owned()
    } else {
        format!("{url}?{query}")
    }
}

/// Turns an error answer into [`ListWatchError::Api`], keeping its `Status`
/// (or making one from the code and text when the body is not a `Status`).
async fn error_from_response(response: Response<Body>) -> ListWatchError {
    let code = response.status();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = match response.into_body().collect_bytes().await {
        Ok(body) => body,
        Err(e) => return ListWatchError::Stream(e),
    };
    let status = match serde_json::from_slice::<Status>(&body) {
        Ok(mut status) if status.is_failure() || status.code != 0 => {
            if status.code == 0 {
                status.code = code.as_u16();
            }
            status
        }
        _ => {
            let text = String::from_utf8_lossy(&body);
            let reason = reason_for_code(code);
            Status::failure(text.trim(), reason).with_code(code.as_u16())
        }
    };
    ListWatchError::Api {
        status: Box::new(status),
        retry_after,
    }
}

fn reason_for_code(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

/// Splits a byte stream into newline-terminated lines and decodes each as
/// a watch event. Ends after a server `ERROR` event or a read error.
pub(crate) fn event_stream<K, S>(
    body: S,
) -> impl Stream<Item = Result<WatchEvent<K>, ListWatchError>>
where
    K: DeserializeOwned,
    S: Stream<Item = Result<Bytes, kube_client::Error>> + Unpin,
{
    struct State<S> {
        body: S,
        buf: BytesMut,
        done: bool,
    }
    let state = State {
        body,
        buf: BytesMut::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(pos) = st.buf.iter().position(|b| *b == b'\n') {
                let line = st.buf.split_to(pos + 1);
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                let item = decode_event::<K>(line);
                st.done = item.is_err();
                return Some((item, st));
            }
            match st.body.next().await {
                Some(Ok(chunk)) => st.buf.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(ListWatchError::Stream(e)), st));
                }
                None => {
                    st.done = true;
                    let rest = st.buf.split();
                    let rest = rest.trim_ascii();
                    if rest.is_empty() {
                        return None;
                    }
                    // A last line without its newline: decode it if it is whole.
                    return match serde_json::from_slice::<serde::de::IgnoredAny>(rest) {
                        Ok(_) => Some((decode_event::<K>(rest), st)),
                        Err(_) => None,
                    };
                }
            }
        }
    })
}

impl<K> ListerWatcher<K> for ApiListerWatcher<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListPage<K>, ListWatchError>> {
        async move {
            let url = list_url(&self.url, &self.options, &req);
            let accept = self.metadata.list_accept();
            let ahead = match self.ahead.take(&url) {
                Some(pending) => pending.answer().await,
                None => None,
            };
            let body = match ahead {
                Some(answer) => answer,
                None => fetch_list(self.client.clone(), url.clone(), accept).await,
            };
            let body = match body {
                Err(e) if self.metadata.refused_by(accept, &e, &self.describe()) => {
                    fetch_list(self.client.clone(), url, JSON).await?
                }
                other => other?,
            };
            let accept = self.metadata.list_accept();
            // The continue token comes before the items: ask for the next
            // page while this one's items are decoded.
            off_the_worker(|| {
                decode_list_then::<K>(&body, |token| {
                    let next = ListRequest {
                        continue_token: Some(token.to_owned()),
                        ..req.clone()
                    };
                    let url = list_url(&self.url, &self.options, &next);
                    self.ahead
                        .start(url.clone(), fetch_list(self.client.clone(), url, accept));
                })
            })
        }
        .boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<WatchStream<K>, ListWatchError>> {
        async move {
            // A watch follows a finished list: nothing asked ahead is wanted.
            self.ahead.clear();
            let url = watch_url(&self.url, &self.options, &req);
            let accept = self.metadata.watch_accept();
            let response = match get(&self.client, url.clone(), accept).await {
                Err(e) if self.metadata.refused_by(accept, &e, &self.describe()) => {
                    get(&self.client, url, JSON).await?
                }
                other => other?,
            };
            let body = response.into_body().into_data_stream();
            Ok(event_stream::<K, _>(body).boxed())
        }
        .boxed()
    }

    /// An API server streams lists from Kubernetes 1.27 on (a default
    /// from 1.34) and refuses the request before that, so the reflector
    /// can fall back to LIST.
    fn supports_streaming_list(&self) -> bool {
        true
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

#[cfg(test)]
mod tests;
