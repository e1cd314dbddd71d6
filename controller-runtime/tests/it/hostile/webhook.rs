//! Hostile input for the webhook server over real TLS: bodies beyond the
//! cap, truncated, malformed, deeply nested, of the wrong content type, a
//! review of 100,000 items; clients trickling headers or a body, never
//! finishing a handshake, or holding 1,000 connections open; more
//! connections than the cap. Each gets a clear 4xx or its connection is
//! closed on a timeout, a good review is answered right after each, and
//! the process's peak memory stays bounded.
//!
//! Timeouts: the server's are at most 1 s here and every "closed within"
//! bound is 5x the timeout it waits for; an answer that must come is
//! awaited for [`super::LONG`].

use std::time::Duration;

use controller_runtime::tls::ServerLimits;
use controller_runtime::webhook::{WebhookServer, validate_path};
use futures::future::join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{assert_peak_bounded, closed_within, exchange, peak_rss_kib, refused, trickle};
use crate::webhook::{cm, review, rules};
use crate::webhook_client::{Running, start};

/// The timeouts of the servers whose timeouts are under test.
const T: Duration = Duration::from_millis(500);

/// A server validating ConfigMaps (every one without a `mode` is allowed).
async fn server(limits: ServerLimits) -> Running {
    let (v, _) = rules();
    start(|s: WebhookServer| s.validator::<ConfigMap, _>(v).unwrap().limits(limits)).await
}

fn good() -> Value {
    review("CREATE", Some(cm(json!({"mode": "fast"}))), None, false)
}

/// A good review is answered, allowed.
async fn good_review(run: &Running) {
    let (status, body) = run
        .client
        .review(&validate_path::<ConfigMap>(), &good())
        .await;
    assert_eq!(status, 200, "a good review right after: {body}");
    assert_eq!(body["response"]["allowed"], json!(true), "{body}");
}

