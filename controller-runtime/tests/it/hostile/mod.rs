//! Hostile input for the servers a manager runs in a user's process, as
//! envtest's suite does for the API server: the health endpoint
//! (`health`), the webhook server (`webhook`) and the secure metrics
//! endpoint (`metrics`). Each bad request gets a clear 4xx (or the
//! connection is closed on a timeout), memory stays bounded, and a good
//! request is answered right after each. The helpers here speak raw bytes
//! over any stream, plain TCP or TLS.

mod health;
mod metrics;

mod webhook;

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long a test waits for an answer that must come: far beyond every
/// server timeout the suites set (at most 1 s), so no two timers race.
pub const LONG: Duration = Duration::from_secs(20);

/// The peak resident set of this test process (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The bound every suite asserts on the peak resident set of the whole
/// test process (other tests run beside, so it is generous): 2 GiB.
pub const PEAK_RSS_BOUND_KIB: u64 = 2 * 1024 * 1024;

/// Reports the peak before and after a suite and asserts the bound.
pub fn assert_peak_bounded(suite: &str, before: u64) {
    let after = peak_rss_kib();
    eprintln!("hostile {suite}: peak RSS {before} KiB before, {after} KiB after");
    assert!(after < PEAK_RSS_BOUND_KIB, "{suite}: peak RSS {after} KiB");
}

/// A refusal: a 4xx, or the connection closed without an answer.
pub fn refused(status: Option<u16>) -> bool {
    status.is_none_or(|c| (400..500).contains(&c))
}

/// Reads an answer's head and returns its status code; `None` when the
/// connection closed (or failed) without one, or nothing came within
/// [`LONG`].
pub async fn read_status<R: AsyncRead + Unpin>(r: &mut R) -> Option<u16> {
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(LONG, async {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = r.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&buf);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
}

/// Sends `raw` on `stream` while reading the answer (the server may answer,
/// and close, before it has read everything); the status code, as
/// [`read_status`].
pub async fn exchange<S>(stream: S, raw: Vec<u8>) -> Option<u16>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut r, mut w) = tokio::io::split(stream);
    let writer = tokio::spawn(async move {
        let _ = w.write_all(&raw).await;
        let _ = w.flush().await;
        // Keep the write half open until the answer is read.
        w
    });
    let status = read_status(&mut r).await;
    writer.abort();
    status
}

/// Writes `head`, then one byte of `drip` every 50 ms (at most 200 of
/// them, 10 s), while reading; the status code (as [`read_status`]) and how
/// long the server took to answer or close.
pub async fn trickle<S>(stream: S, head: Vec<u8>, drip: u8) -> (Option<u16>, Duration)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut r, mut w) = tokio::io::split(stream);
    let start = tokio::time::Instant::now();
    let writer = tokio::spawn(async move {
        if w.write_all(&head).await.is_err() {
            return;
        }
        for _ in 0..200 {
            if w.write_all(&[drip]).await.is_err() || w.flush().await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let status = read_status(&mut r).await;
    let took = start.elapsed();
    writer.abort();
    (status, took)
}

/// Whether the server closes `r` (end of stream or an error) within
/// `limit`, reading and dropping whatever it sends first.
pub async fn closed_within<R: AsyncRead + Unpin>(r: &mut R, limit: Duration) -> bool {
    tokio::time::timeout(limit, async {
        let mut chunk = [0u8; 1024];
        while let Ok(n) = r.read(&mut chunk).await {
            if n == 0 {
                break;
            }
        }
    })
    .await
    .is_ok()
}
