//! A member whose API server restarts, empty or from its data, is
//! reconciled again within 30 s, and meanwhile its health and the fleet's
//! metrics say it is down. Its client is one the providers make
//! (`MemberClientOptions`: kube-client's retry off), so the watch the old
//! informer reopens on the new server ("too large resource version" when
//! empty, 410 when restored) reaches the reflector at once, which relists.

use std::sync::Arc;
use std::time::Duration;

use controller_runtime::cluster::{ClusterHealth, MemberClientOptions};
use controller_runtime::manager::Manager;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::config::Kubeconfig;

use super::fixture::{Seen, create, fleet_manager};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// The bound: reconciled again within this after the restart.
const RECONCILED_AGAIN: Duration = Duration::from_secs(30);

fn port_of(env: &TestEnv) -> u16 {
    let url = env.base_url();
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// Starts a server on `port` once the old one let go of it.
async fn restart(port: u16, data: Option<&std::path::Path>) -> TestEnv {
    eventually(LONG, "the member's server started again", || async {
        let mut builder = TestEnv::builder().port(port);
        if let Some(dir) = data {
            builder = builder.data_dir(dir);
        }
        builder.start().await.ok()
    })
    .await
}

fn ready_metric(mgr: &Manager) -> Option<String> {
    let metrics = mgr.metrics().encode().unwrap();
    metrics
        .lines()
        .find(|l| l.starts_with("controller_runtime_fleet_cluster_ready{cluster=\"member\"}"))
        .map(str::to_string)
}

/// Runs the member through a restart (from `data` if given) and checks the
/// fleet's view and the reconciles on each side of it.
async fn restarted_member_is_reconciled_again(data: Option<std::path::PathBuf>) {
    let own = TestEnv::start().await.unwrap();
    let mut builder = TestEnv::builder();
    if let Some(dir) = &data {
        builder = builder.data_dir(dir);
    }
    let member = builder.start().await.unwrap();
    let port = port_of(&member);
    let mgr = fleet_manager(&own).await;
    let seen = Arc::new(Seen::default());
    mgr.fleet_controller::<ConfigMap>()
        .named("seen")
        .max_concurrent_reconciles(2)
        .complete(Arc::clone(&seen))
        .unwrap();
    mgr.fleet().readyz_threshold(0);
    let (stop, task) = spawn_manager(&mgr);
    let kubeconfig = Kubeconfig::from_yaml(&member.kubeconfig_yaml()).unwrap();
    let client = MemberClientOptions::new()
        .client_from_kubeconfig("member", kubeconfig)
        .await
        .unwrap();
    mgr.fleet().engage("member", client).unwrap();

    // Enough writes that the old server's resource version is well past
    // anything a new, empty one reaches in this test.
    for i in 0..25 {
        create(&member, &format!("before-{i}")).await;
    }
    eventually(LONG, "the member's objects reconciled", || async {
        seen.has("before-24").then_some(())
    })
    .await;

    drop(member);
    eventually(LONG, "the member reported down", || async {
        let failing = matches!(
            mgr.fleet().health("member"),
            Some(ClusterHealth::Failing { .. })
        );
        let unready = mgr.readyz_checks().run_one("fleet clusters");
        (failing
            && matches!(unready, Some(Err(ref m)) if m.contains("member ("))
            && ready_metric(&mgr).is_some_and(|l| l.ends_with(" 0")))
        .then_some(())
    })
    .await;

    let member = restart(port, data.as_deref()).await;
    let restarted = tokio::time::Instant::now();
    create(&member, "after").await;
    eventually(
        RECONCILED_AGAIN,
        "the restarted member reconciled",
        || async { seen.has("after").then_some(()) },
    )
    .await;
    let took = restarted.elapsed();
    assert!(ready(&mgr, "member"), "reported ready again");
    assert_eq!(mgr.readyz_checks().run_one("fleet clusters"), Some(Ok(())));
    assert!(ready_metric(&mgr).is_some_and(|l| l.ends_with(" 1")));
    tracing::info!(?took, "reconciled again after the restart");
    stop_manager(stop, task).await;
    drop(member);
}

#[tokio::test]
async fn a_member_restarted_empty_is_reconciled_again() {
    if envtest::skip_on_existing_cluster("in-process API servers restarted") {
        return;
    }
    restarted_member_is_reconciled_again(None).await;
}

#[tokio::test]
async fn a_member_restarted_from_its_data_is_reconciled_again() {
    if envtest::skip_on_existing_cluster("in-process API servers restarted") {
        return;
    }
    let dir = std::env::temp_dir().join(format!(
        "fleet-restart-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    restarted_member_is_reconciled_again(Some(dir.clone())).await;
    let _ = std::fs::remove_dir_all(dir);
}
