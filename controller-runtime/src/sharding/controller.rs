//! Turning sharding on for a controller: the membership as a manager
//! runnable, the gate in front of the reconciler, and the shard's readiness.
//!
//! [`ShardedExt::sharded`] switches a controller builder to sharding;
//! [`ShardedBuilder::complete`] builds it.
//!
//! **Filter mode**: the controller is built exactly as
//! [`ControllerBuilder::complete`] does, with its reconciler behind a
//! [`ShardGate`]: a request the gate does not admit is not reconciled (it is
//! dropped or parked, see the [handover rule](super#the-handover-rule)), and an
//! admitted reconcile is aborted at once if the replica is fenced. The
//! gate's moved-in keys come from the controller's primary cache and go to
//! its workqueue at low priority, as a resync would. The replica's
//! [`Membership`] runs as a manager runnable that does not need leader
//! election (every replica works; do not turn the manager's leader election
//! on for sharded controllers). Each sharded controller adds a readiness
//! check `shard-<controller>` (both modes): ready while its replica is a
//! member of a settled epoch and not fenced, so not before it joined the
//! ring, and not while a ring change is being settled.
//!
//! **Label mode** ([`ShardMode::Label`](super::config::ShardMode)): the
//! reconciler sits behind a label gate instead (reconcile what is labelled
//! with this shard, acknowledge drains; see [`labels`](super::labels)), and
//! a relabelling loop runs whenever this replica is the ring's sharder.
//! The sharded controller's completion makes the manager's cache of the
//! sharded kind, and of each kind it owns (`owns`, `owns_metadata`,
//! declared before or after `.sharded(..)`: the order does not matter),
//! select this shard's label, merged with the selector the manager was
//! built with for that kind (`ManagerBuilder::cache_options`): both apply.
//! The sharder labels only what that selector and the cache's namespaces
//! select, and keeps each owned object on its controller owner's shard.
//! Kinds the controller only watches are not labelled and stay cached
//! whole. One label-mode controller per ring.
//!
//! The manager stops controllers before the other runnables, so the
//! membership deletes the shard Lease only after the controllers drained.

use std::sync::Arc;

use futures::future::BoxFuture;
use informer_core::factory::is_cluster_scoped;
use kube_client::core::ApiResource;
use tokio_util::sync::CancellationToken;

use super::assignment::{Admission, GateKey, ShardGate};
use super::config::ShardMode;
use super::label_gate::{LabelAdmission, LabelGate};
use super::labeller::{self, KindStarter, OwnerKind};
use super::membership::{Membership, MembershipError};
use super::metrics::{ReassignTimes, ShardMetrics};
use super::wiring;
use crate::action::Action;
use crate::controller::{Controller, ControllerBuilder};
use crate::error::BoxError;
use crate::healthz::check_fn;
use crate::manager::error::BuilderError;
use crate::manager::{Manager, ManagerError, Runnable};
use crate::object::Object;
use crate::reconcile::{CallInfo, IntoReconciler, Reconciler};
use crate::request::Request;
use crate::workqueue::{AddOptions, Priority};

/// A membership that cannot be made (its settings break a rule) is a setup
/// error of the sharded controller.
impl From<MembershipError> for ManagerError {
    fn from(error: MembershipError) -> Self {
        ManagerError::Controller(BuilderError::Membership(Box::new(error)))
    }
}

/// Which gate a sharded reconciler sits behind.
#[derive(Clone)]
enum Gate {
    Ring(ShardGate),
    Label(Arc<LabelGate>),
}

/// A reconciler behind a shard gate.
struct Gated<R> {
    inner: R,
    gate: Gate,
}

