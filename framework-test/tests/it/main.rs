//! The Foo controller against envtest, with the CRD installed from the
//! derived `Foo::crd()` by `TestEnvBuilder::crds`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// `foo` names a Foo, the sample-controller's kind.
#![allow(clippy::disallowed_names)]

mod foo;

use std::future::Future;
use std::time::Duration;

/// Polls `cond` every 20 ms until it is true; panics naming `what` after
/// `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
