//! The sharder's looks against in-memory caches: a look costs the objects
//! that changed, and every object only when the ring does; a stopped
//! shard's objects move with a bounded number of patches in flight, each
//! object once, owned objects before their owner.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::look::{Looks, Members, look};
use super::write::Writer;
use super::{Entry, KindCache, LabelCounters};
use crate::sharding::config::ShardingConfig;
use crate::sharding::departed::Departed;
use crate::sharding::labels::Labelled;

/// One kind's objects by name; a patch applies to it as the API server
/// and the watch would (the object's key is noted as changed).
#[derive(Default)]
struct Fake {
    objects: Mutex<BTreeMap<String, Entry>>,
    dirty: Mutex<HashSet<String>>,
    shard_label: String,
    drain_label: String,
}

impl Fake {
    fn new(cfg: &ShardingConfig, n: usize) -> Fake {
        let fake = Fake {
            shard_label: cfg.shard_label(),
            drain_label: cfg.drain_label(),
            ..Fake::default()
        };
        for i in 0..n {
            let name = format!("object-{i:04}");
            fake.objects.lock().insert(
                name.clone(),
                Entry {
                    namespace: Some("default".into()),
                    key: format!("default/{name}"),
                    name,
                    labelled: Labelled::default(),
                    resource_version: "1".into(),
                },
            );
        }
        fake
    }

    /// Sets (or with `None` removes) an object's shard label, as a user
    /// or another writer would.
    fn set_shard(&self, name: &str, shard: Option<&str>) {
        let mut objects = self.objects.lock();
        let e = objects.get_mut(name).expect("the test's object");
        e.labelled.shard = shard.map(str::to_string);
        self.dirty.lock().insert(e.key.clone());
    }

    fn shards(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for e in self.objects.lock().values() {
            *out.entry(e.labelled.shard.clone().unwrap_or_default())
                .or_default() += 1;
        }
        out
    }
}

impl KindCache for Fake {
    fn entries(&self, _: &ShardingConfig) -> Vec<Entry> {
        self.objects.lock().values().cloned().collect()
    }

    fn entries_of(&self, key: &str, _: &ShardingConfig) -> Vec<Entry> {
        let objects = self.objects.lock();
        objects.values().filter(|e| e.key == key).cloned().collect()
    }

    fn take_dirty(&self) -> HashSet<String> {
        std::mem::take(&mut *self.dirty.lock())
    }

    fn has_synced(&self) -> bool {
        true
    }

    fn caught_up(&self) -> bool {
        true
    }

    fn patch(&self, entry: &Entry, patch: serde_json::Value) -> BoxFuture<'static, bool> {
        let mut objects = self.objects.lock();
        let Some(e) = objects.get_mut(&entry.name) else {
            return Box::pin(async { false });
        };
        let labels = &patch["metadata"]["labels"];
        if let Some(shard) = labels.get(&self.shard_label) {
            e.labelled.shard = shard.as_str().map(str::to_string);
        }
        match labels.get(&self.drain_label) {
            Some(serde_json::Value::Null) => e.labelled.draining = false,
            Some(_) => e.labelled.draining = true,
            None => {}
        }
        self.dirty.lock().insert(e.key.clone());
        Box::pin(async { true })
    }

    fn take_left(&self) -> Vec<Entry> {
        Vec::new()
    }
}

struct Ring(Mutex<Vec<String>>);

impl Members for Ring {
    fn fresh(&self) -> BoxFuture<'_, Option<Vec<String>>> {
        let members = self.0.lock().clone();
        Box::pin(async move { Some(members) })
    }

    fn expired_for(&self, _: &str) -> Option<Duration> {
        None
    }
}

