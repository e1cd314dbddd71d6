//! The objects every scenario works on: ConfigMaps with about 1 KiB of data,
//! created (so the server records managedFields) in a namespace of their own
//! per scenario, and the writes that update them.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_client::{Api, Client};
use kube_core::ObjectMeta;

/// Writes in flight while seeding or updating.
pub const IN_FLIGHT: usize = 32;

/// The name of object `i`.
pub fn name(i: usize) -> String {
    format!("cm-{i:06}")
}

/// ConfigMap `i` of `namespace`: two labels and ~1 KiB of data.
pub fn config_map(namespace: &str, i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name(i)),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([
                ("app".to_string(), format!("app-{}", i % 100)),
                ("round".to_string(), "0".to_string()),
            ])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("index".to_string(), i.to_string()),
            ("payload".to_string(), "x".repeat(1_000)),
        ])),
        ..ConfigMap::default()
    }
}

/// Creates `namespace` and `objects` ConfigMaps in it.
pub async fn seed(
    client: &Client,
    namespace: &str,
    objects: usize,
) -> Result<(), kube_client::Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    stream::iter(0..objects)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(namespace, i))
                    .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// Nanoseconds since the Unix epoch (the write timestamp carried in objects).
pub fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Sets label `round` of objects `0..objects` to `round` and annotation
/// `sent` to the write time (`IN_FLIGHT` writes at once); `count` writes in
/// all, cycling over the objects.
pub async fn bump(
    client: &Client,
    namespace: &str,
    objects: usize,
    count: usize,
    round: u32,
) -> Result<(), kube_client::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let patch = serde_json::json!({"metadata": {
                    "labels": {"round": round.to_string()},
                    "annotations": {"sent": now_nanos().to_string()},
                }});
                api.patch(
                    &name(i % objects.max(1)),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
}

/// The `round` label of `cm` (0 when absent).
pub fn round_of(cm: &ConfigMap) -> u32 {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("round"))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The `sent` annotation of `cm`, in nanoseconds since the epoch.
pub fn sent_of(cm: &ConfigMap) -> Option<u64> {
    cm.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("sent"))
        .and_then(|s| s.parse().ok())
}

/// Waits until a kube-runtime reflector store has seen its first full list,
/// for at most `limit`.
pub async fn kube_store_ready<K>(
    store: &kube_runtime::reflector::Store<K>,
    limit: std::time::Duration,
) -> Result<(), crate::BenchError>
where
    K: kube_runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    match tokio::time::timeout(limit, store.wait_until_ready()).await {
        Ok(Ok(())) => Ok(()),
        other => Err(crate::BenchError(format!(
            "kube-runtime reflector did not sync: {other:?}"
        ))),
    }
}
