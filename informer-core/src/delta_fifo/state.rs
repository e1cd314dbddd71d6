//! The FIFO's data, manipulated under its lock.
//!
//! Each key is one shared string, held by both the queue and the map (and
//! handed on to the indexer by the informer). The queue and the map give
//! back their memory as they drain: a FIFO that took a 10,000-object list
//! keeps no per-object capacity once that list has been popped.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::MutexGuard;
use tokio::sync::watch;

use super::{Delta, DeltaType, Deltas};

pub(super) struct State<K> {
    /// Deltas per queued key; has exactly the keys of `queue`.
    pub(super) items: HashMap<Arc<str>, Vec<Delta<K>>>,
    /// Keys in pop order, each once.
    pub(super) queue: VecDeque<Arc<str>>,
    /// Set by the first add/update/delete/replace.
    pub(super) populated: bool,
    /// Items of the first `replace` not popped yet.
    pub(super) initial_population_count: usize,
    /// `has_synced` was seen true and told to the FIFO's waiters.
    pub(super) synced_told: bool,
    pub(super) closed: bool,
    pub(super) last_sync_rv: Option<String>,
    /// The keys listed so far by a replace that arrives page by page.
    pub(super) replacing: Option<Listed>,
}

/// What a replace in progress keeps of the keys it listed.
pub(super) enum Listed {
    /// None: nothing was queued or known when it began (the first list), so
    /// no key can need a tombstone.
    Untracked,
    /// Every key listed so far.
    Keys(HashSet<Arc<str>>),
}

impl<K> Default for State<K> {
    fn default() -> Self {
        State {
            items: HashMap::new(),
            queue: VecDeque::new(),
            populated: false,
            initial_population_count: 0,
            synced_told: false,
            closed: false,
            last_sync_rv: None,
            replacing: None,
        }
    }
}

/// Collapses two trailing `Deleted` deltas into one: keeps the newer if the
/// older is a tombstone (the newer knows more), else the older.
fn dedup_deletes<K>(deltas: &mut Vec<Delta<K>>) {
    let n = deltas.len();
    if n < 2 || deltas[n - 1].kind != DeltaType::Deleted || deltas[n - 2].kind != DeltaType::Deleted
    {
        return;
    }
    if deltas[n - 2].object.is_tombstone() {
        deltas.remove(n - 2);
    } else {
        deltas.pop();
    }
}

/// Capacity (in keys) the queue and the map keep however far they drain, so
/// a steady trickle of watch events does not reallocate on every push.
pub(super) const RETAINED_CAPACITY: usize = 64;

impl<K> State<K> {
    pub(super) fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }

    /// Appends `delta` to `key`'s deltas; a new key goes to the tail.
    pub(super) fn queue_action(&mut self, key: Arc<str>, delta: Delta<K>) {
        match self.items.entry(key) {
            Entry::Occupied(e) => {
                let deltas = e.into_mut();
                deltas.push(delta);
                dedup_deletes(deltas);
            }
            Entry::Vacant(e) => {
                self.queue.push_back(e.key().clone());
                e.insert(vec![delta]);
            }
        }
    }

    /// Removes the head key with its deltas, marking whether it belongs to
    /// the initial list.
    pub(super) fn pop_front(&mut self) -> Option<Deltas<K>> {
        while let Some(key) = self.queue.pop_front() {
            let Some(deltas) = self.items.remove(&key) else {
                debug_assert!(false, "queued key {key} has no deltas");
                continue;
            };
            let is_in_initial_list = !self.has_synced();
            self.initial_population_count = self.initial_population_count.saturating_sub(1);
            self.shrink();
            return Some(Deltas {
                key,
                deltas,
                is_in_initial_list,
            });
        }
        None
    }

    /// Gives back capacity once less than a quarter of it is used (halving
    /// the slack each time, so a drain costs amortised O(1) per pop), down to
    /// [`RETAINED_CAPACITY`].
    fn shrink(&mut self) {
        let len = self.queue.len();
        let target = (len * 2).max(RETAINED_CAPACITY);
        if self.queue.capacity() > RETAINED_CAPACITY && len < self.queue.capacity() / 4 {
            self.queue.shrink_to(target);
        }
        if self.items.capacity() > RETAINED_CAPACITY && len < self.items.capacity() / 4 {
            self.items.shrink_to(target);
        }
    }

    /// Keys and capacity of the queue and the map, for tests.
    #[cfg(test)]
    pub(super) fn capacities(&self) -> (usize, usize) {
        (self.queue.capacity(), self.items.capacity())
    }
}

/// The locked state; letting it go tells the FIFO's `synced` watchers
/// when `has_synced` has turned true (it never turns false again).
pub(super) struct Locked<'a, K> {
    pub(super) state: MutexGuard<'a, State<K>>,
    pub(super) synced: &'a watch::Sender<bool>,
}

impl<K> std::ops::Deref for Locked<'_, K> {
    type Target = State<K>;
    fn deref(&self) -> &State<K> {
        &self.state
    }
}

impl<K> std::ops::DerefMut for Locked<'_, K> {
    fn deref_mut(&mut self) -> &mut State<K> {
        &mut self.state
    }
}

impl<K> Drop for Locked<'_, K> {
    fn drop(&mut self) {
        if !self.state.synced_told && self.state.has_synced() {
            self.state.synced_told = true;
            self.synced.send_replace(true);
        }
    }
}
