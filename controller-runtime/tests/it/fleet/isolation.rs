//! Two members frozen at once (every request to their API servers held,
//! their watches ended) while their reconciles hold every worker: a third
//! member keeps its pace. Once the fleet reports the frozen members
//! `Failing`, their running reconciles let their workers go and their
//! requests wait parked; when they answer again, their requests go on.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use controller_runtime::cluster::ClusterHealth;
use controller_runtime::manager::Manager;
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::PostParams;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::fixture::{fleet_manager, servers};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// The fleet controller's workers: fewer than the frozen members' objects.
const WORKERS: usize = 4;
/// How soon a write to the steady member must be reconciled while the
/// others are frozen: the fleet notices a frozen member within its probe
/// timeout (2 s in `fast_backoff`) and a look, so 15 s is a 5x margin.
const PACE: Duration = Duration::from_secs(15);
const FROZEN: [&str; 2] = ["frozen-a", "frozen-b"];

/// In the frozen members, waits for `hold` to open, then reads the object
/// back from its API server (which hangs while it is frozen).
struct Reader {
    hold: watch::Sender<bool>,
    started: AtomicUsize,
    done: Mutex<Vec<String>>,
}

impl ObjectReconciler<ConfigMap> for Reader {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let cluster = match ctx.cluster() {
            "" => "hub",
            member => member,
        }
        .to_string();
        if FROZEN.contains(&cluster.as_str()) {
            self.started.fetch_add(1, Ordering::SeqCst);
            let mut hold = self.hold.subscribe();
            let _ = hold.wait_for(|open| *open).await;
            ctx.api().get(&cm.name_any()).await?;
        }
        self.done
            .lock()
            .push(format!("{cluster}/{}", cm.name_any()));
        Ok(Action::done())
    }
}

impl Reader {
    fn reconciled(&self, what: &str) -> bool {
        self.done.lock().iter().any(|d| d == what)
    }
}

async fn create(env: &TestEnv, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &cm).await.unwrap();
}

fn failing(mgr: &Manager, name: &str) -> bool {
    matches!(
        mgr.fleet().health(name),
        Some(ClusterHealth::Failing { .. })
    )
}

#[tokio::test]
async fn two_frozen_members_leave_a_third_its_pace() {
    if envtest::skip_on_existing_cluster("several in-process API servers frozen") {
        return;
    }
    let [own, steady, frozen_a, frozen_b] = servers().await;
    let frozen = [frozen_a, frozen_b];
    let mgr = fleet_manager(&own).await;
    let reader = Arc::new(Reader {
        hold: watch::Sender::new(false),
        started: AtomicUsize::new(0),
        done: Mutex::default(),
    });
    mgr.fleet_controller::<ConfigMap>()
        .named("reader")
        .max_concurrent_reconciles(WORKERS)
        .complete(Arc::clone(&reader))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    mgr.fleet().engage("steady", steady.client()).unwrap();
    create(&steady, "before").await;
    eventually(LONG, "steady/before reconciled", || async {
        reader.reconciled("steady/before").then_some(())
    })
    .await;
    for (name, env) in FROZEN.iter().zip(&frozen) {
        for i in 0..WORKERS {
            create(env, &format!("o{i}")).await;
        }
        mgr.fleet().engage(name, env.client()).unwrap();
    }
    // Every worker holds a reconcile of a member about to freeze.
    eventually(
        LONG,
        "the frozen members' reconciles hold every worker",
        || async { (reader.started.load(Ordering::SeqCst) == WORKERS).then_some(()) },
    )
    .await;
    for env in &frozen {
        env.faults().pause();
        env.faults().drop_watches();
    }
    // The held reconciles now hang on their frozen API servers.
    reader.hold.send_replace(true);

    for i in 0..5 {
        let name = format!("during-{i}");
        create(&steady, &name).await;
        let what = format!("steady/{name}");
        eventually(
            PACE,
            &format!("{what} reconciled while two members are frozen"),
            || async { reader.reconciled(&what).then_some(()) },
        )
        .await;
    }
    for name in FROZEN {
        eventually(LONG, &format!("{name} reported failing"), || async {
            failing(&mgr, name).then_some(())
        })
        .await;
    }
    assert!(ready(&mgr, "steady"));

    // The frozen members answer again: their requests (parked meanwhile)
    // and new writes are reconciled.
    for env in &frozen {
        env.faults().resume();
    }
    create(&frozen[0], "after").await;
    eventually(LONG, "the thawed members reconciled", || async {
        let all = (0..WORKERS).all(|i| {
            FROZEN
                .iter()
                .all(|c| reader.reconciled(&format!("{c}/o{i}")))
        });
        (all && reader.reconciled("frozen-a/after")).then_some(())
    })
    .await;
    stop_manager(stop, task).await;
}