#[tokio::test(start_paused = true)]
async fn a_look_costs_the_changed_objects_and_all_of_them_only_when_the_ring_changes() {
    const N: usize = 300;
    let cfg = ShardingConfig::new("default", "widgets");
    let fake = Arc::new(Fake::new(&cfg, N));
    let caches: Vec<Box<dyn KindCache>> = vec![Box::new(Shared(Arc::clone(&fake)))];
    let ring = Ring(Mutex::new(vec!["a".into(), "b".into()]));
    let (departed, counters) = (Departed::default(), LabelCounters::default());
    let mut looks = Looks::default();
    let writer = Writer::new(4, 1_000);
    let visit = async |looks: &mut Looks| {
        let before = looks.visited;
        look(&cfg, &caches, &departed, &ring, &counters, &writer, looks).await;
        looks.visited - before
    };

    // The first look sees every object and labels each.
    assert_eq!(visit(&mut looks).await, N as u64);
    assert_eq!(fake.shards().get(""), None, "every object labelled");
    // The next one sees the objects its own patches changed, then none.
    assert_eq!(visit(&mut looks).await, N as u64);
    assert_eq!(
        visit(&mut looks).await,
        0,
        "nothing changed, nothing looked at"
    );
    assert_eq!(counters.per_shard.lock().values().sum::<u64>(), N as u64);

    // One object changes: one object looked at (and relabelled).
    fake.set_shard("object-0007", None);
    assert_eq!(visit(&mut looks).await, 1);
    assert!(fake.objects.lock()["object-0007"].labelled.shard.is_some());
    assert_eq!(visit(&mut looks).await, 1, "the echo of its own patch");
    assert_eq!(visit(&mut looks).await, 0);
    assert_eq!(counters.per_shard.lock().values().sum::<u64>(), N as u64);

    // The ring changes: every object again; a third of them drain to c.
    ring.0.lock().push("c".into());
    assert_eq!(visit(&mut looks).await, N as u64);
    let drains = counters.drains.load(std::sync::atomic::Ordering::Relaxed);
    assert!(drains > 0, "some objects move to the new member");
    // The drains changed those objects only.
    assert_eq!(visit(&mut looks).await, drains);
    assert_eq!(counters.per_shard.lock().values().sum::<u64>(), N as u64);
}

/// The fake, shared with the test that inspects it.
struct Shared(Arc<Fake>);

impl KindCache for Shared {
    fn entries(&self, cfg: &ShardingConfig) -> Vec<Entry> {
        self.0.entries(cfg)
    }
    fn entries_of(&self, key: &str, cfg: &ShardingConfig) -> Vec<Entry> {
        self.0.entries_of(key, cfg)
    }
    fn take_dirty(&self) -> HashSet<String> {
        self.0.take_dirty()
    }
    fn has_synced(&self) -> bool {
        true
    }
    fn caught_up(&self) -> bool {
        true
    }
    fn patch(&self, entry: &Entry, patch: serde_json::Value) -> BoxFuture<'static, bool> {
        self.0.patch(entry, patch)
    }
    fn take_left(&self) -> Vec<Entry> {
        Vec::new()
    }
}

/// Counts the patches in flight and the most at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    most: AtomicUsize,
    /// Each patch: the object's name, when it started and when it ended.
    log: Mutex<Vec<(String, Instant, Instant)>>,
}

/// A fake whose patches take `PATCH_TIME` (tokio's clock), counted.
struct Slow(Arc<Fake>, Arc<Gauge>);

const PATCH_TIME: Duration = Duration::from_millis(10);

impl KindCache for Slow {
    fn entries(&self, cfg: &ShardingConfig) -> Vec<Entry> {
        self.0.entries(cfg)
    }
    fn entries_of(&self, key: &str, cfg: &ShardingConfig) -> Vec<Entry> {
        self.0.entries_of(key, cfg)
    }
    fn take_dirty(&self) -> HashSet<String> {
        self.0.take_dirty()
    }
    fn has_synced(&self) -> bool {
        true
    }
    fn caught_up(&self) -> bool {
        true
    }
    fn patch(&self, entry: &Entry, patch: serde_json::Value) -> BoxFuture<'static, bool> {
        let (fake, gauge, entry) = (Arc::clone(&self.0), Arc::clone(&self.1), entry.clone());
        Box::pin(async move {
            let started = Instant::now();
            let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(PATCH_TIME).await;
            let ok = fake.patch(&entry, patch).await;
            gauge.now.fetch_sub(1, Ordering::SeqCst);
            gauge
                .log
                .lock()
                .push((entry.name.clone(), started, Instant::now()));
            ok
        })
    }
    fn take_left(&self) -> Vec<Entry> {
        Vec::new()
    }
}

/// `n` objects of one primary kind and one owned object each
/// (`child-i`, owned by `object-i`), all labelled for shard `shard`.
fn stopped_shard(cfg: &ShardingConfig, n: usize, shard: &str) -> (Arc<Fake>, Arc<Fake>) {
    let primaries = Arc::new(Fake::new(cfg, n));
    let children = Arc::new(Fake::new(cfg, 0));
    for i in 0..n {
        let name = format!("object-{i:04}");
        primaries.set_shard(&name, Some(shard));
        let child = format!("child-{i:04}");
        children.objects.lock().insert(
            child.clone(),
            Entry {
                namespace: Some("default".into()),
                key: format!("default/{name}"),
                name: child,
                labelled: Labelled {
                    shard: Some(shard.into()),
                    draining: false,
                },
                resource_version: "1".into(),
            },
        );
    }
    primaries.dirty.lock().clear();
    (primaries, children)
}

