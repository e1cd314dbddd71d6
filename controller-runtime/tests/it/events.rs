//! The event recorder writing events.k8s.io/v1 Events to a real server.

use std::time::Duration;

use controller_runtime::events::{EventInfo, EventRecorder, EventType, RecorderConfig};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube_client::Api;
use kube_client::api::{ListParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::{config_map, eventually};

async fn events(env: &TestEnv, ns: &str) -> Vec<Event> {
    Api::<Event>::namespaced(env.client(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn events_are_written_and_repeats_become_a_series() {
    let env = TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = cms
        .create(&PostParams::default(), &config_map("default", "web"))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let recorder = EventRecorder::spawn(
        env.client(),
        RecorderConfig::new("example.com/op", "pod-a"),
        cancel.clone(),
    );

    assert!(recorder.publish(
        &cm,
        EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("applied")
    ));
    let first = eventually(Duration::from_secs(10), "the first event", || async {
        events(&env, "default").await.into_iter().next()
    })
    .await;
    assert_eq!(first.reason.as_deref(), Some("Synced"));
    assert_eq!(
        first.reporting_controller.as_deref(),
        Some("example.com/op")
    );
    let regarding = first.regarding.clone().unwrap();
    assert_eq!(regarding.uid, cm.metadata.uid);
    assert_eq!(regarding.kind.as_deref(), Some("ConfigMap"));
    assert!(first.series.is_none());

    for expected in [2, 3] {
        recorder.publish(
            &cm,
            EventInfo::new(EventType::Normal, "Synced", "Reconcile").note("applied"),
        );
        eventually(Duration::from_secs(10), "the series count", || async {
            let evs = events(&env, "default").await;
            assert_eq!(evs.len(), 1, "repeats must not create new Events");
            (evs[0].series.as_ref().map(|s| s.count) == Some(expected)).then_some(())
        })
        .await;
    }
    let folded = events(&env, "default").await.remove(0);
    assert_eq!(folded.metadata.name, first.metadata.name);
    assert!(folded.series.unwrap().last_observed_time.0 >= first.event_time.unwrap().0);

    // A different note is a different event.
    recorder.publish(
        &cm,
        EventInfo::new(EventType::Warning, "Synced", "Reconcile").note("failed to apply"),
    );
    eventually(Duration::from_secs(10), "a second event", || async {
        (events(&env, "default").await.len() == 2).then_some(())
    })
    .await;
    assert_eq!(recorder.dropped(), 0);
    cancel.cancel();
}

#[tokio::test]
async fn cluster_scoped_objects_get_events_in_default() {
    let env = TestEnv::start().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(env.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("team-a".into());
    let ns = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let recorder =
        EventRecorder::spawn(env.client(), RecorderConfig::new("op", "i"), cancel.clone());
    recorder.publish(
        &ns,
        EventInfo::new(EventType::Normal, "Created", "Provision").note("namespace ready"),
    );
    let ev = eventually(Duration::from_secs(10), "the event", || async {
        events(&env, "default").await.into_iter().next()
    })
    .await;
    assert_eq!(ev.regarding.unwrap().name.as_deref(), Some("team-a"));
    assert!(events(&env, "team-a").await.is_empty());
    cancel.cancel();
}
