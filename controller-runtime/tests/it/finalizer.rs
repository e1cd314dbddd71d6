//! The finalizer helper against real deletion-with-finalizers semantics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_runtime::Action;
use controller_runtime::finalizer::{FinalizerError, FinalizerEvent, finalizer};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::{DeleteParams, PostParams};
use kube_core::ResourceExt;

use crate::config_map;

const F: &str = "example.com/cleanup";

#[derive(Default)]
struct Counts {
    applies: AtomicUsize,
    cleanups: AtomicUsize,
}

async fn run(
    api: &Api<ConfigMap>,
    obj: ConfigMap,
    counts: &Counts,
    fail_cleanup: bool,
) -> Result<Action, FinalizerError<std::io::Error>> {
    finalizer(api, F, Arc::new(obj), |event| async move {
        match event {
            FinalizerEvent::Apply(cm) => {
                assert!(
                    cm.finalizers().iter().any(|f| f == F),
                    "apply sees the finalizer in place"
                );
                counts.applies.fetch_add(1, Ordering::SeqCst);
                Ok(Action::requeue_after(Duration::from_secs(300)))
            }
            FinalizerEvent::Cleanup(cm) => {
                assert!(cm.metadata.deletion_timestamp.is_some());
                counts.cleanups.fetch_add(1, Ordering::SeqCst);
                if fail_cleanup {
                    Err(std::io::Error::other("external system down"))
                } else {
                    Ok(Action::done())
                }
            }
        }
    })
    .await
}

