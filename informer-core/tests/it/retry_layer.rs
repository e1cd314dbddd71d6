//! The reflector, not the client's retry layer, decides what follows a
//! failed list or watch. kube-client's `Client` built from a kubeconfig
//! retries 429, 503 and 504 on its own (`default_retry`, up to 15 times,
//! minutes in all); an informer's requests pass that layer by, so a
//! server that restarts empty (504 "Too large resource version" for the
//! old resource version) is relisted within seconds, as client-go does.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use envtest::{FailureRule, TestEnv};
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::config::{KubeConfigOptions, Kubeconfig};
use kube_client::{Api, Client, Config};

use crate::common::*;

const NS: &str = "restarts";

/// How soon after the new server is up the cache must hold its objects.
const RELIST_WITHIN: Duration = Duration::from_secs(20);

/// A client made the way users make one: a kubeconfig file read into a
/// `Config` (kube-client's retry on), then `Client::try_from`.
async fn client_from_kubeconfig_file(env: &TestEnv) -> Client {
    let path = std::env::temp_dir().join(format!(
        "informer-core-retry-layer-{}-{}.yaml",
        std::process::id(),
        env.base_url().rsplit(':').next().unwrap_or("0")
    ));
    std::fs::write(&path, env.kubeconfig_yaml()).unwrap();
    let kubeconfig = Kubeconfig::read_from(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    assert!(
        config.default_retry,
        "kube-client's retry is on, as for users"
    );
    Client::try_from(config).unwrap()
}

/// A new, empty server on `addr`'s port, once the old one has let go of it.
async fn restart_empty(addr: SocketAddr) -> TestEnv {
    let deadline = Instant::now() + LIMIT;
    loop {
        match TestEnv::builder().port(addr.port()).start().await {
            Ok(env) => return env,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, "port not free yet");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no new server on {addr}: {e}"),
        }
    }
}

fn cached_names(informer: &SharedIndexInformer<ConfigMap>) -> BTreeSet<String> {
    informer
        .indexer()
        .list()
        .iter()
        .filter_map(|cm| cm.metadata.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_on_a_kubeconfig_client_relists_soon_after_its_server_restarts_empty() {
    let (old, admin) = env_with(&[NS]).await;
    let addr: SocketAddr = old
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    // Enough writes that the old server's resource version is far past
    // anything the new one reaches in this test.
    create_many(&Api::namespaced(admin, NS), "old", 40).await;
    let client = client_from_kubeconfig_file(&old).await;
    let informer = SharedIndexInformer::builder(ApiListerWatcher::new(
        Api::<ConfigMap>::namespaced(client, NS),
        ListWatchOptions::default(),
    ))
    .build()
    .unwrap();
    let stop = run_synced(&informer).await;
    eventually("the old objects are cached", || {
        cached_names(&informer).len() == 40
    })
    .await;

    drop(old);
    let new = restart_empty(addr).await;
    let admin = new.client();
    create_namespace(&admin, NS).await;
    create_many(&Api::namespaced(admin.clone(), NS), "new", 3).await;
    let expected: BTreeSet<String> = (0..3).map(|i| format!("new-{i:05}")).collect();
    let up = Instant::now();

    // The informer's next watch asks for a resource version the new server
    // has not reached: 504 "Too large resource version", which the
    // client's retry layer would keep from the reflector for minutes.
    let relisted = tokio::time::timeout(RELIST_WITHIN, async {
        while cached_names(&informer) != expected {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        relisted.is_ok(),
        "the cache still held {:?} {:?} after the new server came up",
        cached_names(&informer).len(),
        up.elapsed()
    );
    stop.cancel();
}

/// A 429 and a 503 on the watch reach the reflector at once (counted as
/// its own restarts and relists), rather than being retried by the client
/// behind its back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_and_unavailable_watches_reach_the_reflector() {
    let (env, admin) = env_with(&[NS]).await;
    create(&admin, NS, "a", &[]).await;
    let client = client_from_kubeconfig_file(&env).await;
    let metrics = Counting::new();
    let informer = SharedIndexInformer::builder(ApiListerWatcher::new(
        Api::<ConfigMap>::namespaced(client, NS),
        ListWatchOptions::default(),
    ))
    .metrics(Arc::clone(&metrics) as _)
    .build()
    .unwrap();
    let stop = run_synced(&informer).await;
    set_value(&admin, NS, "a", "1").await;
    eventually("the watch is open", || {
        informer
            .indexer()
            .get_by_key(&format!("{NS}/a"))
            .is_some_and(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("v"))
                    .is_some_and(|v| v == "1")
            })
    })
    .await;

    let watches = env
        .faults()
        .request_log()
        .iter()
        .filter(|r| r.is_watch())
        .count();
    env.faults()
        .fail_next(FailureRule::new(1, 429).watch(true).retry_after(1));
    env.faults().fail_next(FailureRule::new(1, 503).watch(true));
    env.faults().drop_watches();
    eventually("the 429 reached the reflector", || {
        metrics.count("watch_restart:too_many_requests") == 1
    })
    .await;
    eventually("the 503 reached the reflector", || {
        metrics.count("relist:error") == 1
    })
    .await;
    set_value(&admin, NS, "a", "2").await;
    eventually("the informer watches again", || {
        informer
            .indexer()
            .get_by_key(&format!("{NS}/a"))
            .is_some_and(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("v"))
                    .is_some_and(|v| v == "2")
            })
    })
    .await;
    let failed: Vec<u16> = env
        .faults()
        .request_log()
        .iter()
        .filter(|r| r.is_watch())
        .skip(watches)
        .map(|r| r.status)
        .collect();
    assert_eq!(
        &failed[..2],
        [429, 503],
        "each failed once, no retry: {failed:?}"
    );
    stop.cancel();
}
