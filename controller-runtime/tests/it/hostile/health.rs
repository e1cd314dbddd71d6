//! Hostile input for the manager's health endpoint, as envtest's hostile
//! suite does for the API server: each bad request gets a clear 4xx (or
//! the connection is closed), the process's memory stays bounded, and a
//! good probe is answered right after each.

use std::net::SocketAddr;

use controller_runtime::manager::Manager;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{assert_peak_bounded, exchange, peak_rss_kib, refused};
use crate::fixture::{spawn_manager, stop_manager};

/// Sends `raw` on a new connection; the status code, `None` when the
/// server closed the connection without one (also a refusal).
async fn send(addr: SocketAddr, raw: &[u8]) -> Option<u16> {
    exchange(TcpStream::connect(addr).await.unwrap(), raw.to_vec()).await
}

async fn good_probe(addr: SocketAddr) {
    let status = send(
        addr,
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, Some(200), "a good probe right after");
}

async fn health_manager() -> (envtest::TestEnv, Manager) {
    let env = envtest::TestEnv::start().await.unwrap();
    let mgr = Manager::builder(env.client())
        .health_addr("127.0.0.1:0".parse().unwrap())
        .build()
        .await
        .unwrap();
    (env, mgr)
}

/// A hostile request: its name, its raw bytes, and the status it must get
/// (`None`: the connection was closed without an answer).
type Case = (&'static str, Vec<u8>, fn(Option<u16>) -> bool);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_a_4xx_and_a_good_probe_is_answered_after_each() {
    let (_env, mgr) = health_manager().await;
    let addr = mgr.health_addr().unwrap();
    let (stop, run) = spawn_manager(&mgr);
    good_probe(addr).await;
    let before = peak_rss_kib();

    let long_name = "x".repeat(100_000);
    let huge_header = format!(
        "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let many_headers: String = (0..10_000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases: [Case; 9] = [
        (
            "unknown path",
            b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
            |s| s == Some(404),
        ),
        (
            "a 100 KB check name",
            format!("GET /healthz/{long_name} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes(),
            refused,
        ),
        (
            "POST",
            b"POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n".to_vec(),
            |s| s == Some(405),
        ),
        ("a 1 MiB header", huge_header.into_bytes(), refused),
        (
            "10,000 headers",
            format!("GET /healthz HTTP/1.1\r\nHost: t\r\n{many_headers}\r\n").into_bytes(),
            refused,
        ),
        (
            "not HTTP",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n".to_vec(),
            refused,
        ),
        ("a bad request line", b"GET\r\n\r\n".to_vec(), refused),
        (
            "a bad escape",
            b"GET /healthz/%ZZ%00 HTTP/1.1\r\nHost: t\r\n\r\n".to_vec(),
            refused,
        ),
        (
            "an exclude list of 5,000 names",
            format!(
                "GET /healthz?{} HTTP/1.1\r\nHost: t\r\n\r\n",
                (0..5_000)
                    .map(|i| format!("exclude=n{i}"))
                    .collect::<Vec<_>>()
                    .join("&")
            )
            .into_bytes(),
            // Answered (unknown excludes only warn), never a 5xx.
            |s| s.is_none_or(|c| c < 500),
        ),
    ];
    for (what, raw, ok) in cases {
        let status = send(addr, &raw).await;
        assert!(ok(status), "{what}: answered {status:?}");
        good_probe(addr).await;
    }

    // A truncated request and a trickle: the server waits for them without
    // holding up anyone else.
    let mut truncated = TcpStream::connect(addr).await.unwrap();
    truncated
        .write_all(b"GET /healthz HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let mut trickle = TcpStream::connect(addr).await.unwrap();
    trickle.write_all(b"G").await.unwrap();
    good_probe(addr).await;

    // Many idle connections: probes are still answered.
    let mut idle = Vec::new();
    for _ in 0..1_000 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    good_probe(addr).await;
    drop(idle);
    drop((truncated, trickle));

    // The peak of the whole test process (other tests run beside this one,
    // so its growth is not this test's alone): reported, and bounded.
    assert_peak_bounded("health", before);
    stop_manager(stop, run).await;
}
