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
//! Looks are incremental (see [`look`]): the objects of the keys changed
//! since the last look, and every object only when the ring changed.
//! A look decides every object's writes from the labels it read, then
//! sends them concurrently, within the config's limits (see [`write`]):
//! a stopped shard's thousands of objects move in seconds, not minutes.
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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

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
use tokio_util::sync::CancellationToken;

use super::config::ShardingConfig;
use super::departed::Departed;
use super::labels::Labelled;
use super::membership::Membership;
use super::ring::object_key;
use crate::controller::OwnedKind;
use left::Left;
pub(super) use left::without_labels;
use look::{Looks, Members};
use write::Writer;

mod left;
mod look;
#[cfg(test)]
mod tests;
mod write;

/// The index of the sharder's caches: each object under its primary key.
const BY_PRIMARY: &str = "sharding.informer-rs.io/primary-key";

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
    /// Every object.
    fn entries(&self, cfg: &ShardingConfig) -> Vec<Entry>;
    /// The objects of one primary key.
    fn entries_of(&self, key: &str, cfg: &ShardingConfig) -> Vec<Entry>;
    /// Takes the primary keys of the objects the cache was told about
    /// (added, updated, deleted) since the last call.
    fn take_dirty(&self) -> HashSet<String>;
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

/// The metadata of one object of any kind.
type Meta = PartialObjectMeta<DynamicObject>;

/// How an object's primary key is found: its own key (the primary kind),
/// or its controller owner's of the primary kind.
type KeyOf = fn(&Meta, &OwnerKind) -> Option<String>;

/// The sharder's metadata cache of one kind.
struct KindMeta {
    /// One per cached namespace (or one over all).
    informers: Vec<SharedIndexInformer<Meta>>,
    registrations: Vec<ResourceEventHandlerRegistration>,
    client: kube_client::Client,
    resource: ApiResource,
    key_of: KeyOf,
    owner: OwnerKind,
    left: Arc<Left>,
    touched: Arc<Touched>,
}

/// The primary keys of the objects a cache's handler was told about.
struct Touched {
    key_of: KeyOf,
    owner: OwnerKind,
    keys: Mutex<HashSet<String>>,
}

impl Touched {
    fn note(&self, m: &Meta) {
        if let Some(key) = (self.key_of)(m, &self.owner) {
            self.keys.lock().insert(key);
        }
    }
}

/// The primary kind, as owner references name it.
#[derive(Debug, Clone)]
pub(super) struct OwnerKind {
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) namespaced: bool,
}

fn own_key(m: &Meta, _: &OwnerKind) -> Option<String> {
    let name = m.metadata.name.as_deref()?;
    Some(
        match m.metadata.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        },
    )
}

fn owner_key(m: &Meta, owner: &OwnerKind) -> Option<String> {
    let by_primary = m.metadata.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true)
            && r.kind == owner.kind
            && r.api_version.rsplit_once('/').map_or("", |(g, _)| g) == owner.group
    });
    by_primary.then(|| object_key(&m.metadata, owner.namespaced))
}

struct Changed(watch::Sender<u64>, Arc<Left>, Arc<Touched>);

impl ResourceEventHandler<Meta> for Changed {
    fn on_add(&self, obj: Arc<Meta>, _: bool) {
        self.2.note(&obj);
        self.0.send_modify(|n| *n += 1);
    }
    fn on_update(&self, old: Arc<Meta>, new: Arc<Meta>) {
        self.2.note(&old);
        self.2.note(&new);
        self.0.send_modify(|n| *n += 1);
    }
    fn on_delete(&self, obj: ObjectOrTombstone<Meta>) {
        self.2.note(obj.object());
        self.1.note(obj.object());
        self.0.send_modify(|n| *n += 1);
    }
}

/// The primary kind's handler: wakes the loop, and records the shard of
/// each deleted object.
struct Departures {
    changed: watch::Sender<u64>,
    departed: Arc<Departed>,
    key_of: KeyOf,
    owner: OwnerKind,
    shard_label: String,
    drain_label: String,
    left: Arc<Left>,
    touched: Arc<Touched>,
}