/// A request head for the validator's path.
fn head(content_type: &str, length: usize) -> Vec<u8> {
    format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n",
        validate_path::<ConfigMap>()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_a_4xx_and_a_good_review_is_answered_after_each() {
    let run = server(ServerLimits::new()).await;
    let path = validate_path::<ConfigMap>();
    good_review(&run).await;
    let before = peak_rss_kib();

    // Beyond the default cap (7 MiB): 8 MiB of a ConfigMap's data.
    let huge = review(
        "CREATE",
        Some(cm(json!({"blob": "x".repeat(8 << 20)}))),
        None,
        false,
    );
    let (status, body) = run.client.review(&path, &huge).await;
    assert_eq!(status, 413, "{body}");
    good_review(&run).await;

    // 100,000 nested arrays, never closed: skipped without recursing (the
    // request is kept as text until its type is checked), a 400.
    let mut deep = String::from("{\"apiVersion\": \"admission.k8s.io/v1\", \"request\": ");
    deep.push_str(&"[".repeat(100_000));
    let (status, body) = run
        .client
        .post(&path, "application/json", deep.into_bytes())
        .await
        .unwrap();
    assert_eq!(status, 400, "{body:?}");
    assert!(
        String::from_utf8_lossy(&body).contains("malformed JSON"),
        "{body:?}"
    );
    good_review(&run).await;

    // 100,000 nested arrays inside the object, where the ConfigMap takes any
    // JSON (a managedFields entry's fieldsV1): decoding it stops at serde's
    // recursion limit, a 400 in the review.
    let mut nested = good();
    nested["request"]["object"]["metadata"]["managedFields"] =
        json!([{"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": "DEEP"}]);
    let nested = serde_json::to_string(&nested).unwrap().replace(
        "\"DEEP\"",
        &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    );
    let (status, body) = run
        .client
        .post(&path, "application/json", nested.into_bytes())
        .await
        .unwrap();
    assert_eq!(status, 200, "{body:?}");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["response"]["status"]["code"], json!(400), "{body}");
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("recursion limit"),
        "{body}"
    );
    good_review(&run).await;

    // Wrong or missing content types, and bytes that are not JSON.
    let good_bytes = serde_json::to_vec(&good()).unwrap();
    for content_type in ["text/plain", "application/yaml", "", "application/json-seq"] {
        let (status, _) = run
            .client
            .post(&path, content_type, good_bytes.clone())
            .await
            .unwrap();
        assert_eq!(status, 415, "content type {content_type:?}");
        good_review(&run).await;
    }
    let (status, _) = run
        .client
        .post(&path, "application/json", vec![0xff, 0x00, 0x16, 0x03])
        .await
        .unwrap();
    assert_eq!(status, 400);
    good_review(&run).await;

    // A review of 100,000 items (2.7 MB): answered, not refused.
    let items: serde_json::Map<String, Value> = (0..100_000)
        .map(|i| (format!("k{i}"), json!("v")))
        .collect();
    let many = review("CREATE", Some(cm(Value::Object(items))), None, false);
    let (status, body) = run.client.review(&path, &many).await;
    assert_eq!(status, 200);
    assert_eq!(body["response"]["allowed"], json!(true));
    good_review(&run).await;

    // A malformed chunked body, and a body cut short by the client closing:
    // a 400 (the body could not be read), or the connection closed.
    let chunked = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n{{}}\r\n"
    );
    let status = exchange(run.client.connect().await.unwrap(), chunked.into_bytes()).await;
    assert!(matches!(status, Some(400) | None), "chunked: {status:?}");
    good_review(&run).await;
    let mut cut = run.client.connect().await.unwrap();
    cut.write_all(&head("application/json", 1000))
        .await
        .unwrap();
    cut.write_all(b"{\"apiVersion\"").await.unwrap();
    cut.shutdown().await.unwrap();
    let status = super::read_status(&mut cut).await;
    assert!(matches!(status, Some(400) | None), "cut short: {status:?}");
    good_review(&run).await;

    assert_eq!(run.metrics.requests(&path, 413), 1);
    assert_peak_bounded("webhook bodies", before);
    run.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_at_their_timeout() {
    let limits = ServerLimits::new()
        .handshake_timeout(T)
        .header_timeout(T)
        .body_timeout(T);
    let run = server(limits).await;
    let addr = run.client.addr();
    good_review(&run).await;
    let bound = 5 * T;

    // Headers trickling a byte every 50 ms: closed at the header timeout.
    let slow_head = format!(
        "POST {} HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
        validate_path::<ConfigMap>()
    );
    let (status, took) = trickle(
        run.client.connect().await.unwrap(),
        slow_head.into_bytes(),
        b'a',
    )
    .await;
    assert!(refused(status), "slow headers: {status:?}");
    assert!(took < bound, "slow headers cut off after {took:?}");
    good_review(&run).await;

    // A body trickling a byte every 50 ms: a 408 at the body timeout.
    let (status, took) = trickle(
        run.client.connect().await.unwrap(),
        head("application/json", 100_000),
        b' ',
    )
    .await;
    assert_eq!(status, Some(408), "slow body");
    assert!(took < bound, "slow body cut off after {took:?}");
    good_review(&run).await;

    // A body announced longer than sent, the connection held: a 408.
    let mut truncated = head("application/json", 1000);
    truncated.extend_from_slice(b"{\"apiVersion\": \"adm");
    let start = tokio::time::Instant::now();
    let status = exchange(run.client.connect().await.unwrap(), truncated).await;
    assert_eq!(status, Some(408), "truncated body");
    assert!(start.elapsed() < bound, "after {:?}", start.elapsed());
    good_review(&run).await;

    // A handshaken connection that never sends a request, a TCP connection
    // that never starts a handshake, and one that stops halfway through
    // its ClientHello: each closed within 5x its timeout.
    let mut idle_tls = run.client.connect().await.unwrap();
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut half_hello = TcpStream::connect(addr).await.unwrap();
    // A handshake record announcing 512 bytes, 4 of them sent.
    half_hello
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
        .await
        .unwrap();
    let (a, b, c) = tokio::join!(
        closed_within(&mut idle_tls, bound),
        closed_within(&mut silent, bound),
        closed_within(&mut half_hello, bound),
    );
    assert!(a, "an idle TLS connection stayed open beyond {bound:?}");
    assert!(b, "a silent TCP connection stayed open beyond {bound:?}");
    assert!(c, "an unfinished handshake stayed open beyond {bound:?}");
    good_review(&run).await;
    run.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_leave_room_for_a_review() {
    // Timeouts far beyond the test: the idle connections stay open.
    let long = ServerLimits::new()
        .handshake_timeout(Duration::from_secs(60))
        .header_timeout(Duration::from_secs(60));
    let run = server(long).await;
    good_review(&run).await;
    let before = peak_rss_kib();

    // 1,000 handshaken TLS connections, idle: a review is still answered.
    // (Each a full handshake: most of this test's time in a debug build.)
    let mut idle = Vec::new();
    for _ in 0..10 {
        let batch = join_all((0..100).map(|_| run.client.connect())).await;
        idle.extend(batch.into_iter().map(Result::unwrap));
    }
    good_review(&run).await;
    drop(idle);

    // 1,000 TCP connections that never start a handshake, on a server
    // timing handshakes out at T: a review is answered while they are
    // open, and every one is closed within 5T.
    let quick = server(ServerLimits::new().handshake_timeout(T)).await;
    let mut silent = Vec::new();
    for _ in 0..1_000 {
        silent.push(TcpStream::connect(quick.client.addr()).await.unwrap());
    }
    good_review(&quick).await;
    let closed = join_all(silent.iter_mut().map(|s| closed_within(s, 5 * T))).await;
    assert_eq!(closed.iter().filter(|c| **c).count(), 1_000);
    good_review(&quick).await;

    assert_peak_bounded("webhook idle connections", before);
    run.stop.cancel();
    quick.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_connection_cap_a_client_waits_for_a_free_slot() {
    let limits = ServerLimits::new()
        .max_connections(4)
        .header_timeout(Duration::from_secs(60));
    let run = server(limits).await;
    let mut held = join_all((0..4).map(|_| run.client.connect()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect::<Vec<_>>();
    // The fifth is not accepted while the four are open: its handshake
    // does not finish (nothing on the server would let it).
    let fifth = run.client.connect();
    tokio::pin!(fifth);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), fifth.as_mut())
            .await
            .is_err(),
        "a fifth connection was accepted beyond the cap of 4"
    );
    // One closes: the fifth is accepted, and a review is answered.
    held.pop();
    let fifth = tokio::time::timeout(super::LONG, fifth).await;
    assert!(matches!(fifth, Ok(Ok(_))), "the fifth connection");
    drop(fifth);
    drop(held);
    good_review(&run).await;
    run.stop.cancel();
}
