//! A cluster that leaves the fleet takes its running reconciles with it: a
//! reconcile hanging in a member (as on a stalled API server) is dropped
//! when the member is disengaged, and the worker it held serves the other
//! members.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::PostParams;
use parking_lot::Mutex;

use super::LONG;
use super::fixture::{fleet_manager, servers};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// Sets its flag when dropped (the reconcile future holding it went).
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Hangs forever in the cluster `stalled`; notes the others' reconciles.
#[derive(Default)]
struct Hang {
    entered: AtomicUsize,
    dropped: Arc<AtomicBool>,
    done: Mutex<Vec<String>>,
}

impl ObjectReconciler<ConfigMap> for Hang {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let cluster = ctx.cluster().to_string();
        if cluster == "stalled" {
            let _flag = DropFlag(Arc::clone(&self.dropped));
            self.entered.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        self.done
            .lock()
            .push(format!("{cluster}/{}", cm.name_any()));
        Ok(Action::done())
    }
}

async fn create(env: &TestEnv, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &cm).await.unwrap();
}

#[tokio::test]
async fn a_disengaged_members_running_reconcile_is_cancelled() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let [own, stalled, healthy] = servers().await;
    let mgr = fleet_manager(&own).await;
    let hang = Arc::new(Hang::default());
    // One worker: while the hanging reconcile holds it, nothing else runs.
    mgr.fleet_controller::<ConfigMap>()
        .named("hang")
        .max_concurrent_reconciles(1)
        .complete(Arc::clone(&hang))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);

    create(&stalled, "stuck").await;
    mgr.fleet().engage("stalled", stalled.client()).unwrap();
    eventually(LONG, "the reconcile in `stalled` hangs", || async {
        (hang.entered.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    assert!(!hang.dropped.load(Ordering::SeqCst));

    assert!(mgr.fleet().disengage("stalled").await);
    eventually(LONG, "the hanging reconcile dropped", || async {
        hang.dropped.load(Ordering::SeqCst).then_some(())
    })
    .await;

    // The only worker is free again: another member is reconciled.
    create(&healthy, "fine").await;
    mgr.fleet().engage("healthy", healthy.client()).unwrap();
    eventually(LONG, "healthy/fine reconciled", || async {
        hang.done
            .lock()
            .iter()
            .any(|d| d == "healthy/fine")
            .then_some(())
    })
    .await;
    assert_eq!(
        hang.entered.load(Ordering::SeqCst),
        1,
        "not retried after it left"
    );
    stop_manager(stop, task).await;
}
