//! Watching the certificate Secret: every change another replica makes
//! (a renewal, a CA rotation step) is signalled at once, so that
//! [`super::SecretCerts::run`] reloads within seconds instead of at its
//! next interval check.
//!
//! A watch of the one Secret by name (`fieldSelector=metadata.name=...`,
//! which RBAC authorizes against the Secret's name, so the `watch` rule is
//! narrowed to it like `get` and `update`), resumed from the last
//! `resourceVersion` seen and started afresh when that is gone. A watch
//! that cannot be opened is retried after [`RETRY`]; the interval check
//! still runs meanwhile.
//!
//! Part of the serving certificates ([`crate::tls`]); uses only the client.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube_client::api::{Api, WatchEvent, WatchParams};
use kube_client::core::Resource;
use tokio::sync::mpsc;

/// How long a failed watch waits before it is opened again.
pub(crate) const RETRY: Duration = Duration::from_secs(5);

/// How long one watch request lasts before it is renewed.
const WATCH_SECONDS: u32 = 290;

/// Watches the Secret `name` and sends on `changed` (a signal; one
/// pending is enough) whenever it is created, changed or deleted, until
/// `changed` is closed.
pub(crate) async fn watch(api: Api<Secret>, name: String, changed: mpsc::Sender<()>) {
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_SECONDS);
    let mut version = "0".to_owned();
    while !changed.is_closed() {
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(e) => {
                tracing::debug!(secret = %name, error = %e, "watching the webhook certificate Secret failed; retrying");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(s) | WatchEvent::Modified(s) | WatchEvent::Deleted(s)) => {
                    if let Some(rv) = s.meta().resource_version.clone() {
                        version = rv;
                    }
                    // Full: a reload is pending already.
                    let _ = changed.try_send(());
                }
                Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                Ok(WatchEvent::Error(e)) => {
                    tracing::debug!(secret = %name, error = %e, "the webhook certificate Secret's watch ended; starting afresh");
                    version = "0".to_owned();
                    tokio::time::sleep(RETRY).await;
                    break;
                }
                Err(e) => {
                    tracing::debug!(secret = %name, error = %e, "the webhook certificate Secret's watch failed; resuming");
                    tokio::time::sleep(RETRY).await;
                    break;
                }
            }
        }
    }
}
