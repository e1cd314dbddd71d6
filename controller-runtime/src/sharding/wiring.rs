//! Label mode's wiring into a manager: the label gate over the manager's
//! (label-selected) cache, fed by that cache's events, and the sharder's
//! relabelling loop as a runnable on every replica (it works only while
//! the replica is the sharder).

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use informer_core::key::ObjectOrTombstone;
use informer_core::shared_informer::ResourceEventHandler;
use kube_client::Api;
use kube_client::api::{ApiResource, DynamicObject, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use super::label_gate::{Cached, LabelGate};
use super::labeller::{KindStarter, LabelCounters, Labeller};
use super::labels::{Labelled, relabel_patch};
use super::membership::Membership;
use crate::error::BoxError;
use crate::manager::{Manager, Runnable};
use crate::object::Object;
use crate::request::Request;

/// The label gate of a controller of `K` on `mgr`.
pub(super) fn label_gate<K: Object>(mgr: &Manager, membership: &Membership) -> LabelGate {
    let cfg = membership.config().clone();
    let informer = mgr.cache().informer::<K>();
    let (shard_label, drain_label) = (cfg.shard_label(), cfg.drain_label());
    let lookup = {
        let (shard_label, drain_label) = (shard_label.clone(), drain_label.clone());
        Box::new(move |req: &Request| {
            informer
                .get(req.namespace.as_deref(), &req.name)
                .map(|o| Cached {
                    labelled: Labelled::of(o.meta().labels.as_ref(), &shard_label, &drain_label),
                    resource_version: o.meta().resource_version.clone().unwrap_or_default(),
                })
        })
    };
    let client = mgr.client();
    let release = Box::new(
        move |req: Request, rv: String| -> BoxFuture<'static, Result<(), kube_client::Error>> {
            let resource = ApiResource::erase::<K>(&());
            let api: Api<DynamicObject> = match &req.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let patch = relabel_patch(&shard_label, &drain_label, None, &rv);
            Box::pin(async move {
                api.patch(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
            })
        },
    );
    LabelGate::new(
        membership.identity().to_string(),
        membership.fence(),
        lookup,
        release,
    )
}

/// Tells `gate` of every object the manager's cache of `K` shows (see
/// [`LabelGate::saw`]), so that the deletion of an object the shard held
/// is reconciled even when no worker began a request for it before.
pub(super) fn feed_label_gate<K: Object>(mgr: &Manager, gate: &Arc<LabelGate>) {
    let handler = Seen(Arc::downgrade(gate));
    if let Err(error) = mgr.cache().informer::<K>().add_event_handler(handler) {
        tracing::warn!(%error, "label mode: the gate does not follow the cache");
    }
}

/// The gate, weakly: the gate's lookup holds the informer.
struct Seen(Weak<LabelGate>);

impl Seen {
    fn saw<K: Object>(&self, obj: &K) {
        if let (Some(gate), Ok(req)) = (self.0.upgrade(), Request::from_object(obj)) {
            gate.saw(&req);
        }
    }
}

impl<K: Object> ResourceEventHandler<K> for Seen {
    fn on_add(&self, obj: Arc<K>, _: bool) {
        self.saw(obj.as_ref());
    }
    fn on_update(&self, _: Arc<K>, new: Arc<K>) {
        self.saw(new.as_ref());
    }
    fn on_delete(&self, _: ObjectOrTombstone<K>) {}
}

struct LabellerRunnable(Labeller);

impl Runnable for LabellerRunnable {
    fn name(&self) -> String {
        format!("shard labeller {}", self.0.membership.config().ring)
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            self.0.run(stop).await;
            Ok(())
        })
    }
}

/// Adds the relabelling loop of `kinds` (the primary first) to `mgr`.
pub(super) fn add_labeller(
    mgr: &Manager,
    membership: &Membership,
    kinds: Vec<KindStarter>,
) -> Arc<LabelCounters> {
    let counters = Arc::new(LabelCounters::default());
    mgr.add_runnable(LabellerRunnable(Labeller {
        membership: membership.clone(),
        namespaces: mgr.cache().scope().namespace_names().to_vec(),
        kinds,
        counters: Arc::clone(&counters),
    }));
    counters
}
