//! The queue's bookkeeping, free of locks, tasks and clock reads.
//!
//! [`State`] holds every rule of the workqueue as plain data: which items are
//! pending (and whether they are ready, waiting for a delay, or blocked
//! because a worker is processing them), which are being processed, and the
//! order in which ready items are handed out. The caller passes the current
//! time in, which keeps this module deterministic and directly testable; the
//! async handle in `queue.rs` wraps it in a mutex and adds waiting.
//!
//! Each item has at most one *pending* record. Re-adding a pending item
//! merges into that record: the highest priority and the earliest ready time
//! win. Entries in the ready buckets and the delay heap carry a stamp; when a
//! record moves (higher priority, earlier time) it gets a new stamp and a new
//! entry, and the old entry is skipped when reached (and compacted away once
//! stale entries outnumber live ones).

use std::cmp::{Ordering, Reverse};
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use super::priority::Priority;

/// Stale entries tolerated before a compaction is considered.
const COMPACT_MIN_STALE: usize = 64;

/// Where an item's pending record currently lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Location {
    /// In a ready bucket: `get` may hand it out.
    Ready,
    /// In the delay heap until its ready time.
    Delayed,
    /// Added while a worker processes it: placed when the worker calls `done`.
    Blocked,
}

#[derive(Debug)]
struct Pending {
    priority: Priority,
    ready_at: Instant,
    stamp: u64,
    location: Location,
}

/// Everything the queue knows about one item. A slot exists while the item
/// is pending, being processed, or both.
#[derive(Debug)]
struct Slot {
    processing_since: Option<Instant>,
    pending: Option<Pending>,
}

struct DelayedEntry<T> {
    ready_at: Instant,
    stamp: u64,
    item: T,
}

impl<T> PartialEq for DelayedEntry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.ready_at == other.ready_at && self.stamp == other.stamp
    }
}
impl<T> Eq for DelayedEntry<T> {}
impl<T> PartialOrd for DelayedEntry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for DelayedEntry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.ready_at, self.stamp).cmp(&(other.ready_at, other.stamp))
    }
}

/// Who should be woken after a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Nothing a waiter could act on changed.
    None,
    /// One more item is ready: wake one waiter.
    One,
    /// The earliest delay deadline moved earlier: every sleeping waiter must
    /// recompute its deadline.
    All,
}

/// What an `add` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AddOutcome {
    /// The item was not pending before (counts as an add in the metrics).
    pub(crate) new: bool,
    pub(crate) wake: Wake,
}

/// What a `pop` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pop<T> {
    /// An item for a worker, and how long it waited since it became ready.
    Item { item: T, waited: Duration },
    /// Nothing ready; the earliest delayed item becomes ready at `next_ready`.
    Empty { next_ready: Option<Instant> },
    /// Nothing ready and the queue is shutting down.
    Closed,
}

/// What a `done` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DoneOutcome {
    /// How long the item was processed; `None` if it was not being processed.
    pub(crate) worked: Option<Duration>,
    pub(crate) wake: Wake,
}

/// Ready items: one FIFO per priority, highest priority first.
struct Buckets<T> {
    buckets: Vec<(Priority, VecDeque<(T, u64)>)>,
}

impl<T> Buckets<T> {
    fn push(&mut self, priority: Priority, item: T, stamp: u64) {
        let idx = match self.buckets.iter().position(|(p, _)| *p <= priority) {
            Some(i) if self.buckets[i].0 == priority => i,
            Some(i) => {
                self.buckets.insert(i, (priority, VecDeque::new()));
                i
            }
            None => {
                self.buckets.push((priority, VecDeque::new()));
                self.buckets.len() - 1
            }
        };
        self.buckets[idx].1.push_back((item, stamp));
    }
}

/// The workqueue's rules as data. See the module documentation.
pub(crate) struct State<T> {
    slots: HashMap<T, Slot, foldhash::fast::RandomState>,
    ready: Buckets<T>,
    delayed: BinaryHeap<Reverse<DelayedEntry<T>>>,
    next_stamp: u64,
    ready_len: usize,
    delayed_len: usize,
    blocked_len: usize,
    processing_len: usize,
    stale_ready: usize,
    stale_delayed: usize,
    shutting_down: bool,
    /// The latest time passed in: a stand-in for the clock when the exact
    /// time does not matter (see `Queue`'s use of `clock_hint`).
    last_now: Instant,
    /// `get` calls asleep waiting for an item (kept by the handle).
    pub(crate) waiters: usize,
}

