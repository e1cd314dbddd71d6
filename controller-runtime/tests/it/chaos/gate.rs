//! A per-replica fault gate in front of a client: partition one replica
//! from the server, freeze its lease writes, or slow its lease reads,
//! while the other replicas talk to the same server normally.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{Method, Request};
use tower::{Layer, Service};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The switches of one replica's gate.
#[derive(Default, Debug)]
pub struct GateState {
    /// Every request fails as if the network were down.
    pub partitioned: AtomicBool,
    /// Lease writes fail (the leader cannot renew).
    pub freeze_lease_writes: AtomicBool,
    /// Lease reads are answered this many ms late (with the state the
    /// server had when it received them).
    pub lease_read_delay_ms: AtomicU64,
}

#[derive(Clone)]
pub struct GateLayer(pub Arc<GateState>);

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;
    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            state: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    state: Arc<GateState>,
}

#[derive(Debug, thiserror::Error)]
#[error("injected: {0}")]
struct Injected(&'static str);

impl<S, B> Service<Request<B>> for Gate<S>
where
    S: Service<Request<B>> + Send,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let lease = req.uri().path().contains("/leases");
        let method = req.method().clone();
        if self.state.partitioned.load(Ordering::SeqCst) {
            return Box::pin(async { Err(Injected("partitioned").into()) });
        }
        if lease && method == Method::PUT && self.state.freeze_lease_writes.load(Ordering::SeqCst) {
            return Box::pin(async { Err(Injected("lease writes frozen").into()) });
        }
        let delay = if lease && method == Method::GET {
            self.state.lease_read_delay_ms.load(Ordering::SeqCst)
        } else {
            0
        };
        let fut = self.inner.call(req);
        Box::pin(async move {
            let answer = fut.await.map_err(Into::into);
            if delay > 0 {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            answer
        })
    }
}
