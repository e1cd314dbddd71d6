//! One look of the sharder, incremental: the objects whose primary key
//! changed since the last look (the caches' handlers note each key they
//! are told about), and the keys whose patch failed or had to wait, are
//! looked at again; every object only when the ring's members differ from
//! those of the last look (a member joined or stopped: decisions of
//! objects nobody touched change too). What the counters report (objects
//! per shard, shards whose objects still wait to move) is kept per key
//! from one look to the next, so an incremental look updates it for the
//! keys it looked at only.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::write::{Job, Write, Writer};
use super::{Entry, KindCache, LabelCounters, caught_up};
use crate::sharding::config::ShardingConfig;
use crate::sharding::departed::Departed;
use crate::sharding::labels::{Decision, decide, drain_patch, relabel_patch};
use crate::sharding::ring::Ring;

/// Where a look reads the ring's members from.
pub(super) trait Members: Sync {
    /// The ring state's members, read afresh (`None`: unreadable now).
    fn fresh(&self) -> BoxFuture<'_, Option<Vec<String>>>;
    /// How long ago `shard`'s Lease expired, by this replica's observations.
    fn expired_for(&self, shard: &str) -> Option<Duration>;
}

/// What one sharder remembers from one look to the next.
#[derive(Debug, Default)]
pub(super) struct Looks {
    /// The members of the last look (`None`: no look yet).
    members: Option<Vec<String>>,
    /// Primary key -> the shard it was counted for.
    counted: HashMap<String, String>,
    /// Objects per shard: `counted` summed.
    per_shard: HashMap<String, u64>,
    /// Primary key -> the shard of an object whose move failed.
    stopped_left: HashMap<String, String>,
    /// Keys to look at again at the next look.
    retry: HashSet<String>,
    /// Stopped shards, and since when their Lease expired.
    dead_since: HashMap<String, Instant>,
    /// Objects (primaries and owned) looked at so far: what the looks cost.
    pub(super) visited: u64,
}

impl Looks {
    /// Forgets what was counted of `key` (it is looked at again).
    fn forget(&mut self, key: &str) {
        if let Some(shard) = self.counted.remove(key)
            && let Some(n) = self.per_shard.get_mut(&shard)
        {
            *n -= 1;
            if *n == 0 {
                self.per_shard.remove(&shard);
            }
        }
        self.stopped_left.remove(key);
    }

    /// Counts `key` (forgotten before) for `shard`.
    fn count(&mut self, key: &str, shard: &str) {
        self.counted.insert(key.to_string(), shard.to_string());
        *self.per_shard.entry(shard.to_string()).or_default() += 1;
    }

    /// Starts over (every object is about to be looked at).
    fn reset(&mut self, members: Vec<String>) {
        self.members = Some(members);
        self.counted.clear();
        self.per_shard.clear();
        self.stopped_left.clear();
        self.retry.clear();
    }
}

/// The objects of `keys` in `cache` (all of them when `keys` is `None`).
fn read(cache: &dyn KindCache, keys: Option<&HashSet<String>>, cfg: &ShardingConfig) -> Vec<Entry> {
    match keys {
        None => cache.entries(cfg),
        Some(keys) => keys.iter().flat_map(|k| cache.entries_of(k, cfg)).collect(),
    }
}

async fn members_now(ring: &dyn Members) -> Option<Vec<String>> {
    ring.fresh().await.filter(|m| !m.is_empty())
}

type Children = HashMap<String, Vec<(usize, Entry)>>;

fn children_of(
    owned: &[Box<dyn KindCache>],
    keys: Option<&HashSet<String>>,
    cfg: &ShardingConfig,
) -> Children {
    let mut children: Children = HashMap::new();
    for (i, c) in owned.iter().enumerate() {
        for e in read(c.as_ref(), keys, cfg) {
            children.entry(e.key.clone()).or_default().push((i, e));
        }
    }
    children
}

/// What a look does with the outcome of one job of writes.
enum Then {
    /// A primary key left where it is (its owned objects relabelled) or
    /// undrained: looked at again if a write failed.
    Settle { key: String },
    /// The drain of a primary key asked for.
    Drain { key: String },
    /// A primary key labelled with `target`, its owned objects first;
    /// `fresh`: a new object (assigned, not moved); `from`: the shard it
    /// had.
    Move {
        key: String,
        target: String,
        fresh: bool,
        from: Option<String>,
    },
    /// An owned object whose owner the sharder has not seen (yet).
    Orphan { key: String },
    /// An object that left the selection, unlabelled.
    Release,
}