/// Runs `reconcile` unless `fence` is cancelled first: fenced
/// mid-reconcile, the reconcile future is dropped at once, before the lease
/// expires.
async fn fenced<E>(
    fence: &CancellationToken,
    reconcile: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E> {
    tokio::select! {
        result = reconcile => result,
        () = fence.cancelled() => Ok(Action::requeue_rate_limited()),
    }
}

/// A reconcile of `key` behind a ring gate: run (fenced) if the gate
/// admits it; a key of another replica's, parked until a handover ends, or
/// fenced has nothing to do here and is forgotten.
pub(super) async fn through_ring_gate<Q: GateKey, E>(
    gate: &ShardGate<Q>,
    key: &Q,
    reconcile: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E> {
    match gate.begin(key) {
        Admission::Reconcile(in_flight) => {
            let result = fenced(gate.fence(), reconcile).await;
            drop(in_flight);
            result
        }
        Admission::NotMine | Admission::Wait | Admission::Fenced => Ok(Action::done()),
    }
}

impl<R: Reconciler> Reconciler for Gated<R> {
    type Error = R::Error;

    async fn reconcile(&self, req: Request, ctx: CallInfo) -> Result<Action, Self::Error> {
        match &self.gate {
            Gate::Ring(gate) => {
                let key = req.clone();
                through_ring_gate(gate, &key, self.inner.reconcile(req, ctx)).await
            }
            Gate::Label(gate) => match gate.begin(&req) {
                LabelAdmission::Reconcile => {
                    fenced(gate.fence(), self.inner.reconcile(req, ctx)).await
                }
                LabelAdmission::Release(resource_version) => {
                    // This worker holds the key: nothing of it is in flight.
                    gate.release(&req, resource_version).await;
                    Ok(Action::done())
                }
                LabelAdmission::NotMine | LabelAdmission::Fenced => Ok(Action::done()),
            },
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
struct GateFollower<Q: GateKey> {
    gate: ShardGate<Q>,
    membership: Membership,
}

impl<Q: GateKey> Runnable for GateFollower<Q> {
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
pub(super) fn install(mgr: &Manager, membership: &Membership) {
    if !membership.mark_installed() {
        mgr.add_runnable(MembershipRunnable(membership.clone()));
    }
}

/// Filter mode's runnables and checks around `gate` (of the controller
/// `controller`): the membership (once per replica), the gate following
/// its view, and the readiness check `shard-<controller>`.
pub(super) fn install_gate<Q: GateKey>(
    mgr: &Manager,
    controller: &str,
    membership: &Membership,
    gate: &ShardGate<Q>,
) -> Result<(), ManagerError> {
    install(mgr, membership);
    mgr.add_runnable(GateFollower {
        gate: gate.clone(),
        membership: membership.clone(),
    });
    let ready = gate.clone();
    mgr.add_readyz_check(
        format!("shard-{controller}"),
        check_fn(move || {
            if ready.is_ready() {
                Ok(())
            } else {
                Err("not a member of a settled epoch yet".to_string())
            }
        }),
    )
}

/// Turns sharding on for a controller builder: `.sharded(&membership)`.
///
/// ```no_run
/// use controller_runtime::prelude::*;
/// use controller_runtime::sharding::config::ShardingConfig;
/// use controller_runtime::sharding::controller::ShardedExt;
/// use controller_runtime::sharding::membership::Membership;
/// # struct R;
/// # impl Reconciler for R {
/// #     type Error = std::convert::Infallible;
/// #     async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> { Ok(Action::done()) }
/// # }
/// # async fn demo(mgr: Manager) -> Result<(), Box<dyn std::error::Error>> {
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// let membership = Membership::new(mgr.client(), ShardingConfig::new("default", "configmaps"))?;
/// mgr.controller::<ConfigMap>().named("cm").sharded(&membership).complete(R)?;
/// mgr.run_until_signal().await?;
/// # Ok(()) }
/// ```
pub trait ShardedExt<K: Object, T = Request> {
    /// This controller's requests are spread over the replicas of
    /// `membership`'s ring (filter or label mode, by its config; a fleet
    /// controller's in filter mode only, see [`super::fleet`]).
    fn sharded(self, membership: &Membership) -> ShardedBuilder<K, T>;
}

impl<K: Object, T> ShardedExt<K, T> for ControllerBuilder<K, T> {
    fn sharded(self, membership: &Membership) -> ShardedBuilder<K, T> {
        ShardedBuilder {
            builder: self,
            membership: membership.clone(),
        }
    }
}

/// The user's selection of the kind `kind` of API `group`: the cache
/// options the manager was built with, without requirements on the ring's
/// shard and drain labels (a manager built with
/// `cache_options::<K>(config.informer_options())` selects its own shard;
/// the sharder must see every shard's objects).
fn selection(
    mgr: &Manager,
    membership: &Membership,
    group: &str,
    kind: &str,
) -> informer_core::factory::InformerOptions {
    let options = mgr.cache().scope().options_for_kind(group, kind);
    let cfg = membership.config();
    labeller::without_labels(options, &[cfg.shard_label(), cfg.drain_label()])
}

/// A controller builder with sharding on; see [`ShardedExt`]. `T` is the
/// controller's request, as in [`ControllerBuilder`].
#[must_use]
pub struct ShardedBuilder<K, T = Request> {
    pub(super) builder: ControllerBuilder<K, T>,
    pub(super) membership: Membership,
}

impl<K: Object, T> ShardedBuilder<K, T> {
    /// As [`ControllerBuilder::owns`] (the same whether it is called before
    /// or after `.sharded(..)`): in label mode the sharder also keeps `C`'s
    /// objects on their controller owner's shard, and the manager's cache
    /// of `C` selects this shard's label (besides the user's own selector
    /// of `C`, if any).
    pub fn owns<C: Object>(mut self) -> Self {
        self.builder = self.builder.owns::<C>();
        self
    }
}

impl<K: Object> ShardedBuilder<K> {
    /// Builds the controller with `reconciler` behind the shard's gate;
    /// see the [module documentation](self).
    pub fn complete<M: 'static>(
        self,
        reconciler: impl IntoReconciler<K, M>,
    ) -> Result<Controller, ManagerError> {
        let mgr = self.builder.manager().clone();
        match self.membership.config().mode {
            ShardMode::Filter => complete_filter(&mgr, self.builder, &self.membership, reconciler),
            ShardMode::Label => {
                if !self.membership.claim_label_controller() {
                    return Err(ManagerError::Controller(
                        BuilderError::SecondLabelController {
                            ring: self.membership.config().ring.clone(),
                        },
                    ));
                }
                // Before the controller's informers are made: they select
                // this shard's objects only, whatever else the user selects.
                let kinds = label_kinds(&mgr, &self.builder, &self.membership);
                let gate = Arc::new(wiring::label_gate::<K>(&mgr, &self.membership));
                wiring::feed_label_gate::<K>(&mgr, &gate);
                let gated = Gate::Label(Arc::clone(&gate));
                let controller = self
                    .builder
                    .complete_wrapped(reconciler, move |inner| Gated { inner, gate: gated })?;
                install(&mgr, &self.membership);
                let counters = wiring::add_labeller(&mgr, &self.membership, kinds);
                let informer = mgr.cache().informer::<K>();
                ShardMetrics::register(
                    &mgr,
                    controller.name(),
                    &self.membership,
                    super::metrics::Source::Label {
                        gate,
                        counters,
                        owned: Box::new(move || informer.list().len()),
                    },
                );
                add_readiness(&mgr, &controller, &self.membership)?;
                Ok(controller)
            }
        }
    }
}

/// Label mode: makes the manager's cache of `K` and of each kind the
/// controller owns select this shard's label (merged with the user's
/// selector), and returns the sharder's caches of those kinds, each of
/// what the user's selection selects.
fn label_kinds<K: Object>(
    mgr: &Manager,
    builder: &ControllerBuilder<K>,
    membership: &Membership,
) -> Vec<KindStarter> {
    let namespaced = !is_cluster_scoped::<K>();
    let shard = membership.config().informer_options();
    let (group, kind) = (K::group(&()), K::kind(&()));
    mgr.cache().add_options::<K>(shard.clone());
    let mut kinds = vec![labeller::primary(
        mgr.client(),
        selection(mgr, membership, &group, &kind),
        ApiResource::erase::<K>(&()),
        namespaced,
    )];
    let owner = OwnerKind {
        group: group.into_owned(),
        kind: kind.into_owned(),
        namespaced,
    };
    for owned in builder.owned_kinds() {
        let (group, kind) = (&owned.resource.group, &owned.resource.kind);
        mgr.cache().add_options_for(group, kind, shard.clone());
        kinds.push(labeller::owned(
            mgr.client(),
            selection(mgr, membership, group, kind),
            owner.clone(),
            owned,
        ));
    }
    kinds
}

fn add_readiness(
    mgr: &Manager,
    controller: &Controller,
    membership: &Membership,
) -> Result<(), ManagerError> {
    let m = membership.clone();
    mgr.add_readyz_check(
        format!("shard-{}", controller.name()),
        check_fn(move || {
            let view = m.view();
            if view.settled() && view.ring.contains(m.identity()) && !m.fence().is_cancelled() {
                Ok(())
            } else {
                Err("not a member of a settled epoch yet".to_string())
            }
        }),
    )
}

fn complete_filter<K: Object, M: 'static>(
    mgr: &Manager,
    builder: ControllerBuilder<K>,
    membership: &Membership,
    reconciler: impl IntoReconciler<K, M>,
) -> Result<Controller, ManagerError> {
    let gate = ShardGate::new(membership);
    let gated = Gate::Ring(gate.clone());
    let controller =
        builder.complete_wrapped(reconciler, move |inner| Gated { inner, gate: gated })?;
    let informer = mgr.cache().informer::<K>();
    wire_ring(mgr, &controller, membership, &gate, move || {
        informer
            .list()
            .iter()
            .filter_map(|o| Request::from_object(o.as_ref()).ok())
            .collect()
    })?;
    Ok(controller)
}

/// Filter mode's wiring around `gate` of `controller`, whatever its
/// request: keys moved in are queued again at low priority, `keys` lists
/// the cached ones, the `sharding_*` metrics and the runnables and
/// readiness check of [`install_gate`].
pub(super) fn wire_ring<Q: GateKey>(
    mgr: &Manager,
    controller: &Controller<Q>,
    membership: &Membership,
    gate: &ShardGate<Q>,
    keys: impl Fn() -> Vec<Q> + Clone + Send + Sync + 'static,
) -> Result<(), ManagerError> {
    let queue = controller.queue().clone();
    gate.set_requeue(move |reqs| {
        for req in reqs {
            queue.add_with(req, AddOptions::new().priority(Priority::LOW));
        }
    });
    gate.set_keys(keys.clone());
    let reassign = ReassignTimes::default();
    gate.set_departed({
        let (reassign, membership) = (reassign.clone(), membership.clone());
        move |gone| reassign.record(&membership, gone)
    });
    let stats_gate = gate.clone();
    let identity = membership.identity().to_string();
    ShardMetrics::register(
        mgr,
        controller.name(),
        membership,
        super::metrics::Source::Ring {
            stats: Box::new(move || stats_gate.stats()),
            owned: Box::new(move |ring| {
                keys()
                    .iter()
                    .filter(|r| ring.owns(&identity, &r.to_string()))
                    .count()
            }),
            reassign,
        },
    );
    install_gate(mgr, controller.name(), membership, gate)
}
