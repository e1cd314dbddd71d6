//! Members' informers run on every replica, not only the leader's: two
//! managers share a hub Lease and a member; the follower's member cache is
//! synced while it does not lead, and when the leader stops, the new
//! leader reconciles the member without listing it again.

use std::sync::Arc;
use std::time::Duration;

use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::Manager;
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::PostParams;
use parking_lot::Mutex;

use super::{LONG, fast_backoff};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// Notes which replica reconciled which name.
#[derive(Default)]
struct Seen(Mutex<Vec<(&'static str, String)>>);

impl Seen {
    fn has(&self, replica: &str, name: &str) -> bool {
        self.0
            .lock()
            .iter()
            .any(|(r, n)| *r == replica && n == name)
    }

    fn by(&self, replica: &str) -> usize {
        self.0.lock().iter().filter(|(r, _)| *r == replica).count()
    }
}

struct Replica(&'static str, Arc<Seen>);

impl ObjectReconciler<ConfigMap> for Replica {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.1.0.lock().push((self.0, cm.name_any()));
        Ok(Action::done())
    }
}

async fn replica(hub: &TestEnv, member: &TestEnv, id: &'static str, seen: &Arc<Seen>) -> Manager {
    let election = LeaderElectionConfig::new(hub.namespace(), "fleet-warm", id)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(200));
    let mgr = Manager::builder(hub.client())
        .leader_election(election)
        .fleet_backoff(fast_backoff())
        .build()
        .await
        .unwrap();
    // Registered on the fleet: its informer is requested in every member
    // as it is engaged, on every replica.
    mgr.fleet()
        .index_field::<ConfigMap>("metadata.name", |cm| {
            cm.metadata.name.clone().into_iter().collect()
        })
        .unwrap();
    mgr.fleet_controller::<ConfigMap>()
        .named("warm")
        .complete(Replica(id, Arc::clone(seen)))
        .unwrap();
    mgr.fleet().engage("member", member.client()).unwrap();
    mgr
}

async fn create(env: &TestEnv, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &cm).await.unwrap();
}

/// The requests that list the member's ConfigMaps: a LIST, or a watch
/// that starts with the initial state (a streaming list).
fn configmap_lists(member: &TestEnv) -> usize {
    member
        .request_log()
        .iter()
        .filter(|r| r.method.as_str() == "GET" && r.path.contains("configmaps"))
        .filter(|r| !r.is_watch() || r.query.contains("sendInitialEvents=true"))
        .count()
}

#[tokio::test]
async fn a_new_leader_finds_its_members_caches_warm() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let hub = TestEnv::start().await.unwrap();
    let member = TestEnv::start().await.unwrap();
    let seen = Arc::new(Seen::default());
    let a = replica(&hub, &member, "a", &seen).await;
    let (stop_a, run_a) = spawn_manager(&a);
    eventually(LONG, "a leads", || async { a.is_leader().then_some(()) }).await;
    let b = replica(&hub, &member, "b", &seen).await;
    let (stop_b, run_b) = spawn_manager(&b);

    create(&member, "before").await;
    eventually(LONG, "the leader reconciles", || async {
        seen.has("a", "before").then_some(())
    })
    .await;
    // The follower's member cache holds the object, synced, while it does
    // not lead (and reconciles nothing).
    eventually(LONG, "the follower's member cache warm", || async {
        let cluster = b.fleet().get("member")?;
        let informer = cluster.cache().informer::<ConfigMap>();
        (informer.has_synced() && informer.get(Some("default"), "before").is_some()).then_some(())
    })
    .await;
    assert!(!b.is_leader());
    assert_eq!(seen.by("b"), 0, "the follower reconciles nothing");
    let lists = configmap_lists(&member);

    stop_manager(stop_a, run_a).await;
    eventually(LONG, "b leads", || async { b.is_leader().then_some(()) }).await;
    create(&member, "after").await;
    eventually(LONG, "the new leader reconciles", || async {
        (seen.has("b", "before") && seen.has("b", "after")).then_some(())
    })
    .await;
    assert_eq!(
        configmap_lists(&member),
        lists,
        "the new leader listed the member's ConfigMaps again"
    );
    stop_manager(stop_b, run_b).await;
}
