//! The protobuf scenario's other figures: the bytes a list of a kind takes
//! on the wire in protobuf and in JSON, and the client CPU per watch
//! event, the writes made by another process (see [`Writer`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::{StreamExt, TryStreamExt, stream};
use http_body_util::BodyExt;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::{ResourceEventHandler, SharedIndexInformer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::{Api, Client};
use kube_core::{Resource, ResourceExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{LIMIT, PAGE, cpu_time};
use crate::{BenchError, fixtures};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The body of one GET of `path` with `accept`.
async fn get(client: &Client, path: &str, accept: &str) -> Result<bytes::Bytes, BenchError> {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(kube_client::client::Body::empty())
        .map_err(BenchError::msg)?;
    let resp = client.send(req).await.map_err(BenchError::msg)?;
    if !resp.status().is_success() {
        return Err(BenchError(format!("GET {path}: {}", resp.status())));
    }
    let body = resp.into_body().collect().await.map_err(BenchError::msg)?;
    Ok(body.to_bytes())
}

/// The continue token of a list page in either encoding.
fn continue_token(body: &[u8], protobuf: bool) -> Result<Option<String>, BenchError> {
    if protobuf {
        let envelope = informer_codec::Envelope::read(body).map_err(BenchError::msg)?;
        let parts = informer_codec::ListParts::read(&envelope).map_err(BenchError::msg)?;
        return Ok(parts.continue_token.filter(|t| !t.is_empty()));
    }
    let v: serde_json::Value = serde_json::from_slice(body).map_err(BenchError::msg)?;
    Ok(v["metadata"]["continue"]
        .as_str()
        .filter(|t| !t.is_empty())
        .map(str::to_string))
}

/// Every list page of `K` in `namespace` (pages of [`PAGE`]), as the
/// server sent them, in protobuf or in JSON.
pub async fn pages<K>(
    client: &Client,
    namespace: &str,
    protobuf: bool,
) -> Result<Vec<bytes::Bytes>, BenchError>
where
    K: Resource<DynamicType = ()>,
{
    let base = K::url_path(&(), Some(namespace));
    let accept = if protobuf {
        PROTOBUF
    } else {
        "application/json"
    };
    let (mut pages, mut token) = (Vec::new(), None::<String>);
    loop {
        let path = match &token {
            Some(t) => format!("{base}?limit={PAGE}&continue={t}"),
            None => format!("{base}?limit={PAGE}"),
        };
        let body = get(client, &path, accept).await?;
        token = continue_token(&body, protobuf)?;
        pages.push(body);
        if token.is_none() {
            return Ok(pages);
        }
    }
}

/// Bytes of `pages` per object.
pub fn bytes_per_object(pages: &[bytes::Bytes], objects: usize) -> f64 {
    pages.iter().map(bytes::Bytes::len).sum::<usize>() as f64 / objects.max(1) as f64
}

/// Changes ConfigMap `i` of `namespace` (a new value of its `round`
/// label), reading the answer as bytes only.
async fn touch(client: &Client, namespace: &str, i: usize, round: usize) -> Result<(), BenchError> {
    let path = format!(
        "{}/{}",
        ConfigMap::url_path(&(), Some(namespace)),
        fixtures::name(i)
    );
    let patch = format!(r#"{{"metadata":{{"labels":{{"round":"{round}"}}}}}}"#);
    let req = http::Request::patch(path)
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(kube_client::client::Body::from(patch.into_bytes()))
        .map_err(BenchError::msg)?;
    let resp = client.send(req).await.map_err(BenchError::msg)?;
    let status = resp.status();
    resp.into_body().collect().await.map_err(BenchError::msg)?;
    if !status.is_success() {
        return Err(BenchError(format!("PATCH ConfigMap {i}: {status}")));
    }
    Ok(())
}

/// Makes `events` changes (ConfigMaps 0.. of `namespace`, a new value
/// `round` of their `round` label), 32 in flight. What the process started
/// by [`Writer`] runs.
pub async fn write_all(
    client: &Client,
    namespace: &str,
    events: usize,
    round: usize,
) -> Result<(), BenchError> {
    stream::iter(0..events)
        .map(|i| touch(client, namespace, i, round))
        .buffer_unordered(fixtures::IN_FLIGHT)
        .try_for_each(|()| async { Ok(()) })
        .await
}

/// The writes of a watch-event measurement, made by another process (this
/// program again, with `--touch`), so that their cost is not counted in
/// the bench process's CPU time.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The server's base URL, as this program was given it.
    pub server: String,
}

impl Writer {
    /// Makes the changes of [`write_all`] from a child process and waits
    /// for it to exit.
    pub(crate) async fn write(
        &self,
        namespace: &str,
        events: usize,
        round: usize,
    ) -> Result<(), BenchError> {
        let exe = std::env::current_exe().map_err(BenchError::msg)?;
        let mut child = std::process::Command::new(exe)
            .args(["--server", &self.server, "--touch"])
            .arg(format!("{namespace}:{events}:{round}"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| BenchError(format!("starting the writer process: {e}")))?;
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .map_err(BenchError::msg)?
            .map_err(BenchError::msg)?;
        if status.success() {
            Ok(())
        } else {
            Err(BenchError(format!("the writer process failed: {status}")))
        }
    }
}

/// Waits until `updates` saw `events` changes.
async fn wait_seen(updates: &Updates, events: usize) -> Result<(), BenchError> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    while updates.seen.load(Ordering::SeqCst) < events {
        let notified = updates.changed.notified();
        if updates.seen.load(Ordering::SeqCst) >= events {
            break;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return Err(BenchError("the watch did not see every change".into()));
        }
    }
    Ok(())
}

/// Counts updates.
#[derive(Default)]
struct Updates {
    seen: AtomicUsize,
    changed: Notify,
}

impl Updates {
    fn one(&self) {
        self.seen.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

struct Counting(Arc<Updates>);

impl ResourceEventHandler<ConfigMap> for Counting {
    fn on_add(&self, _: Arc<ConfigMap>, _: bool) {}
    fn on_update(&self, _: Arc<ConfigMap>, _: Arc<ConfigMap>) {
        self.0.one();
    }
    fn on_delete(&self, _: informer_core::key::ObjectOrTombstone<ConfigMap>) {}
}

/// Which client watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watcher {
    /// informer-rs, reading protobuf (`true`) or JSON.
    Ours(bool),
    /// kube-runtime's watcher and reflector.
    Kube,
    /// The transport alone: the same watch in JSON through the same
    /// client, its bytes read and its events counted by line, nothing
    /// decoded or cached.
    Floor,
}

/// The resourceVersion of the ConfigMap list of `namespace` now.
async fn list_version(client: &Client, namespace: &str) -> Result<String, BenchError> {
    let path = format!("{}?limit=1", ConfigMap::url_path(&(), Some(namespace)));
    let body = get(client, &path, "application/json").await?;
    let v: serde_json::Value = serde_json::from_slice(&body).map_err(BenchError::msg)?;
    v["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| BenchError::msg("the list has no resourceVersion"))
}

/// Watches the ConfigMaps of `namespace` from now on in JSON, counting one
/// update per line of the body; returns once the watch is open.
async fn raw_watch(
    client: &Client,
    namespace: &str,
    updates: Arc<Updates>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, BenchError> {
    let rv = list_version(client, namespace).await?;
    let path = format!(
        "{}?watch=1&resourceVersion={rv}",
        ConfigMap::url_path(&(), Some(namespace))
    );
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, "application/json")
        .body(kube_client::client::Body::empty())
        .map_err(BenchError::msg)?;
    let resp = client.send(req).await.map_err(BenchError::msg)?;
    if !resp.status().is_success() {
        return Err(BenchError(format!("watch: {}", resp.status())));
    }
    let mut body = resp.into_body();
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                frame = body.frame() => match frame {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            for _ in data.iter().filter(|b| **b == b'\n') {
                                updates.one();
                            }
                        }
                    }
                    _ => break,
                },
            }
        }
    }))
}

