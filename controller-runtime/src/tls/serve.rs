//! Serving HTTP/1.1 on the TLS listener's connections within
//! [`ServerLimits`]: each connection on its own task under hyper's header
//! timer (axum's own `serve` sets none), all of them finished gracefully
//! when the server stops.
//!
//! Part of [`crate::tls`]: the webhook server and the manager's secure
//! metrics server both serve through it.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::limits::ServerLimits;
use super::listener::TlsListener;

/// Answers HTTP/1.1 with `router` on `listener`'s connections, each within
/// `limits`' header timeout, until `stop` fires; then stops accepting,
/// closes idle connections, lets the requests in flight finish and
/// returns.
pub(crate) async fn serve(
    mut listener: TlsListener,
    router: Router,
    limits: ServerLimits,
    stop: CancellationToken,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let connections = TaskTracker::new();
    loop {
        let (tls, addr) = tokio::select! {
            () = stop.cancelled() => break,
            conn = listener.next() => conn,
        };
        let conn =
            http.serve_connection(TokioIo::new(tls), TowerToHyperService::new(router.clone()));
        let stop = stop.clone();
        connections.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let served = tokio::select! {
                served = conn.as_mut() => served,
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%addr, %error, "connection closed");
            }
        });
    }
    connections.close();
    connections.wait().await;
}
