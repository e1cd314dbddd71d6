//! Property tests: the queue's guarantees under random interleavings.
//!
//! - the bookkeeping matches a simple model of client-go's rules (plus
//!   priorities) for any sequence of add/get/done;
//! - with N workers on random schedules, no item is processed by two workers
//!   at once, every add is followed by a processing of that item, and the
//!   queue drains after shutdown (basic and priority adds);
//! - a delayed item becomes ready exactly at the earliest of its ready times
//!   (on the bookkeeping and through the queue on the paused clock);
//! - exponential backoff is `base * 2^failures`, capped;
//! - stale entries left by re-adds stay bounded.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proptest::prelude::*;
use tokio::time::Instant;

use crate::workqueue::priority::Priority;
use crate::workqueue::state::{Pop, State};
use crate::workqueue::{AddOptions, Queue};

#[derive(Clone, Debug)]
enum Op {
    Add(u8, i32),
    Get,
    Done(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..6, -1i32..=1).prop_map(|(item, prio)| Op::Add(item, prio)),
        2 => Just(Op::Get),
        2 => any::<usize>().prop_map(Op::Done),
    ]
}

/// The rules in their simplest form: pending items with a priority and a
/// FIFO ticket, and a processing set.
#[derive(Default)]
struct Model {
    pending: HashMap<u8, (i32, u64)>,
    processing: Vec<u8>,
    ticket: u64,
}

impl Model {
    fn add(&mut self, item: u8, prio: i32) {
        self.ticket += 1;
        let ticket = self.ticket;
        let blocked = self.processing.contains(&item);
        match self.pending.get_mut(&item) {
            None => {
                self.pending.insert(item, (prio, ticket));
            }
            // A raised ready item joins the tail of its new priority.
            Some(entry) if prio > entry.0 => {
                *entry = (prio, if blocked { entry.1 } else { ticket })
            }
            Some(_) => {}
        }
    }
    fn get(&mut self) -> Option<u8> {
        let next = self
            .pending
            .iter()
            .filter(|(item, _)| !self.processing.contains(item))
            .max_by_key(|(_, (prio, ticket))| (*prio, std::cmp::Reverse(*ticket)))
            .map(|(item, _)| *item)?;
        self.pending.remove(&next);
        self.processing.push(next);
        Some(next)
    }
    fn done(&mut self, idx: usize) -> Option<u8> {
        if self.processing.is_empty() {
            return None;
        }
        let item = self.processing.remove(idx % self.processing.len());
        if let Some(entry) = self.pending.get_mut(&item) {
            self.ticket += 1;
            entry.1 = self.ticket;
        }
        Some(item)
    }
    fn len(&self) -> usize {
        self.pending
            .keys()
            .filter(|item| !self.processing.contains(item))
            .count()
    }
}

proptest! {
    #[test]
    fn state_follows_the_model(ops in prop::collection::vec(op(), 1..200)) {
        let now = Instant::now();
        let mut state = State::new();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Add(item, prio) => {
                    state.add(item, Priority(prio), now, now);
                    model.add(item, prio);
                }
                Op::Get => {
                    let got = match state.pop(now) {
                        Pop::Item { item, .. } => Some(item),
                        _ => None,
                    };
                    prop_assert_eq!(got, model.get());
                }
                Op::Done(idx) => {
                    if let Some(item) = model.done(idx) {
                        prop_assert!(state.done(&item, now).worked.is_some());
                    }
                }
            }
            prop_assert_eq!(state.len(), model.len());
            prop_assert_eq!(state.processing_len(), model.processing.len());
        }
    }

    #[test]
    fn delayed_item_is_ready_at_its_earliest_time(
        adds in prop::collection::vec((0u8..8, 0u64..50, 0u64..500), 1..60)
    ) {
        let start = Instant::now();
        let mut now = start;
        let mut state = State::new();
        let mut expected: HashMap<u8, Instant> = HashMap::new();
        for (item, step, delay) in adds {
            now += Duration::from_millis(step);
            let ready_at = now + Duration::from_millis(delay);
            state.add(item, Priority::NORMAL, ready_at, now);
            let e = expected.entry(item).or_insert(ready_at);
            *e = (*e).min(ready_at);
        }
        let mut seen = HashSet::new();
        // Everything due by the end of the adds is ready now.
        state.promote(now);
        while let Pop::Item { item, .. } = state.pop(now) {
            prop_assert!(expected[&item] <= now);
            prop_assert!(seen.insert(item));
        }
        // The rest becomes ready exactly at its earliest time, not before.
        while let Some(at) = state.next_ready() {
            prop_assert!(at > now);
            let before = at - Duration::from_nanos(1);
            state.promote(before);
            let early = matches!(state.pop(before), Pop::Empty { .. });
            prop_assert!(early, "an item became ready before its time");
            state.promote(at);
            while let Pop::Item { item, .. } = state.pop(at) {
                prop_assert_eq!(expected[&item], at);
                prop_assert!(seen.insert(item));
            }
        }
        prop_assert_eq!(seen.len(), expected.len());
    }
}

