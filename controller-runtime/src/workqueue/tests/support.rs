//! Helpers for the workqueue's unit tests.

use std::future::Future;
use std::time::Duration;

/// Awaits `fut`, failing the test if it takes more than a minute. On the
/// paused clock a stuck `get` reaches that minute at once, so a broken rule
/// fails the test instead of hanging it.
pub(crate) async fn soon<F: Future>(fut: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(60), fut).await {
        Ok(out) => out,
        Err(_) => panic!("did not finish within 60 s"),
    }
}