/// Where a changed record must be (re)inserted once the slot borrow ends.
enum Place<T> {
    Nowhere,
    Ready(T, Priority, u64),
    Delayed(T, Instant, u64),
}

impl<T: Clone + Eq + Hash> State<T> {
    pub(crate) fn new() -> Self {
        State {
            slots: HashMap::with_hasher(foldhash::fast::RandomState::default()),
            ready: Buckets {
                buckets: Vec::new(),
            },
            delayed: BinaryHeap::new(),
            next_stamp: 0,
            ready_len: 0,
            delayed_len: 0,
            blocked_len: 0,
            processing_len: 0,
            stale_ready: 0,
            stale_delayed: 0,
            shutting_down: false,
            last_now: Instant::now(),
            waiters: 0,
        }
    }

    /// The latest time any operation was given. Only ever earlier than the
    /// real time, so using it for an immediate add or a `pop` without
    /// delayed items changes no rule, only the precision of durations.
    pub(crate) fn clock_hint(&self) -> Instant {
        self.last_now
    }

    fn saw(&mut self, now: Instant) {
        if now > self.last_now {
            self.last_now = now;
        }
    }

    /// Items ready to be handed out (the queue's `len`).
    pub(crate) fn len(&self) -> usize {
        self.ready_len
    }

    /// Items waiting for a worker: ready ones plus ones re-added while being
    /// processed (the `workqueue_depth` gauge, as client-go counts it).
    pub(crate) fn depth(&self) -> usize {
        self.ready_len + self.blocked_len
    }

    /// Items waiting for their delay to pass.
    pub(crate) fn delayed_len(&self) -> usize {
        self.delayed_len
    }