/// The earliest-time rule through the public API on tokio's paused clock:
/// `add_after` at random moments, then each item must become available
/// exactly at the earliest of its ready times, not a nanosecond before.
fn delayed_queue_run(adds: Vec<(u8, u64, u64)>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let q: Queue<u8> = Queue::new();
        let mut expected: HashMap<u8, Instant> = HashMap::new();
        for (item, step, delay) in adds {
            tokio::time::advance(Duration::from_millis(step)).await;
            let ready_at = Instant::now() + Duration::from_millis(delay);
            q.add_after(item, Duration::from_millis(delay));
            let e = expected.entry(item).or_insert(ready_at);
            *e = (*e).min(ready_at);
        }
        let mut seen = HashSet::new();
        let now = Instant::now();
        while let Some(item) = q.try_get() {
            prop_assert!(expected[&item] <= now);
            prop_assert!(seen.insert(item));
            q.done(&item);
        }
        let mut times: Vec<Instant> = expected.values().copied().filter(|t| *t > now).collect();
        times.sort();
        times.dedup();
        for at in times {
            let before = at - Duration::from_nanos(1);
            tokio::time::advance(before - Instant::now()).await;
            prop_assert_eq!(q.try_get(), None, "ready before its time");
            tokio::time::advance(Duration::from_nanos(1)).await;
            while let Some(item) = q.try_get() {
                prop_assert_eq!(expected[&item], at);
                prop_assert!(seen.insert(item));
                q.done(&item);
            }
        }
        prop_assert_eq!(seen.len(), expected.len());
        prop_assert_eq!(q.delayed(), 0);
        Ok(())
    })
}

proptest! {
    #[test]
    fn queue_add_after_keeps_the_earliest_time(
        adds in prop::collection::vec((0u8..8, 0u64..50, 0u64..500), 1..40)
    ) {
        delayed_queue_run(adds)?;
    }

    #[test]
    fn exponential_backoff_is_base_times_two_to_the_failures_capped(
        base_ms in 1u64..1000,
        max_ms in 1u64..100_000,
        failures in 1usize..80,
    ) {
        use crate::workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
        let base = Duration::from_millis(base_ms);
        let max = Duration::from_millis(max_ms);
        let limiter = ItemExponentialFailureRateLimiter::new(base, max);
        for n in 0..failures {
            let want = u32::try_from(n)
                .ok()
                .and_then(|n| 2u64.checked_pow(n))
                .and_then(|f| base_ms.checked_mul(f))
                .map_or(max, |ms| Duration::from_millis(ms).min(max));
            prop_assert_eq!(limiter.when(&0u8), want);
        }
        prop_assert_eq!(limiter.num_requeues(&0u8) as usize, failures);
    }
}

/// What the workers saw, checked after the run.
#[derive(Default)]
struct Tracker {
    seq: u64,
    last_add: HashMap<u8, u64>,
    last_start: HashMap<u8, u64>,
    in_flight: HashSet<u8>,
    overlaps: Vec<u8>,
}

