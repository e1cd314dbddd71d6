//! A server that sends more than any real object: an endless watch line,
//! a LIST answer beyond the cap. The lister-watcher stops reading at its
//! [`ReadLimits`], the reflector reports a clean error, counts it and
//! lists again, and the informer works once the server behaves.
//!
//! The server is a few lines of HTTP/1.1 over a `TcpListener` (one request
//! per connection), scripted per request. It refuses a request that carries
//! a body: the lister-watcher's bodies, of a kind the client's retry layer
//! cannot clone, must still go out as none.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions, OversizedPart, ReadLimits};
use informer_core::metrics::InformerMetrics;
use informer_core::reflector::ReflectorError;
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::{Api, Client, Config};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::*;

const NS: &str = "hostile";

/// The caps of these tests: far below the defaults, far above their
/// well-formed answers.
const CAP: usize = 64 << 10;

/// What the server answers to one request.
enum Reply {
    /// 200 with this JSON body and its `Content-Length`.
    Whole(String),
    /// 200 with this JSON body in chunks, no `Content-Length`.
    Chunked(String),
    /// 200, chunked: `x` without end (until the client goes away, at most
    /// 256 MiB), never a newline.
    Endless,
    /// 200, chunked: these watch lines, then nothing until the client
    /// goes away.
    Lines(Vec<String>),
}

/// Which request: the `n`th LIST or the `n`th WATCH (from 0).
#[derive(Debug, Clone, Copy)]
enum Asked {
    List(usize),
    Watch(usize),
}

type Script = Arc<dyn Fn(Asked) -> Reply + Send + Sync>;

/// Serves `script` on a free port until the test ends.
async fn serve(script: Script) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Mutex::new((0usize, 0usize)));
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let script = Arc::clone(&script);
            let counts = Arc::clone(&counts);
            tokio::spawn(async move {
                let _ = answer(sock, &script, &counts).await;
            });
        }
    });
    addr
}

async fn answer(
    mut sock: TcpStream,
    script: &Script,
    counts: &Mutex<(usize, usize)>,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if sock.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if head.contains("transfer-encoding") || head.contains("content-length") {
        // A GET with a body: the lister-watcher's requests must have none.
        let refusal = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        return sock.write_all(refusal.as_bytes()).await;
    }
    let target = head.split_whitespace().nth(1).unwrap_or("/");
    let asked = {
        let mut c = counts.lock();
        if target.contains("watch=true") {
            c.1 += 1;
            Asked::Watch(c.1 - 1)
        } else {
            c.0 += 1;
            Asked::List(c.0 - 1)
        }
    };
    const CHUNKED: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                           transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    match script(asked) {
        Reply::Whole(body) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(body.as_bytes()).await?;
        }
        Reply::Chunked(body) => {
            sock.write_all(CHUNKED.as_bytes()).await?;
            for part in body.as_bytes().chunks(8 << 10) {
                write_chunk(&mut sock, part).await?;
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        Reply::Endless => {
            sock.write_all(CHUNKED.as_bytes()).await?;
            let part = vec![b'x'; 16 << 10];
            for _ in 0..(256 << 20) / part.len() {
                write_chunk(&mut sock, &part).await?;
            }
        }
        Reply::Lines(lines) => {
            sock.write_all(CHUNKED.as_bytes()).await?;
            for line in lines {
                write_chunk(&mut sock, format!("{line}\n").as_bytes()).await?;
            }
            // Open until the client goes away.
            let mut rest = [0u8; 64];
            while sock.read(&mut rest).await? > 0 {}
        }
    }
    sock.flush().await
}

async fn write_chunk(sock: &mut TcpStream, part: &[u8]) -> std::io::Result<()> {
    sock.write_all(format!("{:x}\r\n", part.len()).as_bytes())
        .await?;
    sock.write_all(part).await?;
    sock.write_all(b"\r\n").await
}

fn object(name: &str, rv: u32, padding: usize) -> String {
    format!(
        r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"{NS}","resourceVersion":"{rv}"}},"data":{{"v":"{}"}}}}"#,
        "p".repeat(padding)
    )
}

