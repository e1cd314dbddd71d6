//! Requests that the client's own retry layer passes on untouched, so
//! that every LIST and WATCH answer reaches the reflector's error handling.
//!
//! A `kube_client::Client` built from a `Config` whose `default_retry` is
//! on (what `Client::try_default`, `Config::infer` and a kubeconfig give)
//! carries a retry layer that sends a request again on 429, 503 and 504,
//! up to 15 times with a backoff growing to minutes. For an informer that
//! hides exactly the answers it must act on: a watch from a resource
//! version a restarted server no longer has gets 504 "Too large resource
//! version", which the layer retried for over six minutes before the
//! reflector saw it and listed again (client-go's reflector relists
//! within seconds); a 429's backoff belongs to the reflector too.
//!
//! That layer (kube-client's `RetryPolicy`) can only send again a request
//! whose body it can clone (`Body::try_clone`): one built from bytes, such
//! as `Body::empty()`. The only body that does not clone is one that wraps
//! another body, and kube-client makes those itself only for answers. So
//! the lister-watcher's requests carry an empty body of that kind, taken
//! from an answer of a local stand-in service (no network): the request
//! is the same on the wire (no body, no `Content-Length`), and no retry
//! layer that clones requests through `Body::try_clone` can send it twice.
//!
//! Not covered: a retry layer of the user's own whose policy builds the
//! repeated request anew instead of cloning it. The user's other requests
//! (reads and writes through `Api`) keep the client's retry.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Empty;
use kube_client::Client;
use kube_client::client::Body;

/// A service that answers every request at once with an empty body.
#[derive(Clone, Copy)]
struct EmptyAnswer;

impl tower::Service<Request<Body>> for EmptyAnswer {
    type Response = Response<Empty<Bytes>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: Request<Body>) -> Self::Future {
        ready(Ok(Response::new(Empty::new())))
    }
}

/// An empty request body that `Body::try_clone` cannot clone.
///
/// Outside a tokio runtime (where neither a client nor its retry layer can
/// run), and should the stand-in fail, it is `Body::empty()`.
pub(super) async fn unretried_body() -> Body {
    if tokio::runtime::Handle::try_current().is_err() {
        return Body::empty();
    }
    // A client over the stand-in: kube-client wraps the answer's body.
    let stand_in = Client::new(EmptyAnswer, "");
    match stand_in.send(Request::new(Body::empty())).await {
        Ok(answer) => answer.into_body(),
        Err(e) => {
            tracing::warn!(error = %e, "could not make an unretried request body");
            Body::empty()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_body_is_empty_and_cannot_be_cloned() {
        let body = unretried_body().await;
        assert!(
            body.try_clone().is_none(),
            "kube-client's retry clones bodies through try_clone"
        );
        assert!(Body::empty().try_clone().is_some(), "what we avoid");
        let bytes = body.collect_bytes().await.unwrap();
        assert!(bytes.is_empty());
    }
}
