//! Turning sharding on for a controller: the membership as a manager
//! runnable, the gate in front of the reconciler, and the shard's readiness.
//!
//! [`complete_sharded`] builds a controller exactly as
//! [`ControllerBuilder::complete`] does, with its reconciler behind a
//! [`ShardGate`]: a request the gate does not admit is not reconciled (it is
//! dropped or parked, see [`assignment`](super::assignment)), and an
//! admitted reconcile is aborted at once if the replica is fenced. The
//! gate's moved-in keys come from the controller's primary cache and go to
//! its workqueue at low priority, as a resync would. The replica's
//! [`Membership`] runs as a manager runnable that does not need leader
//! election (every replica works; do not turn the manager's leader election
//! on for sharded controllers). Each sharded controller adds a readiness
//! check `shard-<controller>`: ready once its replica is a member of a
//! settled epoch.
//!
//! The manager stops controllers before the other runnables, so the
//! membership deletes the shard Lease only after the controllers drained.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::assignment::{Admission, ShardGate};
use super::membership::Membership;
use crate::action::Action;
use crate::cache::Cache;
use crate::controller::{Controller, ControllerBuilder};
use crate::error::BoxError;
use crate::events::EventRecorder;
use crate::healthz::check_fn;
use crate::manager::{Manager, ManagerError, Runnable};
use crate::object::Object;
use crate::reconcile::{CallInfo, IntoReconciler, Reconciler};
use crate::request::Request;
use crate::workqueue::{AddOptions, Priority};

/// A reconciler behind a shard gate.
struct Gated<R> {
    inner: R,
    gate: ShardGate,
}

impl<R: Reconciler> Reconciler for Gated<R> {
    type Error = R::Error;

    async fn reconcile(&self, req: Request, ctx: CallInfo) -> Result<Action, Self::Error> {
        match self.gate.begin(&req) {
            Admission::Reconcile(in_flight) => {
                let fence = self.gate.fence().clone();
                let result = tokio::select! {
                    result = self.inner.reconcile(req, ctx) => result,
                    // Fenced mid-reconcile: stop now (the reconcile
                    // future is dropped), before the lease expires.
                    () = fence.cancelled() => Ok(Action::requeue()),
                };
                drop(in_flight);
                result
            }
            // Another replica's, parked until a handover ends, or
            // fenced: nothing to do here; forget the request.
            Admission::NotMine | Admission::Wait | Admission::Fenced => Ok(Action::done()),
        }
    }
}

/// Marks a reconciler put behind a gate by [`complete_sharded`].
#[derive(Debug)]
pub enum ByShard<M> {
    #[doc(hidden)]
    _Never(std::convert::Infallible, std::marker::PhantomData<M>),
}

struct Sharded<R> {
    reconciler: R,
    gate: ShardGate,
}

impl<K, M: 'static, R: IntoReconciler<K, M>> IntoReconciler<K, ByShard<M>> for Sharded<R> {
    type Reconciler = Gated<R::Reconciler>;

    fn into_reconciler(
        self,
        cache: &Cache,
        client: &kube_client::Client,
        recorder: EventRecorder,
    ) -> Self::Reconciler {
        Gated {
            inner: self.reconciler.into_reconciler(cache, client, recorder),
            gate: self.gate,
        }
    }
}

/// The membership as a runnable on every replica.
struct MembershipRunnable(Membership);

impl Runnable for MembershipRunnable {
    fn name(&self) -> String {
        format!("shard membership {}", self.0.config().ring)
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.0.run(stop).await.map_err(Into::into) })
    }
}

/// Keeps a gate on the membership's view.
struct GateFollower {
    gate: ShardGate,
    membership: Membership,
}

impl Runnable for GateFollower {
    fn name(&self) -> String {
        "shard gate".to_string()
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = self.gate.follow(self.membership.subscribe()) => {}
            }
            Ok(())
        })
    }
}

/// Adds `membership` to `mgr` as a runnable, once.
pub fn install(mgr: &Manager, membership: &Membership) {
    if !membership.mark_installed() {
        mgr.add_runnable(MembershipRunnable(membership.clone()));
    }
}

/// Completes `builder` with `reconciler` behind a shard gate of
/// `membership`; see the [module documentation](self).
///
/// ```no_run
/// use controller_runtime::prelude::*;
/// use controller_runtime::sharding::config::ShardingConfig;
/// use controller_runtime::sharding::controller::complete_sharded;
/// use controller_runtime::sharding::membership::Membership;
/// # struct R;
/// # impl Reconciler for R {
/// #     type Error = std::convert::Infallible;
/// #     async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> { Ok(Action::done()) }
/// # }
/// # async fn demo(mgr: Manager) -> Result<(), Box<dyn std::error::Error>> {
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// let membership = Membership::new(mgr.client(), ShardingConfig::new("default", "configmaps"))?;
/// complete_sharded(&mgr, mgr.controller::<ConfigMap>(), &membership, R)?;
/// mgr.run_until_signal().await?;
/// # Ok(()) }
/// ```
pub fn complete_sharded<K: Object, M: 'static>(
    mgr: &Manager,
    builder: ControllerBuilder<K>,
    membership: &Membership,
    reconciler: impl IntoReconciler<K, M>,
) -> Result<Controller, ManagerError> {
    let gate = ShardGate::new(membership);
    let controller = builder.complete(Sharded {
        reconciler,
        gate: gate.clone(),
    })?;
    let queue = controller.queue().clone();
    gate.set_requeue(move |reqs| {
        for req in reqs {
            queue.add_with(req, AddOptions::new().priority(Priority::LOW));
        }
    });
    let informer = mgr.cache().informer::<K>();
    gate.set_keys(move || {
        informer
            .list()
            .iter()
            .filter_map(|o| Request::from_object(o.as_ref()).ok())
            .collect()
    });
    install(mgr, membership);
    mgr.add_runnable(GateFollower {
        gate: gate.clone(),
        membership: membership.clone(),
    });
    let ready = gate.clone();
    mgr.add_readyz_check(
        format!("shard-{}", controller.name()),
        check_fn(move || {
            if ready.is_ready() {
                Ok(())
            } else {
                Err("not a member of a settled epoch yet".to_string())
            }
        }),
    )?;
    Ok(controller)
}