    /// Items handed out and not yet `done`.
    pub(crate) fn processing_len(&self) -> usize {
        self.processing_len
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Adds `item`, ready at `ready_at`, with `priority`. Merges into an
    /// existing pending record: highest priority and earliest time win.
    pub(crate) fn add(
        &mut self,
        item: T,
        priority: Priority,
        ready_at: Instant,
        now: Instant,
    ) -> AddOutcome {
        self.saw(now);
        if self.shutting_down {
            return AddOutcome {
                new: false,
                wake: Wake::None,
            };
        }
        self.next_stamp += 1;
        let stamp = self.next_stamp;
        let ready_now = ready_at <= now;
        let mut new = false;
        let place = match self.slots.entry(item) {
            Entry::Vacant(vacant) => {
                new = true;
                let key = vacant.key().clone();
                let location = if ready_now {
                    Location::Ready
                } else {
                    Location::Delayed
                };
                vacant.insert(Slot {
                    processing_since: None,
                    pending: Some(Pending {
                        priority,
                        ready_at,
                        stamp,
                        location,
                    }),
                });
                if ready_now {
                    self.ready_len += 1;
                    Place::Ready(key, priority, stamp)
                } else {
                    self.delayed_len += 1;
                    Place::Delayed(key, ready_at, stamp)
                }
            }
            Entry::Occupied(mut occupied) => {
                let key = occupied.key().clone();
                let slot = occupied.get_mut();
                match &mut slot.pending {
                    None => {
                        // A slot without a pending record is being processed.
                        new = true;
                        self.blocked_len += 1;
                        slot.pending = Some(Pending {
                            priority,
                            ready_at,
                            stamp,
                            location: Location::Blocked,
                        });
                        Place::Nowhere
                    }
                    Some(p) => {
                        let raised = priority > p.priority;
                        let earlier = ready_at < p.ready_at;
                        p.priority = p.priority.max(priority);
                        p.ready_at = p.ready_at.min(ready_at);
                        match p.location {
                            Location::Blocked => Place::Nowhere,
                            Location::Ready if raised => {
                                self.stale_ready += 1;
                                p.stamp = stamp;
                                Place::Ready(key, p.priority, stamp)
                            }
                            Location::Ready => Place::Nowhere,
                            Location::Delayed if p.ready_at <= now => {
                                self.stale_delayed += 1;
                                self.delayed_len -= 1;
                                self.ready_len += 1;
                                p.stamp = stamp;
                                p.location = Location::Ready;
                                Place::Ready(key, p.priority, stamp)
                            }
                            Location::Delayed if earlier => {
                                self.stale_delayed += 1;
                                p.stamp = stamp;
                                Place::Delayed(key, p.ready_at, stamp)
                            }
                            Location::Delayed => Place::Nowhere,
                        }
                    }
                }
            }
        };
        let wake = self.place(place);
        self.maybe_compact();
        AddOutcome { new, wake }
    }

    fn place(&mut self, place: Place<T>) -> Wake {
        match place {
            Place::Nowhere => Wake::None,
            Place::Ready(item, priority, stamp) => {
                self.ready.push(priority, item, stamp);
                Wake::One
            }
            Place::Delayed(item, ready_at, stamp) => {
                let earliest = self
                    .delayed
                    .peek()
                    .is_none_or(|Reverse(top)| ready_at < top.ready_at);
                self.delayed.push(Reverse(DelayedEntry {
                    ready_at,
                    stamp,
                    item,
                }));
                if earliest { Wake::All } else { Wake::None }
            }
        }
    }

    /// Moves delayed items whose time has come to the ready buckets, in
    /// ready-time order. Returns how many moved.
    pub(crate) fn promote(&mut self, now: Instant) -> usize {
        self.saw(now);
        let mut moved = 0;
        while self
            .delayed
            .peek()
            .is_some_and(|Reverse(top)| top.ready_at <= now)
        {
            let Some(Reverse(entry)) = self.delayed.pop() else {
                break;
            };
            let pending = self
                .slots
                .get_mut(&entry.item)
                .and_then(|slot| slot.pending.as_mut());
            match pending {
                Some(p) if p.stamp == entry.stamp && p.location == Location::Delayed => {
                    p.location = Location::Ready;
                    self.delayed_len -= 1;
                    self.ready_len += 1;
                    self.ready.push(p.priority, entry.item, entry.stamp);
                    moved += 1;
                }
                _ => self.stale_delayed = self.stale_delayed.saturating_sub(1),
            }
        }
        moved
    }

    /// Hands out the next ready item (highest priority, then FIFO) and marks
    /// it processing. Call [`State::promote`] first.
    pub(crate) fn pop(&mut self, now: Instant) -> Pop<T> {
        self.saw(now);
        let mut found = None;
        'buckets: for (_, bucket) in self.ready.buckets.iter_mut() {
            while let Some((item, stamp)) = bucket.pop_front() {
                let Some(slot) = self.slots.get_mut(&item) else {
                    self.stale_ready = self.stale_ready.saturating_sub(1);
                    continue;
                };
                match &slot.pending {
                    Some(p) if p.stamp == stamp && p.location == Location::Ready => {
                        let waited = now.saturating_duration_since(p.ready_at);
                        slot.pending = None;
                        slot.processing_since = Some(now);
                        found = Some((item, waited));
                        break 'buckets;
                    }
                    _ => self.stale_ready = self.stale_ready.saturating_sub(1),
                }
            }
        }
        if self.ready.buckets.len() > 4 {
            self.ready.buckets.retain(|(_, bucket)| !bucket.is_empty());
        }
        if let Some((item, waited)) = found {
            self.ready_len -= 1;
            self.processing_len += 1;
            return Pop::Item { item, waited };
        }
        if self.shutting_down {
            return Pop::Closed;
        }
        Pop::Empty {
            next_ready: self.next_ready(),
        }
    }

    /// When the earliest delayed item becomes ready, dropping stale heap tops.
    pub(crate) fn next_ready(&mut self) -> Option<Instant> {
        while let Some(Reverse(top)) = self.delayed.peek() {
            let live = self
                .slots
                .get(&top.item)
                .and_then(|slot| slot.pending.as_ref())
                .is_some_and(|p| p.stamp == top.stamp && p.location == Location::Delayed);
            if live {
                return Some(top.ready_at);
            }
            self.delayed.pop();
            self.stale_delayed = self.stale_delayed.saturating_sub(1);
        }
        None
    }

    /// Ends processing of `item`. If it was re-added meanwhile, it is placed
    /// again (ready now or delayed), unless the queue is shutting down and
    /// its time has not come.
    pub(crate) fn done(&mut self, item: &T, now: Instant) -> DoneOutcome {
        self.saw(now);
        let not_processing = DoneOutcome {
            worked: None,
            wake: Wake::None,
        };
        // One lookup in the common case: take the slot out, put it back
        // only if the item was re-added meanwhile.
        let Some((key, mut slot)) = self.slots.remove_entry(item) else {
            return not_processing;
        };
        let Some(since) = slot.processing_since.take() else {
            self.slots.insert(key, slot);
            return not_processing;
        };
        self.processing_len -= 1;
        let worked = now.saturating_duration_since(since);
        let mut place = Place::Nowhere;
        if let Some(p) = &mut slot.pending {
            self.blocked_len -= 1;
            if p.ready_at <= now {
                p.location = Location::Ready;
                self.ready_len += 1;
                place = Place::Ready(key.clone(), p.priority, p.stamp);
            } else if self.shutting_down {
                slot.pending = None;
            } else {
                p.location = Location::Delayed;
                self.delayed_len += 1;
                place = Place::Delayed(key.clone(), p.ready_at, p.stamp);
            }
        }
        if slot.pending.is_some() {
            self.slots.insert(key, slot);
        }
        DoneOutcome {
            worked: Some(worked),
            wake: self.place(place),
        }
    }

