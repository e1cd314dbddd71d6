//! Label mode's sharder side: while this replica is the ring's sharder, it
//! watches the metadata of the objects of the sharded kind and its owned
//! kinds that the controller selects (the manager cache's namespaces and
//! its selector of each kind, without the shard's) and moves labels
//! towards the ring:
//! assigns new objects, drains objects whose shard the ring no longer
//! names, relabels them once drained or once their shard has stopped, and
//! keeps owned objects on their owner's shard. See [`labels`](super::labels)
//! for the handshake and [`decide`] for the rule.
//!
//! Each look takes the objects' labels from the caches first and reads the
//! ring state afresh afterwards, so that "not a member" always means
//! "stopped since it was labelled" (members leave only once stopped).
//!
//! A new object under the key of a recently deleted one goes first to the
//! shard the deleted one had, while that shard lives (see
//! [`departed`](super::departed)); the drain handshake then moves it.
//!
//! An object that leaves the selection (its labels no longer match the
//! controller's label selector) leaves every shard's cache as if deleted,
//! so no shard would acknowledge a drain of it: the sharder removes its
//! shard and drain labels itself, and records its shard as for a deletion,
//! so that if it comes back it goes to that shard first.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use informer_core::factory::{InformerOptions, SharedInformerFactory};
use informer_core::key::ObjectOrTombstone;
use informer_core::selector::LabelSelector;
use informer_core::shared_informer::{
    ResourceEventHandler, ResourceEventHandlerRegistration, SharedIndexInformer,
};
use kube_client::Api;
use kube_client::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube_client::core::metadata::PartialObjectMeta;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::ShardingConfig;
use super::departed::Departed;
use super::labels::{Decision, Labelled, decide, drain_patch, relabel_patch};
use super::membership::Membership;
use super::ring::{Ring, object_key};
use crate::object::Object;
use left::Left;
pub(super) use left::without_labels;

mod left;

/// One object as the sharder sees it.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    namespace: Option<String>,
    name: String,
    /// The request key of the primary it belongs to.
    key: String,
    labelled: Labelled,
    resource_version: String,
}

/// The metadata cache of one kind and how to patch its objects.
pub(super) trait KindCache: Send + Sync {
    fn entries(&self, cfg: &ShardingConfig) -> Vec<Entry>;
    fn has_synced(&self) -> bool;
    /// Whether every notification distributed so far has been handled (for
    /// the primary: every deletion seen so far is recorded).
    fn caught_up(&self) -> bool;
    fn patch(&self, entry: &Entry, patch: serde_json::Value) -> BoxFuture<'static, bool>;
    /// Takes the objects seen leaving the selection with shard labels on.
    fn take_left(&self) -> Vec<Entry>;
}

/// How to start one kind's metadata cache on a factory. The primary kind's
/// records its deletions in the [`Departed`] given.
pub(super) type KindStarter = Arc<
    dyn Fn(
            &SharedInformerFactory,
            &[String],
            watch::Sender<u64>,
            &Arc<Departed>,
            &ShardingConfig,
        ) -> Box<dyn KindCache>
        + Send
        + Sync,
>;

struct Typed<K: Object> {
    /// One per cached namespace (or one over all).
    informers: Vec<SharedIndexInformer<PartialObjectMeta<K>>>,
    registrations: Vec<ResourceEventHandlerRegistration>,
    client: kube_client::Client,
    /// How an object's primary key is found: its own key (the primary
    /// kind), or its controller owner's of the primary kind.
    key_of: fn(&PartialObjectMeta<K>, &OwnerKind) -> Option<String>,
    owner: OwnerKind,
    left: Arc<Left>,
}

/// The primary kind, as owner references name it.
#[derive(Debug, Clone)]
pub(super) struct OwnerKind {
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) namespaced: bool,
}

fn own_key<K>(m: &PartialObjectMeta<K>, _: &OwnerKind) -> Option<String> {
    let name = m.metadata.name.as_deref()?;
    Some(
        match m.metadata.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        },
    )
}