/// One look; see the module documentation and the labeller's. Its writes
/// go through `writer` (see [`write`](super::write)).
pub(super) async fn look(
    cfg: &ShardingConfig,
    caches: &[Box<dyn KindCache>],
    departed: &Departed,
    ring_members: &dyn Members,
    counters: &LabelCounters,
    writer: &Writer,
    state: &mut Looks,
) {
    let Some((primary, owned)) = caches.split_first() else {
        return;
    };
    let (shard_label, drain_label) = (cfg.shard_label(), cfg.drain_label());
    // Out of the selection: no shard caches them any more, so none
    // would acknowledge a drain; unlabelled here (a conflict means the
    // object changed since, and the caches show it again).
    let mut released = Vec::new();
    for (kind, cache) in caches.iter().enumerate() {
        for e in cache.take_left() {
            let patch = relabel_patch(&shard_label, &drain_label, None, &e.resource_version);
            released.push(Job {
                first: Vec::new(),
                then: Some(Write {
                    kind,
                    entry: e,
                    patch,
                }),
                tag: Then::Release,
            });
        }
    }
    if !released.is_empty() {
        let outcomes = writer.run(caches, released).await;
        let n = outcomes.iter().filter(|o| o.all_ok()).count();
        counters.released.fetch_add(n as u64, Ordering::Relaxed);
    }
    // The keys touched since the last look, taken before their objects are
    // read (a change after this is noted for the next look).
    let mut dirty = std::mem::take(&mut state.retry);
    for c in caches {
        dirty.extend(c.take_dirty());
    }
    if state.members.is_some() && dirty.is_empty() {
        // Nothing changed unless the ring did.
        match members_now(ring_members).await {
            Some(m) if state.members.as_ref() == Some(&m) => return,
            _ => {}
        }
    }
    // Labels first, the ring state afterwards (see the labeller's docs).
    let mut primaries = read(primary.as_ref(), Some(&dirty), cfg);
    let mut children = children_of(owned, Some(&dirty), cfg);
    // Every deletion the cache applied before `primaries` was read has
    // been recorded once its handler has caught up (it only records):
    // new objects are labelled only then.
    let mut recorded = caught_up(primary.as_ref()).await;
    let Some(mut members) = members_now(ring_members).await else {
        state.retry = dirty;
        return;
    };
    if state.members.as_ref() != Some(&members) {
        // The ring changed: every object, read before the members again.
        primaries = read(primary.as_ref(), None, cfg);
        children = children_of(owned, None, cfg);
        recorded = caught_up(primary.as_ref()).await;
        members = match members_now(ring_members).await {
            Some(m) => m,
            None => {
                state.retry = dirty;
                return;
            }
        };
        state.reset(members.clone());
    } else {
        // Keys whose primary is gone are counted no more.
        for key in &dirty {
            state.forget(key);
        }
    }
    state.visited += (primaries.len() + children.values().map(Vec::len).sum::<usize>()) as u64;
    let ring = Ring::with_virtual_nodes(members.iter().cloned(), cfg.virtual_nodes);
    departed.retain_members(&members);
    let relabel = |e: &Entry, to: Option<&str>| {
        relabel_patch(&shard_label, &drain_label, to, &e.resource_version)
    };
    // Owned objects not labelled `target` (or draining), as writes.
    let follow = |kids: Vec<(usize, Entry)>, target: &str| -> Vec<Write> {
        kids.into_iter()
            .filter(|(_, c)| c.labelled.shard.as_deref() != Some(target) || c.labelled.draining)
            .map(|(i, c)| Write {
                kind: i + 1,
                patch: relabel(&c, Some(target)),
                entry: c,
            })
            .collect()
    };
    let now = Instant::now();
    for p in &primaries {
        if let Some(s) = &p.labelled.shard
            && !members.contains(s)
            && !state.dead_since.contains_key(s)
        {
            let expired = ring_members.expired_for(s).unwrap_or_default();
            state
                .dead_since
                .insert(s.clone(), now.checked_sub(expired).unwrap_or(now));
        }
    }
    // What to write, decided from the labels read: no write depends on
    // another key's, so the jobs run concurrently.
    let mut jobs = Vec::new();
    for p in primaries {
        state.forget(&p.key);
        let Some(ring_target) = ring.owner(&p.key) else {
            continue;
        };
        let kids = children.remove(&p.key).unwrap_or_default();
        let decision = decide(&p.labelled, ring_target, &members);
        // A new object: to the shard of a deleted one under its key, if
        // that shard lives (it may still reconcile the deletion).
        let fresh = decision == Decision::Assign && !p.labelled.draining;
        if fresh && !recorded {
            state.retry.insert(p.key.clone());
            continue;
        }
        let previous = fresh
            .then(|| departed.get(&p.key))
            .flatten()
            .filter(|s| members.contains(s));
        let target = previous.as_deref().unwrap_or(ring_target).to_string();
        match decision {
            Decision::Keep | Decision::Wait | Decision::Drain | Decision::Undrain => {
                if let Some(shard) = &p.labelled.shard {
                    state.count(&p.key, shard);
                }
            }
            Decision::Assign | Decision::Reassign => {}
        }
        let key = p.key.clone();
        let job = match decision {
            // Owned objects follow their owner's shard.
            Decision::Keep => Job {
                first: follow(kids, &target),
                then: None,
                tag: Then::Settle { key },
            },
            Decision::Wait => continue,
            Decision::Drain => Job {
                first: Vec::new(),
                then: Some(Write {
                    kind: 0,
                    patch: drain_patch(&drain_label, &p.resource_version),
                    entry: p,
                }),
                tag: Then::Drain { key },
            },
            Decision::Undrain => Job {
                first: Vec::new(),
                then: Some(Write {
                    kind: 0,
                    patch: relabel(&p, Some(&target)),
                    entry: p,
                }),
                tag: Then::Settle { key },
            },
            // Owned objects first, so that the new shard finds them in
            // its cache when it gets the owner.
            Decision::Assign | Decision::Reassign => {
                let from = p.labelled.shard.clone();
                Job {
                    first: follow(kids, &target),
                    then: Some(Write {
                        kind: 0,
                        patch: relabel(&p, Some(&target)),
                        entry: p,
                    }),
                    tag: Then::Move {
                        key,
                        fresh,
                        from,
                        target,
                    },
                }
            }
        };
        if !job.first.is_empty() || job.then.is_some() {
            jobs.push(job);
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
                let key = c.key.clone();
                jobs.push(Job {
                    first: vec![Write {
                        kind: i + 1,
                        patch: relabel(&c, Some(target)),
                        entry: c,
                    }],
                    then: None,
                    tag: Then::Orphan { key },
                });
            }
        }
    }
    for outcome in writer.run(caches, jobs).await {
        let ok = outcome.all_ok();
        match outcome.tag {
            Then::Settle { key } | Then::Orphan { key } => {
                if !ok {
                    // Tried again at the next look.
                    state.retry.insert(key);
                }
            }
            Then::Drain { key } => {
                if ok {
                    counters.drains.fetch_add(1, Ordering::Relaxed);
                } else {
                    state.retry.insert(key);
                }
            }
            Then::Move {
                key,
                target,
                fresh,
                from,
            } => {
                if ok {
                    if fresh {
                        departed.take(&key);
                    }
                    state.count(&key, &target);
                    let counter = if fresh {
                        &counters.assigned
                    } else {
                        &counters.moves
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                } else {
                    if let Some(s) = from {
                        state.stopped_left.insert(key.clone(), s);
                    }
                    state.retry.insert(key);
                }
            }
            // Counted where they are written, before the look.
            Then::Release => {}
        }
    }
    // Time to reassign a stopped shard's objects: from when its Lease
    // expired (by this replica's observations) to the end of the look that
    // moved its last object.
    let written = Instant::now();
    let Looks {
        dead_since,
        stopped_left,
        per_shard,
        ..
    } = state;
    dead_since.retain(|shard, since| {
        let done = !stopped_left.values().any(|s| s == shard) && !per_shard.contains_key(shard);
        if done {
            counters
                .reassign_seconds
                .lock()
                .push(written.duration_since(*since).as_secs_f64());
        }
        !done
    });
    *counters.per_shard.lock() = per_shard.clone();
}