    /// Stops accepting adds and forgets delayed items; ready items stay for
    /// `pop` to drain.
    pub(crate) fn shut_down(&mut self) {
        self.shutting_down = true;
        for Reverse(entry) in self.delayed.drain() {
            if let Some(slot) = self.slots.get_mut(&entry.item) {
                let live = slot
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.stamp == entry.stamp && p.location == Location::Delayed);
                if live {
                    slot.pending = None;
                    self.delayed_len -= 1;
                    if slot.processing_since.is_none() {
                        self.slots.remove(&entry.item);
                    }
                }
            }
        }
        self.stale_delayed = 0;
    }

    /// `(count, total seconds, longest seconds)` of items being processed.
    pub(crate) fn processing_stats(&self, now: Instant) -> (usize, f64, f64) {
        let mut total = 0.0;
        let mut longest = 0.0_f64;
        let mut count = 0;
        for slot in self.slots.values() {
            if let Some(since) = slot.processing_since {
                let secs = now.saturating_duration_since(since).as_secs_f64();
                total += secs;
                longest = longest.max(secs);
                count += 1;
            }
        }
        (count, total, longest)
    }

    fn maybe_compact(&mut self) {
        let slots = &self.slots;
        if self.stale_ready > COMPACT_MIN_STALE && self.stale_ready > self.ready_len {
            for (_, bucket) in self.ready.buckets.iter_mut() {
                bucket.retain(|(item, stamp)| {
                    slots
                        .get(item)
                        .and_then(|slot| slot.pending.as_ref())
                        .is_some_and(|p| p.stamp == *stamp && p.location == Location::Ready)
                });
            }
            self.stale_ready = 0;
        }
        if self.stale_delayed > COMPACT_MIN_STALE && self.stale_delayed > self.delayed_len {
            self.delayed.retain(|Reverse(entry)| {
                slots
                    .get(&entry.item)
                    .and_then(|slot| slot.pending.as_ref())
                    .is_some_and(|p| p.stamp == entry.stamp && p.location == Location::Delayed)
            });
            self.stale_delayed = 0;
        }
    }

    /// Priority buckets held, empty ones included (for tests).
    #[cfg(test)]
    pub(crate) fn buckets(&self) -> usize {
        self.ready.buckets.len()
    }

    /// Entries held in the buckets and the heap, live or stale (for tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.ready
            .buckets
            .iter()
            .map(|(_, b)| b.len())
            .sum::<usize>()
            + self.delayed.len()
    }
}

#[cfg(test)]
mod entry_tests {
    use std::cmp::Ordering;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::DelayedEntry;

    /// `Eq` must agree with `Ord` (the contract `BinaryHeap` relies on):
    /// two entries are equal exactly when neither orders before the other,
    /// whatever items they carry.
    #[test]
    fn delayed_entries_are_equal_exactly_when_they_order_equal() {
        let t0 = Instant::now();
        let times = [t0, t0 + Duration::from_secs(1)];
        let entries: Vec<DelayedEntry<&str>> = times
            .iter()
            .flat_map(|&ready_at| {
                [0, 1].into_iter().flat_map(move |stamp| {
                    ["a", "b"].into_iter().map(move |item| DelayedEntry {
                        ready_at,
                        stamp,
                        item,
                    })
                })
            })
            .collect();
        let mut equal_pairs = 0;
        for a in &entries {
            for b in &entries {
                let same = a.cmp(b) == Ordering::Equal;
                assert_eq!(
                    a == b,
                    same,
                    "({:?}, {}) vs ({:?}, {})",
                    a.ready_at,
                    a.stamp,
                    b.ready_at,
                    b.stamp
                );
                assert_eq!(a != b, !same);
                equal_pairs += usize::from(same);
            }
        }
        // Each (time, stamp) pair appears with two items: 4 × 2 × 2.
        assert_eq!(equal_pairs, 16);
    }
}