/// The client CPU per watch event of `watcher`: a synced cache of the
/// ConfigMaps of `namespace` sees `events` changes, made by `writer`'s
/// process; the bench process's CPU time from the first write until the
/// cache saw the last change, divided by `events`.
pub async fn cpu_per_event(
    client: &Client,
    writer: &Writer,
    namespace: &str,
    events: usize,
    round: usize,
    watcher: Watcher,
) -> Result<f64, BenchError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let updates = Arc::new(Updates::default());
    let stop = CancellationToken::new();
    let task = match watcher {
        Watcher::Ours(protobuf) => {
            let lw = ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(protobuf);
            let informer = SharedIndexInformer::builder(lw)
                .streaming_list(false)
                .strip_managed_fields(true)
                .build()
                .map_err(BenchError::msg)?;
            informer
                .add_event_handler(Counting(Arc::clone(&updates)))
                .map_err(BenchError::msg)?;
            let task = tokio::spawn({
                let (informer, stop) = (informer.clone(), stop.clone());
                async move {
                    let _ = informer.run(stop).await;
                }
            });
            informer
                .wait_for_cache_sync(LIMIT)
                .await
                .map_err(BenchError::msg)?;
            task
        }
        Watcher::Kube => {
            use kube_runtime::{WatchStreamExt, reflector, watcher};
            let (store, writer) = reflector::store::<ConfigMap>();
            let task = tokio::spawn({
                let (stop, updates) = (stop.clone(), Arc::clone(&updates));
                async move {
                    let events = watcher(api, watcher::Config::default().page_size(PAGE))
                        .modify(|o| o.managed_fields_mut().clear())
                        .reflect(writer);
                    let mut events = std::pin::pin!(events);
                    loop {
                        tokio::select! {
                            () = stop.cancelled() => break,
                            ev = events.next() => match ev {
                                None => break,
                                Some(Ok(watcher::Event::Apply(_))) => updates.one(),
                                Some(_) => {}
                            },
                        }
                    }
                }
            });
            tokio::time::timeout(LIMIT, store.wait_until_ready())
                .await
                .map_err(BenchError::msg)?
                .map_err(BenchError::msg)?;
            task
        }
        Watcher::Floor => raw_watch(client, namespace, Arc::clone(&updates), stop.clone()).await?,
    };
    let cpu = cpu_time();
    let measured = tokio::try_join!(
        writer.write(namespace, events, round),
        wait_seen(&updates, events)
    )
    .map(|_| cpu_time().saturating_sub(cpu));
    stop.cancel();
    let _ = task.await;
    Ok(measured?.as_secs_f64() * 1e6 / events.max(1) as f64)
}