impl ResourceEventHandler<Meta> for Departures {
    fn on_add(&self, obj: Arc<Meta>, _: bool) {
        self.touched.note(&obj);
        self.changed.send_modify(|n| *n += 1);
    }
    fn on_update(&self, old: Arc<Meta>, new: Arc<Meta>) {
        self.touched.note(&old);
        self.touched.note(&new);
        self.changed.send_modify(|n| *n += 1);
    }
    fn on_delete(&self, obj: ObjectOrTombstone<Meta>) {
        let m = obj.object();
        self.touched.note(m);
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

impl KindMeta {
    fn entry(&self, m: &Meta, shard_label: &str, drain_label: &str) -> Option<Entry> {
        Some(Entry {
            key: (self.key_of)(m, &self.owner)?,
            namespace: m.metadata.namespace.clone(),
            name: m.metadata.name.clone()?,
            labelled: Labelled::of(m.metadata.labels.as_ref(), shard_label, drain_label),
            resource_version: m.metadata.resource_version.clone().unwrap_or_default(),
        })
    }
}

impl KindCache for KindMeta {
    fn entries(&self, cfg: &ShardingConfig) -> Vec<Entry> {
        let (shard_label, drain_label) = (cfg.shard_label(), cfg.drain_label());
        self.informers
            .iter()
            .flat_map(|i| i.indexer().list())
            .filter_map(|m| self.entry(&m, &shard_label, &drain_label))
            .collect()
    }

    fn entries_of(&self, key: &str, cfg: &ShardingConfig) -> Vec<Entry> {
        let (shard_label, drain_label) = (cfg.shard_label(), cfg.drain_label());
        self.informers
            .iter()
            .flat_map(|i| {
                // The index is added before the informer starts, so it is
                // there; without it, the whole cache is searched.
                i.indexer().by_index(BY_PRIMARY, key).unwrap_or_else(|_| {
                    let all = i.indexer().list();
                    all.into_iter()
                        .filter(|m| (self.key_of)(m, &self.owner).as_deref() == Some(key))
                        .collect()
                })
            })
            .filter_map(|m| self.entry(&m, &shard_label, &drain_label))
            .collect()
    }

    fn take_dirty(&self) -> HashSet<String> {
        std::mem::take(&mut *self.touched.keys.lock())
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
        let api: Api<DynamicObject> = match &entry.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.resource),
            None => Api::all_with(self.client.clone(), &self.resource),
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

/// Starts the metadata cache of the primary kind (`resource`), of the
/// objects `selection` selects (the controller's cache options of it).
pub(super) fn primary(
    client: kube_client::Client,
    selection: InformerOptions,
    resource: ApiResource,
    namespaced: bool,
) -> KindStarter {
    starter(client, selection, own_key, None, resource, namespaced)
}

/// Starts the metadata cache of a kind `owned` by the primary `owner`, of
/// the objects `selection` selects.
pub(super) fn owned(
    client: kube_client::Client,
    selection: InformerOptions,
    owner: OwnerKind,
    owned: &OwnedKind,
) -> KindStarter {
    starter(
        client,
        selection,
        owner_key,
        Some(owner),
        owned.resource.clone(),
        owned.namespaced,
    )
}

fn starter(
    client: kube_client::Client,
    selection: InformerOptions,
    key_of: KeyOf,
    owner: Option<OwnerKind>,
    resource: ApiResource,
    namespaced: bool,
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
        let scopes: Vec<Option<&str>> = if namespaces.is_empty() || !namespaced {
            vec![None]
        } else {
            namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        let owner = owner.clone().unwrap_or(OwnerKind {
            group: String::new(),
            kind: String::new(),
            namespaced: true,
        });
        let touched = Arc::new(Touched {
            key_of,
            owner: owner.clone(),
            keys: Mutex::new(HashSet::new()),
        });
        let (mut informers, mut registrations) = (Vec::new(), Vec::new());
        for ns in scopes {
            let api: Api<Meta> = match ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let informer = factory.informer_for_api(api, selection.clone());
            let index_owner = owner.clone();
            let by_primary: informer_core::store::IndexFn<Meta> =
                Arc::new(move |m| Ok(key_of(m, &index_owner).into_iter().collect()));
            if let Err(error) = informer.add_indexers([(BY_PRIMARY.to_string(), by_primary)]) {
                tracing::debug!(%error, "sharder: no index by primary key (whole-cache searches)");
            }
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
                    touched: Arc::clone(&touched),
                })
            } else {
                informer.add_event_handler(Changed(
                    changed.clone(),
                    Arc::clone(&left),
                    Arc::clone(&touched),
                ))
            };
            registrations.extend(registration.ok());
            informers.push(informer);
        }
        Box::new(KindMeta {
            informers,
            registrations,
            client: client.clone(),
            resource: resource.clone(),
            key_of,
            owner,
            left,
            touched,
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
        let mut looks = Looks::default();
        let writer = Writer::new(cfg.relabel_in_flight, cfg.relabel_per_second);
        loop {
            if caches.iter().all(|c| c.has_synced()) {
                look::look(
                    &cfg,
                    &caches,
                    &departed,
                    &self.membership,
                    &self.counters,
                    &writer,
                    &mut looks,
                )
                .await;
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
}

impl Members for Membership {
    fn fresh(&self) -> BoxFuture<'_, Option<Vec<String>>> {
        Box::pin(self.fresh_members())
    }

    fn expired_for(&self, shard: &str) -> Option<std::time::Duration> {
        Membership::expired_for(self, shard)
    }
}
