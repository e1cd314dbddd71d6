//! envtest throughput benchmark: LIST of many ConfigMaps, watch fan-out of
//! many writes to many watchers (events/s and latency percentiles), and
//! write rates, all through kube-client over real HTTP. Prints a table.
//!
//! `cargo bench -p informer-envtest --bench throughput` runs the full sizes; when run
//! by `cargo test` (no `--bench` argument) it runs tiny sizes as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Sizes {
    objects: usize,
    list_rounds: usize,
    watchers: usize,
    fanout_writes: usize,
    concurrency: usize,
}

fn cm(name: String, payload: String) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name);
    c.metadata.labels = Some(BTreeMap::from([("bench".to_string(), "yes".to_string())]));
    c.data = Some(BTreeMap::from([("t".to_string(), payload)]));
    c
}

async fn make_namespace(env: &TestEnv, name: &str) {
    let api: Api<Namespace> = Api::all(env.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &ns).await.unwrap();
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let mut s = if full {
        Sizes {
            objects: 10_000,
            list_rounds: 10,
            watchers: 100,
            fanout_writes: 10_000,
            concurrency: 16,
        }
    } else {
        Sizes {
            objects: 200,
            list_rounds: 2,
            watchers: 4,
            fanout_writes: 100,
            concurrency: 4,
        }
    };
    // ENVTEST_BENCH_OBJECTS overrides the data-set size (for quick experiments).
    if let Some(n) = std::env::var("ENVTEST_BENCH_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        s.objects = n;
    }
    let mut rows: Vec<(String, String)> = Vec::new();

    // Writes: sequential creates of `objects` ConfigMaps (also the LIST data set).
    let env = TestEnv::builder()
        .history_window(20_000)
        .watch_buffer(s.fanout_writes * 2)
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let t = Instant::now();
    for i in 0..s.objects {
        api.create(
            &PostParams::default(),
            &cm(format!("cm-{i:05}"), "x".repeat(64)),
        )
        .await
        .unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push((
        format!("create, 1 client sequential ({} objects)", s.objects),
        format!("{:.0} writes/s", s.objects as f64 / secs),
    ));

    // Writes with several requests in flight.
    make_namespace(&env, "concurrent").await;
    let capi: Api<ConfigMap> = Api::namespaced(env.client(), "concurrent");
    let t = Instant::now();
    let per = s.objects / s.concurrency;
    let mut tasks = Vec::new();
    for w in 0..s.concurrency {
        let capi = capi.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per {
                capi.create(
                    &PostParams::default(),
                    &cm(format!("w{w}-{i}"), "x".repeat(64)),
                )
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push((
        format!("create, {} concurrent clients", s.concurrency),
        format!("{:.0} writes/s", (per * s.concurrency) as f64 / secs),
    ));

    // LIST of `objects` ConfigMaps in one response.
    let t = Instant::now();
    for _ in 0..s.list_rounds {
        let l = api.list(&ListParams::default()).await.unwrap();
        assert_eq!(l.items.len(), s.objects);
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push((
        format!("LIST {} ConfigMaps (one page, typed decode)", s.objects),
        format!(
            "{:.0} objects/s ({:.1} ms per LIST)",
            (s.objects * s.list_rounds) as f64 / secs,
            secs * 1000.0 / s.list_rounds as f64
        ),
    ));
    // The same LIST as raw bytes (server and transfer, no client decode).
    let t = Instant::now();
    let mut bytes = 0;
    for _ in 0..s.list_rounds {
        let req = http::Request::get("/api/v1/namespaces/default/configmaps")
            .body(Vec::new())
            .unwrap();
        bytes += env.client().request_text(req).await.unwrap().len();
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push((
        format!("LIST {} ConfigMaps (one page, raw bytes)", s.objects),
        format!(
            "{:.0} objects/s ({:.1} ms per LIST, {:.1} MB)",
            (s.objects * s.list_rounds) as f64 / secs,
            secs * 1000.0 / s.list_rounds as f64,
            bytes as f64 / s.list_rounds as f64 / 1e6
        ),
    ));
    // Paginated LIST (limit 500).
    let t = Instant::now();
    for _ in 0..s.list_rounds {
        let mut n = 0;
        let mut lp = ListParams::default().limit(500);
        loop {
            let page = api.list(&lp).await.unwrap();
            n += page.items.len();
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => lp = ListParams::default().limit(500).continue_token(&c),
                None => break,
            }
        }
        assert_eq!(n, s.objects);
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push((
        format!("LIST {} ConfigMaps, pages of 500", s.objects),
        format!("{:.0} objects/s", (s.objects * s.list_rounds) as f64 / secs),
    ));

    // Watch fan-out: `watchers` watches, then `fanout_writes` writes.
    make_namespace(&env, "fanout").await;
    let fapi: Api<ConfigMap> = Api::namespaced(env.client(), "fanout");
    let rv = env.current_revision().to_string();
    let base = Arc::new(Instant::now());
    let mut handles = Vec::new();
    for _ in 0..s.watchers {
        let mut stream = fapi
            .watch(
                &WatchParams::default().disable_bookmarks().timeout(600),
                &rv,
            )
            .await
            .unwrap()
            .boxed();
        let base = base.clone();
        let want = s.fanout_writes;
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(want);
            while lat.len() < want {
                match stream.next().await {
                    Some(Ok(WatchEvent::Added(c))) => {
                        let sent: u64 = c.data.unwrap()["t"].parse().unwrap();
                        let now = base.elapsed().as_micros() as u64;
                        lat.push(now.saturating_sub(sent));
                    }
                    Some(Ok(other)) => panic!("unexpected event {other:?}"),
                    Some(Err(e)) => panic!("watch error {e}"),
                    None => panic!("watch ended after {} events", lat.len()),
                }
            }
            (lat, base.elapsed())
        }));
    }
    let start = base.elapsed();
    for i in 0..s.fanout_writes {
        let sent = base.elapsed().as_micros().to_string();
        fapi.create(&PostParams::default(), &cm(format!("f-{i:05}"), sent))
            .await
            .unwrap();
    }
    let writes_done = base.elapsed();
    let mut all = Vec::with_capacity(s.watchers * s.fanout_writes);
    let mut last = Duration::ZERO;
    for h in handles {
        let (lat, done) = tokio::time::timeout(Duration::from_secs(600), h)
            .await
            .unwrap()
            .unwrap();
        all.extend(lat);
        last = last.max(done);
    }
    all.sort_unstable();
    let total = s.watchers * s.fanout_writes;
    let secs = (last - start).as_secs_f64();
    rows.push((
        format!(
            "watch fan-out: {} writes to {} watchers",
            s.fanout_writes, s.watchers
        ),
        format!(
            "{:.0} events/s delivered ({total} events in {secs:.2} s; writes took {:.2} s)",
            total as f64 / secs,
            (writes_done - start).as_secs_f64()
        ),
    ));
    rows.push((
        "watch fan-out latency (write sent -> event decoded)".into(),
        format!(
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            percentile(&all, 0.50) as f64 / 1000.0,
            percentile(&all, 0.99) as f64 / 1000.0,
            all.last().copied().unwrap_or(0) as f64 / 1000.0
        ),
    ));

    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(10);
    println!(
        "\nenvtest throughput ({} mode, {} CPUs)",
        if full { "bench" } else { "smoke" },
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!("| {:w$} | result |", "measurement");
    println!("|{}|--------|", "-".repeat(w + 2));
    for (k, v) in rows {
        println!("| {k:w$} | {v} |");
    }
}