#[tokio::test]
async fn add_on_first_reconcile_cleanup_on_delete_then_remove() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = config_map("default", "guarded");
    cm.metadata.finalizers = Some(vec!["someone-else/keep".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    let counts = Counts::default();

    // First reconcile: finalizer added (after the existing one), apply runs.
    let action = run(&api, api.get("guarded").await.unwrap(), &counts, false)
        .await
        .unwrap();
    assert_eq!(action, Action::requeue_after(Duration::from_secs(300)));
    assert_eq!(
        api.get("guarded").await.unwrap().finalizers(),
        ["someone-else/keep", F]
    );
    // Second reconcile: no write, apply again.
    let rv = api.get("guarded").await.unwrap().resource_version();
    run(&api, api.get("guarded").await.unwrap(), &counts, false)
        .await
        .unwrap();
    assert_eq!(api.get("guarded").await.unwrap().resource_version(), rv);
    assert_eq!(counts.applies.load(Ordering::SeqCst), 2);

    // Deletion: the server keeps the object while finalizers remain.
    api.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = api.get("guarded").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // A failing cleanup keeps our finalizer.
    let err = run(&api, deleting.clone(), &counts, true)
        .await
        .unwrap_err();
    assert!(matches!(err, FinalizerError::Cleanup(_)), "{err}");
    assert!(
        api.get("guarded")
            .await
            .unwrap()
            .finalizers()
            .iter()
            .any(|f| f == F)
    );

    // A successful cleanup removes only our finalizer.
    run(&api, api.get("guarded").await.unwrap(), &counts, false)
        .await
        .unwrap();
    assert_eq!(counts.cleanups.load(Ordering::SeqCst), 2);
    assert_eq!(
        api.get("guarded").await.unwrap().finalizers(),
        ["someone-else/keep"]
    );

    // Once the other finalizer goes too, the object is deleted; a reconcile
    // of the last state does nothing.
    let last = api.get("guarded").await.unwrap();
    let mut cleared = last.clone();
    cleared.metadata.finalizers = Some(vec![]);
    api.replace("guarded", &PostParams::default(), &cleared)
        .await
        .unwrap();
    assert!(api.get_opt("guarded").await.unwrap().is_none());
    let before = counts.cleanups.load(Ordering::SeqCst);
    let mut gone = last;
    gone.metadata.finalizers = Some(vec!["someone-else/keep".into()]);
    assert_eq!(
        run(&api, gone, &counts, false).await.unwrap(),
        Action::done()
    );
    assert_eq!(counts.cleanups.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn adding_to_a_stale_object_is_a_retryable_conflict() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let stale = api
        .create(&PostParams::default(), &config_map("default", "raced"))
        .await
        .unwrap();
    let mut changed = stale.clone();
    changed.metadata.labels = Some([("touched".to_string(), "yes".to_string())].into());
    api.replace("raced", &PostParams::default(), &changed)
        .await
        .unwrap();
    let counts = Counts::default();
    let err = run(&api, stale, &counts, false).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(counts.applies.load(Ordering::SeqCst), 0);
    assert!(api.get("raced").await.unwrap().finalizers().is_empty());
    // Retrying with a fresh read succeeds.
    run(&api, api.get("raced").await.unwrap(), &counts, false)
        .await
        .unwrap();
    assert_eq!(api.get("raced").await.unwrap().finalizers(), [F]);
}

#[tokio::test]
async fn removing_after_our_entry_moved_does_not_remove_another() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = config_map("default", "moved");
    cm.metadata.finalizers = Some(vec!["first/x".into(), F.into(), "third/y".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("moved", &DeleteParams::default()).await.unwrap();
    let seen = api.get("moved").await.unwrap();
    // Another controller removes "first/x" after we read the object.
    let mut other = seen.clone();
    other.metadata.finalizers = Some(vec![F.into(), "third/y".into()]);
    api.replace("moved", &PostParams::default(), &other)
        .await
        .unwrap();
    let counts = Counts::default();
    let err = run(&api, seen, &counts, false).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(api.get("moved").await.unwrap().finalizers(), [F, "third/y"]);
}

/// Runs the finalizer flow on `deleting` with a cleanup that first lets
/// `meddle` change the object on the server (another writer racing us).
async fn cleanup_with<M, Fut>(
    api: &Api<ConfigMap>,
    deleting: ConfigMap,
    meddle: M,
) -> Result<Action, FinalizerError<std::io::Error>>
where
    M: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    finalizer(api, F, Arc::new(deleting), |event| async move {
        match event {
            FinalizerEvent::Apply(_) => panic!("the object is being deleted"),
            FinalizerEvent::Cleanup(_) => {
                meddle().await;
                Ok(Action::done())
            }
        }
    })
    .await
}

#[tokio::test]
async fn removal_answered_404_because_the_object_is_gone_is_success() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = config_map("default", "vanishing");
    cm.metadata.finalizers = Some(vec![F.into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("vanishing", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = api.get("vanishing").await.unwrap();

    // While we clean up, someone else clears the finalizers: the object is
    // deleted before our removal write, which gets 404.
    let result = cleanup_with(&api, deleting, || async {
        let mut cleared = api.get("vanishing").await.unwrap();
        cleared.metadata.finalizers = Some(vec![]);
        api.replace("vanishing", &PostParams::default(), &cleared)
            .await
            .unwrap();
        assert!(api.get_opt("vanishing").await.unwrap().is_none());
    })
    .await;
    assert_eq!(result.unwrap(), Action::done());
}

#[tokio::test]
async fn removal_conflict_with_our_finalizer_already_removed_is_success() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = config_map("default", "raced-removal");
    cm.metadata.finalizers = Some(vec![F.into(), "other/keep".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("raced-removal", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = api.get("raced-removal").await.unwrap();

    // Another writer removes our finalizer first: our guarded removal fails
    // its test (the entry at our index is now another), but the finalizer
    // is gone, which is what we wanted.
    let result = cleanup_with(&api, deleting, || async {
        let mut other = api.get("raced-removal").await.unwrap();
        other.metadata.finalizers = Some(vec!["other/keep".into()]);
        api.replace("raced-removal", &PostParams::default(), &other)
            .await
            .unwrap();
    })
    .await;
    assert_eq!(result.unwrap(), Action::done());
    assert_eq!(
        api.get("raced-removal").await.unwrap().finalizers(),
        ["other/keep"]
    );
}