/// Runs `workers` workers against a producer following `script`
/// (item, priority, yields after the add); checks the three guarantees.
fn run_workers(
    workers: usize,
    script: Vec<(u8, i32, u8)>,
    work: Vec<u8>,
    priorities: bool,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let q: Queue<u8> = Queue::new();
        let tracker = Arc::new(Mutex::new(Tracker::default()));
        let mut handles = Vec::new();
        for w in 0..workers {
            let (q, tracker, work) = (q.clone(), Arc::clone(&tracker), work.clone());
            handles.push(tokio::spawn(async move {
                let mut step = w;
                while let Some(item) = q.get().await {
                    {
                        let mut t = tracker.lock();
                        if !t.in_flight.insert(item) {
                            t.overlaps.push(item);
                        }
                        t.seq += 1;
                        let seq = t.seq;
                        t.last_start.insert(item, seq);
                    }
                    let pause = work[step % work.len()];
                    step += 1;
                    for _ in 0..pause % 4 {
                        tokio::task::yield_now().await;
                    }
                    if pause >= 4 {
                        tokio::time::sleep(Duration::from_millis(u64::from(pause))).await;
                    }
                    tracker.lock().in_flight.remove(&item);
                    q.done(&item);
                }
            }));
        }
        for (item, prio, yields) in script {
            {
                let mut t = tracker.lock();
                t.seq += 1;
                let seq = t.seq;
                t.last_add.insert(item, seq);
            }
            if priorities {
                q.add_with(item, AddOptions::new().priority(Priority(prio)));
            } else {
                q.add(item);
            }
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::timeout(Duration::from_secs(3600), q.shut_down_with_drain())
            .await
            .map_err(|_| TestCaseError::fail("shut_down_with_drain did not finish"))?;
        for h in handles {
            tokio::time::timeout(Duration::from_secs(3600), h)
                .await
                .map_err(|_| TestCaseError::fail("a worker did not stop"))?
                .unwrap();
        }
        let t = tracker.lock();
        prop_assert!(
            t.overlaps.is_empty(),
            "processed concurrently: {:?}",
            t.overlaps
        );
        for (item, added) in &t.last_add {
            let started = t.last_start.get(item).copied().unwrap_or(0);
            prop_assert!(started > *added, "add of {} at {} lost", item, added);
        }
        prop_assert_eq!(q.len(), 0);
        prop_assert_eq!(q.processing(), 0);
        Ok(())
    })
}

fn script() -> impl Strategy<Value = Vec<(u8, i32, u8)>> {
    prop::collection::vec((0u8..6, -1i32..=1, 0u8..4), 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn workers_never_overlap_lose_adds_or_hang(
        workers in 1usize..6,
        script in script(),
        work in prop::collection::vec(0u8..12, 1..16),
    ) {
        run_workers(workers, script, work, false)?;
    }

    #[test]
    fn priority_workers_never_overlap_lose_adds_or_hang(
        workers in 1usize..6,
        script in script(),
        work in prop::collection::vec(0u8..12, 1..16),
    ) {
        run_workers(workers, script, work, true)?;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_threads_of_workers_keep_the_guarantees() {
    const ITEMS: u32 = 64;
    const ADDS: u32 = 20_000;
    let q: Queue<u32> = Queue::new();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let adds = Arc::new(Mutex::new(HashMap::<u32, u64>::new()));
    let starts = Arc::new(Mutex::new(HashMap::<u32, u64>::new()));
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..8 {
        let (q, in_flight, starts, seq) = (
            q.clone(),
            Arc::clone(&in_flight),
            Arc::clone(&starts),
            Arc::clone(&seq),
        );
        handles.push(tokio::spawn(async move {
            while let Some(item) = q.get().await {
                assert!(
                    in_flight.lock().insert(item),
                    "{item} processed twice at once"
                );
                let s = seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                starts.lock().insert(item, s);
                tokio::task::yield_now().await;
                in_flight.lock().remove(&item);
                q.done(&item);
            }
        }));
    }
    for i in 0..ADDS {
        let item = i % ITEMS;
        let s = seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        adds.lock().insert(item, s);
        q.add(item);
        if i % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    tokio::time::timeout(Duration::from_secs(60), q.shut_down_with_drain())
        .await
        .unwrap();
    for h in handles {
        tokio::time::timeout(Duration::from_secs(60), h)
            .await
            .unwrap()
            .unwrap();
    }
    let (adds, starts) = (adds.lock(), starts.lock());
    for (item, added) in adds.iter() {
        assert!(starts[item] > *added, "add of {item} lost");
    }
}

#[test]
fn stale_entries_stay_bounded() {
    let mut now = Instant::now();
    let mut state = State::new();
    for round in 0..10_000u32 {
        let item = round % 3;
        // A long requeue-after, overtaken by a change: leaves a stale entry.
        state.add(item, Priority::NORMAL, now + Duration::from_secs(3600), now);
        state.add(item, Priority::LOW, now, now);
        // A priority raise while ready: leaves another.
        state.add(item, Priority::HIGH, now, now);
        if let Pop::Item { item, .. } = state.pop(now) {
            state.done(&item, now);
        }
        now += Duration::from_millis(1);
    }
    assert!(state.entries() < 300, "{} entries kept", state.entries());
    assert!(state.len() <= 3);
}
