//! Malformed data from the server: watch events cut in half, not JSON,
//! with unknown fields, with a field of the wrong type, and very large.
//! The informer logs and counts what it cannot decode, keeps watching,
//! and never panics; what it can decode lands in the cache.

use std::sync::Arc;

use envtest::WatchLineFault;
use informer_core::list_watch::{ApiListerWatcher, ListWatchOptions};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;

use crate::common::*;

const NS: &str = "malformed";

fn cached_value(informer: &SharedIndexInformer<ConfigMap>, name: &str) -> Option<String> {
    informer
        .indexer()
        .get_by_key(&format!("{NS}/{name}"))
        .and_then(|cm| cm.data.as_ref().and_then(|d| d.get("v").cloned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_informer_counts_undecodable_events_and_keeps_watching() {
    let (env, client) = env_with(&[NS]).await;
    create(&client, NS, "victim", &[]).await;
    create(&client, NS, "witness", &[]).await;
    let metrics = Counting::new();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let informer =
        // JSON: the faults spoil JSON watch lines (envtest drops a spoiled
        // line from a protobuf stream instead).
        SharedIndexInformer::builder(
            ApiListerWatcher::new(api, ListWatchOptions::default()).protobuf(false),
        )
        .metrics(Arc::clone(&metrics) as _)
            .build()
            .unwrap();
    let stop = run_synced(&informer).await;
    // The watch is open once a first change arrives through it.
    set_value(&client, NS, "witness", "w0").await;
    eventually("the watch is open", || {
        cached_value(&informer, "witness").as_deref() == Some("w0")
    })
    .await;

    let mut round = 0;
    for (fault, decodable) in [
        (WatchLineFault::Truncate, false),
        (WatchLineFault::Corrupt, false),
        (WatchLineFault::TypeMismatch, false),
        (WatchLineFault::UnknownFields, true),
        (WatchLineFault::Oversize(2 << 20), true),
    ] {
        round += 1;
        let failures_before = metrics.count("decode_failure");
        env.faults().spoil_next_watch_event(fault.clone());
        let victim = format!("v{round}");
        set_value(&client, NS, "victim", &victim).await;
        // A later, clean event still arrives: the informer kept watching.
        let witness = format!("w{round}");
        set_value(&client, NS, "witness", &witness).await;
        eventually(&format!("{fault:?}: the next event arrives"), || {
            cached_value(&informer, "witness").as_deref() == Some(witness.as_str())
        })
        .await;
        assert_eq!(
            env.faults().pending_watch_event_faults(),
            0,
            "{fault:?} was applied"
        );
        if decodable {
            assert_eq!(
                cached_value(&informer, "victim").as_deref(),
                Some(victim.as_str()),
                "{fault:?}: a decodable event is applied"
            );
            assert_eq!(
                metrics.count("decode_failure"),
                failures_before,
                "{fault:?}"
            );
        } else {
            assert_eq!(
                metrics.count("decode_failure"),
                failures_before + 1,
                "{fault:?}: counted once"
            );
            assert_ne!(
                cached_value(&informer, "victim").as_deref(),
                Some(victim.as_str()),
                "{fault:?}: the undecodable event was skipped"
            );
        }
    }
    assert!(informer.is_running(), "nothing stopped the informer");
    stop.cancel();
}