fn owner_key<K>(m: &PartialObjectMeta<K>, owner: &OwnerKind) -> Option<String> {
    let by_primary = m.metadata.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true)
            && r.kind == owner.kind
            && r.api_version.rsplit_once('/').map_or("", |(g, _)| g) == owner.group
    });
    by_primary.then(|| object_key(&m.metadata, owner.namespaced))
}

struct Changed(watch::Sender<u64>, Arc<Left>);

impl<K: Object> ResourceEventHandler<PartialObjectMeta<K>> for Changed {
    fn on_add(&self, _: Arc<PartialObjectMeta<K>>, _: bool) {
        self.0.send_modify(|n| *n += 1);
    }
    fn on_update(&self, _: Arc<PartialObjectMeta<K>>, _: Arc<PartialObjectMeta<K>>) {
        self.0.send_modify(|n| *n += 1);
    }
    fn on_delete(&self, obj: ObjectOrTombstone<PartialObjectMeta<K>>) {
        self.1.note(obj.object());
        self.0.send_modify(|n| *n += 1);
    }
}

/// The primary kind's handler: wakes the loop, and records the shard of
/// each deleted object.
struct Departures<K> {
    changed: watch::Sender<u64>,
    departed: Arc<Departed>,
    key_of: fn(&PartialObjectMeta<K>, &OwnerKind) -> Option<String>,
    owner: OwnerKind,
    shard_label: String,
    drain_label: String,
    left: Arc<Left>,
}

impl<K: Object> ResourceEventHandler<PartialObjectMeta<K>> for Departures<K> {
    fn on_add(&self, _: Arc<PartialObjectMeta<K>>, _: bool) {
        self.changed.send_modify(|n| *n += 1);
    }
    fn on_update(&self, _: Arc<PartialObjectMeta<K>>, _: Arc<PartialObjectMeta<K>>) {
        self.changed.send_modify(|n| *n += 1);
    }
    fn on_delete(&self, obj: ObjectOrTombstone<PartialObjectMeta<K>>) {
        let m = obj.object();
        let labelled = Labelled::of(
            m.metadata.labels.as_ref(),
            &self.shard_label,
            &self.drain_label,
        );
        // Deleted, or gone out of the selection (then also unlabelled by
        // the next look): either way, back under this key it goes to this
        // shard first.
        self.left.note(m);
        if let (Some(key), Some(shard)) = ((self.key_of)(m, &self.owner), labelled.shard) {
            self.departed.record(key, shard);
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

impl<K: Object> KindCache for Typed<K> {
    fn entries(&self, cfg: &ShardingConfig) -> Vec<Entry> {
        let (shard_label, drain_label) = (cfg.shard_label(), cfg.drain_label());
        self.informers
            .iter()
            .flat_map(|i| i.indexer().list())
            .filter_map(|m| {
                Some(Entry {
                    key: (self.key_of)(&m, &self.owner)?,
                    namespace: m.metadata.namespace.clone(),
                    name: m.metadata.name.clone()?,
                    labelled: Labelled::of(m.metadata.labels.as_ref(), &shard_label, &drain_label),
                    resource_version: m.metadata.resource_version.clone().unwrap_or_default(),
                })
            })
            .collect()
    }

    fn has_synced(&self) -> bool {
        self.informers.iter().all(SharedIndexInformer::has_synced)
    }

    fn take_left(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.left.entries.lock())
    }

    fn caught_up(&self) -> bool {
        self.registrations.iter().all(|r| r.pending() == 0)
    }

    fn patch(&self, entry: &Entry, patch: serde_json::Value) -> BoxFuture<'static, bool> {
        let resource = ApiResource::erase::<K>(&());
        let api: Api<DynamicObject> = match &entry.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let name = entry.name.clone();
        Box::pin(async move {
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => true,
                Err(error) => {
                    tracing::debug!(%error, object = %name, "sharder: relabelling (retried next look)");
                    false
                }
            }
        })
    }
}

