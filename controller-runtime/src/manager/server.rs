//! The manager's HTTP servers (health probes and metrics): bound when the
//! manager is built, so their addresses are known before it runs (port 0
//! picks a free port), served until the manager stops.

use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ManagerError;

/// A bound, not yet serving, listener.
#[derive(Debug)]
pub(crate) struct BoundServer {
    pub(crate) what: &'static str,
    pub(crate) addr: SocketAddr,
    listener: TcpListener,
}

impl BoundServer {
    /// Binds `addr` for the server called `what` (`health` or `metrics`).
    pub(crate) async fn bind(what: &'static str, addr: SocketAddr) -> Result<Self, ManagerError> {
        let bind_err = |source| ManagerError::Bind { what, addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        Ok(BoundServer {
            what,
            addr,
            listener,
        })
    }

    /// Serves `router` until `stop` fires (then finishes open requests).
    pub(crate) fn serve(self, router: Router, stop: CancellationToken) -> JoinHandle<()> {
        let BoundServer {
            what,
            addr,
            listener,
        } = self;
        tokio::spawn(async move {
            tracing::info!(server = what, %addr, "serving");
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(error) = served {
                tracing::error!(server = what, %addr, %error, "server failed");
            }
        })
    }
}