/// A LIST answer of `names` at resource version `rv`, each object padded
/// with `padding` bytes.
fn list(names: &[&str], rv: u32, padding: usize) -> String {
    let items: Vec<String> = names.iter().map(|n| object(n, rv, padding)).collect();
    format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

fn added(name: &str, rv: u32) -> String {
    format!(r#"{{"type":"ADDED","object":{}}}"#, object(name, rv, 0))
}

/// Counts oversized answers by part.
#[derive(Default)]
struct Oversized(Mutex<Vec<String>>);

impl InformerMetrics for Oversized {
    fn oversized_answer(&self, _informer: &str, part: &str) {
        self.0.lock().push(part.to_owned());
    }
}

/// An error the reflector reported: what went over a cap, if anything, and
/// its message.
type Reported = (Option<OversizedPart>, String);

struct Running {
    informer: SharedIndexInformer<ConfigMap>,
    metrics: Arc<Oversized>,
    errors: Arc<Mutex<Vec<Reported>>>,
}

/// An informer on a client built as users build one, with [`CAP`] caps.
fn informer_on(addr: SocketAddr) -> Running {
    let config = Config::new(format!("http://{addr}").parse().unwrap());
    let client = Client::try_from(config).unwrap();
    let limits = ReadLimits::default()
        .max_event_bytes(CAP)
        .max_page_bytes(CAP);
    let lw = ApiListerWatcher::new(
        Api::<ConfigMap>::namespaced(client, NS),
        ListWatchOptions::default(),
    )
    .protobuf(false)
    .read_limits(limits);
    let metrics = Arc::new(Oversized::default());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&errors);
    let informer = SharedIndexInformer::builder(lw)
        .streaming_list(false)
        .metrics(Arc::clone(&metrics) as Arc<dyn InformerMetrics>)
        .watch_error_handler(Arc::new(move |e: &ReflectorError| {
            let part = e.list_watch_error().and_then(|e| e.oversized());
            sink.lock().push((part, e.to_string()));
        }))
        .build()
        .unwrap();
    Running {
        informer,
        metrics,
        errors,
    }
}

fn cached_names(informer: &SharedIndexInformer<ConfigMap>) -> BTreeSet<String> {
    informer
        .indexer()
        .list()
        .iter()
        .filter_map(|cm| cm.metadata.name.clone())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_watch_line_ends_the_watch_cleanly_and_the_informer_lists_again() {
    let addr = serve(Arc::new(|asked| match asked {
        Asked::List(0) => Reply::Whole(list(&["a"], 10, 0)),
        Asked::List(_) => Reply::Whole(list(&["a", "b"], 20, 0)),
        Asked::Watch(0) => Reply::Endless,
        Asked::Watch(_) => Reply::Lines(vec![added("c", 21)]),
    }))
    .await;
    let run = informer_on(addr);
    let stop = spawn(&run.informer);
    eventually("the informer lists again and watches", || {
        cached_names(&run.informer) == names(&["a", "b", "c"])
    })
    .await;
    assert_eq!(*run.metrics.0.lock(), ["watch_event"]);
    let errors = run.errors.lock().clone();
    let (part, message) = errors
        .iter()
        .find(|(part, _)| part.is_some())
        .unwrap_or_else(|| panic!("no oversized error among {errors:?}"));
    assert_eq!(*part, Some(OversizedPart::WatchEvent));
    assert!(
        message.contains(&format!(
            "a watch event from the API server is larger than the limit of {CAP} bytes"
        )),
        "{message}"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_answer_beyond_the_cap_fails_cleanly_and_the_next_list_syncs() {
    let addr = serve(Arc::new(|asked| match asked {
        // Refused by its Content-Length, then as it arrives.
        Asked::List(0) => Reply::Whole(list(&["big-1", "big-2"], 10, CAP)),
        Asked::List(1) => Reply::Chunked(list(&["big-1", "big-2"], 10, CAP)),
        Asked::List(_) => Reply::Chunked(list(&["a", "b"], 20, 1 << 10)),
        Asked::Watch(_) => Reply::Lines(vec![added("c", 21)]),
    }))
    .await;
    let run = informer_on(addr);
    let stop = spawn(&run.informer);
    run.informer
        .wait_for_cache_sync(LIMIT)
        .await
        .expect("the third list syncs");
    eventually("the watch after the list works", || {
        cached_names(&run.informer) == names(&["a", "b", "c"])
    })
    .await;
    assert_eq!(*run.metrics.0.lock(), ["list_page", "list_page"]);
    let errors = run.errors.lock().clone();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for (part, message) in &errors {
        assert_eq!(*part, Some(OversizedPart::ListPage), "{message}");
        assert!(
            message.contains("a LIST answer from the API server is larger"),
            "{message}"
        );
    }
    stop.cancel();
}