/// Starts the metadata cache of the primary kind `K`, of the objects
/// `selection` selects (the controller's cache options of `K`).
pub(super) fn primary<K: Object>(
    client: kube_client::Client,
    selection: InformerOptions,
) -> KindStarter {
    starter::<K>(client, selection, own_key::<K>, None)
}

/// Starts the metadata cache of an owned kind `C` of the primary `owner`,
/// of the objects `selection` selects.
pub(super) fn owned<C: Object>(
    client: kube_client::Client,
    selection: InformerOptions,
    owner: OwnerKind,
) -> KindStarter {
    starter::<C>(client, selection, owner_key::<C>, Some(owner))
}

fn starter<K: Object>(
    client: kube_client::Client,
    selection: InformerOptions,
    key_of: fn(&PartialObjectMeta<K>, &OwnerKind) -> Option<String>,
    owner: Option<OwnerKind>,
) -> KindStarter {
    let primary = owner.is_none();
    // The sharder's own resync, not the controller's.
    let selection = InformerOptions {
        resync: None,
        ..selection
    };
    let selector = selection
        .label_selector
        .as_deref()
        .and_then(|s| s.parse::<LabelSelector>().ok())
        .filter(|s| !s.is_everything());
    Arc::new(move |factory, namespaces, changed, departed, cfg| {
        let left = Arc::new(Left {
            selector: selector.clone(),
            shard_label: cfg.shard_label(),
            drain_label: cfg.drain_label(),
            entries: Mutex::new(Vec::new()),
        });
        let scopes: Vec<Option<&str>> = if namespaces.is_empty() {
            vec![None]
        } else {
            namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        let owner = owner.clone().unwrap_or(OwnerKind {
            group: String::new(),
            kind: String::new(),
            namespaced: true,
        });
        let (mut informers, mut registrations) = (Vec::new(), Vec::new());
        for ns in scopes {
            let informer = factory.metadata_informer_in::<K>(ns, selection.clone());
            // A fresh informer of a fresh factory: registering cannot fail.
            let registration = if primary {
                informer.add_event_handler(Departures {
                    changed: changed.clone(),
                    departed: Arc::clone(departed),
                    key_of,
                    owner: owner.clone(),
                    shard_label: cfg.shard_label(),
                    drain_label: cfg.drain_label(),
                    left: Arc::clone(&left),
                })
            } else {
                informer.add_event_handler(Changed(changed.clone(), Arc::clone(&left)))
            };
            registrations.extend(registration.ok());
            informers.push(informer);
        }
        Box::new(Typed {
            informers,
            registrations,
            client: client.clone(),
            key_of,
            owner,
            left,
        })
    })
}

/// Waits briefly for `cache`'s handlers to catch up; false if they did not.
async fn caught_up(cache: &dyn KindCache) -> bool {
    for _ in 0..100 {
        if cache.caught_up() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    cache.caught_up()
}

/// Counters of the sharder's relabelling.
#[derive(Debug, Default)]
pub(super) struct LabelCounters {
    /// Objects labelled with a new shard (after a drain or a stop).
    pub(super) moves: AtomicU64,
    /// Drains asked for.
    pub(super) drains: AtomicU64,
    /// New objects labelled for the first time.
    pub(super) assigned: AtomicU64,
    /// Objects unlabelled because they left the controller's selection.
    pub(super) released: AtomicU64,
    /// Objects per shard at the last look (by label).
    pub(super) per_shard: Mutex<HashMap<String, u64>>,
    /// Seconds from a stopped shard's Lease expiry to the relabelling of
    /// its last object, one value per stopped shard (drained by metrics).
    pub(super) reassign_seconds: Mutex<Vec<f64>>,
}

/// The sharder's relabelling loop of one sharded controller.
pub(super) struct Labeller {
    pub(super) membership: Membership,
    /// The cached namespaces (empty: all).
    pub(super) namespaces: Vec<String>,
    pub(super) kinds: Vec<KindStarter>,
    pub(super) counters: Arc<LabelCounters>,
}

impl Labeller {
    /// Runs until `stop`: relabels while this replica is the sharder.
    pub(super) async fn run(&self, stop: CancellationToken) {
        let mut sharder = self.membership.sharder_watch();
        loop {
            if !*sharder.borrow_and_update() {
                tokio::select! {
                    () = stop.cancelled() => return,
                    r = sharder.changed() => if r.is_err() { return } else { continue },
                }
            }
            self.lead(&stop, &mut sharder).await;
            if stop.is_cancelled() {
                return;
            }
        }
    }

    /// Relabels until this replica stops being the sharder (or `stop`).
    async fn lead(&self, stop: &CancellationToken, sharder: &mut watch::Receiver<bool>) {
        let cfg = self.membership.config().clone();
        let factory = SharedInformerFactory::builder(self.membership.client()).build();
        let (changed, mut changes) = watch::channel(0u64);
        let departed = Arc::new(Departed::default());
        let caches: Vec<Box<dyn KindCache>> = self
            .kinds
            .iter()
            .map(|k| k(&factory, &self.namespaces, changed.clone(), &departed, &cfg))
            .collect();
        factory.start();
        let mut ring = self.membership.subscribe();
        let mut dead_since: HashMap<String, Instant> = HashMap::new();
        loop {
            if caches.iter().all(|c| c.has_synced()) {
                self.look(&cfg, &caches, &departed, &mut dead_since).await;
            }
            tokio::select! {
                () = stop.cancelled() => break,
                r = sharder.changed() => if r.is_err() || !*sharder.borrow_and_update() { break },
                _ = changes.changed() => {}
                _ = ring.changed() => {}
                () = tokio::time::sleep(cfg.timing.retry_period) => {}
            }
        }
        factory.shutdown().await;
    }

    /// One look over every object; see the module documentation.
    async fn look(
        &self,
        cfg: &ShardingConfig,
        caches: &[Box<dyn KindCache>],
        departed: &Departed,
        dead_since: &mut HashMap<String, Instant>,
    ) {
        // Labels first, the ring state afterwards (see the module docs).
        let (primary, owned) = match caches.split_first() {
            Some((p, o)) => (p, o),
            None => return,
        };
        let (shard_label, drain_label) = (cfg.shard_label(), cfg.drain_label());
        // Out of the selection: no shard caches them any more, so none
        // would acknowledge a drain; unlabelled here (a conflict means the
        // object changed since, and the caches show it again).
        for cache in caches {
            for e in cache.take_left() {
                let patch = relabel_patch(&shard_label, &drain_label, None, &e.resource_version);
                if cache.patch(&e, patch).await {
                    self.counters.released.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let primaries = primary.entries(cfg);
        // Every deletion the cache applied before `primaries` was read has
        // been recorded once its handler has caught up (it only records):
        // new objects are labelled only then.
        let recorded = caught_up(primary.as_ref()).await;
        let mut children: HashMap<String, Vec<(usize, Entry)>> = HashMap::new();
        for (i, c) in owned.iter().enumerate() {
            for e in c.entries(cfg) {
                children.entry(e.key.clone()).or_default().push((i, e));
            }
        }
        let members = match self.membership.fresh_members().await {
            Some(m) if !m.is_empty() => m,
            _ => return,
        };
        let ring = Ring::with_virtual_nodes(members.iter().cloned(), cfg.virtual_nodes);
        departed.retain_members(&members);
        let relabel = |e: &Entry, to: Option<&str>| {
            relabel_patch(&shard_label, &drain_label, to, &e.resource_version)
        };
        let now = Instant::now();
        for p in &primaries {
            if let Some(s) = &p.labelled.shard
                && !members.contains(s)
                && !dead_since.contains_key(s)
            {
                let expired = self.membership.expired_for(s).unwrap_or_default();
                dead_since.insert(s.clone(), now.checked_sub(expired).unwrap_or(now));
            }
        }
        let mut per_shard: HashMap<String, u64> = HashMap::new();
        let mut stopped_left: HashMap<String, u64> = HashMap::new();
        for p in &primaries {
            let Some(ring_target) = ring.owner(&p.key) else {
                continue;
            };
            let kids = children.remove(&p.key).unwrap_or_default();
            let decision = decide(&p.labelled, ring_target, &members);
            // A new object: to the shard of a deleted one under its key, if
            // that shard lives (it may still reconcile the deletion).
            let fresh = decision == Decision::Assign && !p.labelled.draining;
            if fresh && !recorded {
                continue;
            }
            let previous = fresh
                .then(|| departed.get(&p.key))
                .flatten()
                .filter(|s| members.contains(s));
            let target = previous.as_deref().unwrap_or(ring_target);
            match decision {
                Decision::Keep | Decision::Wait | Decision::Drain | Decision::Undrain => {
                    if let Some(shard) = &p.labelled.shard {
                        *per_shard.entry(shard.clone()).or_default() += 1;
                    }
                }
                Decision::Assign | Decision::Reassign => {}
            }
            match decision {
                Decision::Keep => {
                    // Owned objects follow their owner's shard.
                    for (i, c) in &kids {
                        if c.labelled.shard.as_deref() != Some(target) || c.labelled.draining {
                            owned[*i].patch(c, relabel(c, Some(target))).await;
                        }
                    }
                }
                Decision::Wait => {}
                Decision::Drain => {
                    if primary
                        .patch(p, drain_patch(&drain_label, &p.resource_version))
                        .await
                    {
                        self.counters.drains.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Decision::Undrain => {
                    primary.patch(p, relabel(p, Some(target))).await;
                }
                Decision::Assign | Decision::Reassign => {
                    // Owned objects first, so that the new shard finds them
                    // in its cache when it gets the owner.
                    let mut all = true;
                    for (i, c) in &kids {
                        if c.labelled.shard.as_deref() != Some(target) || c.labelled.draining {
                            all &= owned[*i].patch(c, relabel(c, Some(target))).await;
                        }
                    }
                    if !all {
                        if let Some(s) = p.labelled.shard.clone() {
                            *stopped_left.entry(s).or_default() += 1;
                        }
                        continue;
                    }
                    if primary.patch(p, relabel(p, Some(target))).await {
                        if fresh {
                            departed.take(&p.key);
                        }
                        *per_shard.entry(target.to_string()).or_default() += 1;
                        let counter = match (&decision, &p.labelled.shard) {
                            (Decision::Assign, None) if !p.labelled.draining => {
                                &self.counters.assigned
                            }
                            _ => &self.counters.moves,
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    } else if let Some(s) = p.labelled.shard.clone() {
                        *stopped_left.entry(s).or_default() += 1;
                    }
                }
            }
        }
        // Owned objects whose owner the sharder has not seen (yet).
        for (_, kids) in children {
            for (i, c) in kids {
                let Some(target) = ring.owner(&c.key) else {
                    continue;
                };
                if matches!(
                    decide(&c.labelled, target, &members),
                    Decision::Assign | Decision::Reassign
                ) {
                    owned[i].patch(&c, relabel(&c, Some(target))).await;
                }
            }
        }
        // Time to reassign a stopped shard's objects: from when its Lease
        // expired (by this replica's observations) to the look that moved
        // its last object.
        dead_since.retain(|shard, since| {
            let done = !stopped_left.contains_key(shard) && !per_shard.contains_key(shard);
            if done {
                self.counters
                    .reassign_seconds
                    .lock()
                    .push(now.duration_since(*since).as_secs_f64());
            }
            !done
        });
        *self.counters.per_shard.lock() = per_shard;
    }
}