#[tokio::test(start_paused = true)]
async fn a_stopped_shards_objects_move_with_bounded_patches_in_flight_each_once_children_first() {
    const N: usize = 2_000;
    const IN_FLIGHT: usize = 8;
    let cfg = ShardingConfig::new("default", "widgets");
    let (primaries, children) = stopped_shard(&cfg, N, "dead");
    let gauge = Arc::new(Gauge::default());
    let caches: Vec<Box<dyn KindCache>> = vec![
        Box::new(Slow(Arc::clone(&primaries), Arc::clone(&gauge))),
        Box::new(Slow(Arc::clone(&children), Arc::clone(&gauge))),
    ];
    let members = vec!["a".to_string(), "b".to_string()];
    let ring = Ring(Mutex::new(members.clone()));
    let (departed, counters) = (Departed::default(), LabelCounters::default());
    let writer = Writer::new(IN_FLIGHT, 1_000_000);
    let mut looks = Looks::default();

    // One look moves every object of the stopped shard.
    look(
        &cfg, &caches, &departed, &ring, &counters, &writer, &mut looks,
    )
    .await;
    let owners = crate::sharding::ring::Ring::with_virtual_nodes(members, cfg.virtual_nodes);
    for fake in [&primaries, &children] {
        for e in fake.objects.lock().values() {
            assert_eq!(
                e.labelled.shard.as_deref(),
                owners.owner(&e.key),
                "{} is labelled for its ring owner",
                e.name
            );
        }
    }
    assert_eq!(counters.moves.load(Ordering::Relaxed), N as u64);

    // Each object was patched exactly once, each owned object before its
    // owner's patch started.
    let log = gauge.log.lock().clone();
    let mut patched: BTreeMap<&str, (Instant, Instant, usize)> = BTreeMap::new();
    for (name, started, ended) in log.iter() {
        let e = patched.entry(name).or_insert((*started, *ended, 0));
        e.2 += 1;
    }
    assert_eq!(patched.len(), 2 * N, "every object patched");
    assert!(patched.values().all(|p| p.2 == 1), "each object once");
    for i in 0..N {
        let (child, owner) = (
            patched[format!("child-{i:04}").as_str()],
            patched[format!("object-{i:04}").as_str()],
        );
        assert!(child.1 <= owner.0, "child-{i:04} before its owner");
    }
    // Concurrent, and never above the limit.
    assert_eq!(gauge.most.load(Ordering::SeqCst), IN_FLIGHT);

    // The echoes of those patches: looked at, nothing left to write.
    look(
        &cfg, &caches, &departed, &ring, &counters, &writer, &mut looks,
    )
    .await;
    assert_eq!(gauge.log.lock().len(), 2 * N, "no second patch");
    assert_eq!(counters.per_shard.lock().values().sum::<u64>(), N as u64);
}

#[tokio::test(start_paused = true)]
async fn the_relabel_rate_holds_after_a_burst() {
    const N: usize = 300;
    let cfg = ShardingConfig::new("default", "widgets");
    let (primaries, _) = stopped_shard(&cfg, N, "dead");
    let gauge = Arc::new(Gauge::default());
    let caches: Vec<Box<dyn KindCache>> =
        vec![Box::new(Slow(Arc::clone(&primaries), Arc::clone(&gauge)))];
    let ring = Ring(Mutex::new(vec!["a".into()]));
    let (departed, counters) = (Departed::default(), LabelCounters::default());
    // A burst of 50, then 100 a second: the 300th patch starts 2.5 s in.
    let writer = Writer::new(50, 100);
    let started = Instant::now();
    look(
        &cfg,
        &caches,
        &departed,
        &ring,
        &counters,
        &writer,
        &mut Looks::default(),
    )
    .await;
    assert_eq!(counters.moves.load(Ordering::Relaxed), N as u64);
    let last = gauge.log.lock().iter().map(|p| p.1).max();
    assert_eq!(
        last.map(|t| t.duration_since(started)),
        Some(Duration::from_millis(2_500))
    );
}
