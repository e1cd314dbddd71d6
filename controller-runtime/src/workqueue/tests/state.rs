//! The queue's state machine driven directly, with explicit times: the
//! bookkeeping the `Queue` tests cannot see from outside (the depth gauge
//! with blocked items, wake-ups, the clock hint, stale entries and their
//! compaction, bucket pruning), each tied to the rule it keeps.

use std::time::Duration;

use tokio::time::Instant;

use crate::workqueue::priority::Priority;
use crate::workqueue::state::{Pop, State, Wake};

const SEC: Duration = Duration::from_secs(1);

fn item(pop: Pop<u32>) -> u32 {
    match pop {
        Pop::Item { item, .. } => item,
        other => panic!("expected an item, got {other:?}"),
    }
}

#[test]
fn the_clock_hint_is_the_latest_time_seen() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(1, Priority::NORMAL, t0 + 5 * SEC, t0 + 5 * SEC);
    assert_eq!(s.clock_hint(), t0 + 5 * SEC);
    // An operation dated earlier does not move the hint back.
    s.promote(t0 + SEC);
    assert_eq!(s.clock_hint(), t0 + 5 * SEC);
    s.pop(t0 + 7 * SEC);
    assert_eq!(s.clock_hint(), t0 + 7 * SEC);
}

#[test]
fn depth_counts_items_re_added_while_processing() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(1, Priority::NORMAL, t0, t0);
    assert_eq!(item(s.pop(t0)), 1);
    assert_eq!(s.depth(), 0);
    // Re-added while a worker holds it: waiting for a worker, not ready.
    s.add(1, Priority::NORMAL, t0, t0);
    assert_eq!((s.len(), s.depth()), (0, 1));
    // Done: it is ready now, and no longer blocked.
    s.done(&1, t0 + SEC);
    assert_eq!((s.len(), s.depth()), (1, 1));
    assert_eq!(item(s.pop(t0 + SEC)), 1);
    assert_eq!(s.depth(), 0);
}

#[test]
fn an_immediate_add_of_a_delayed_item_makes_it_ready_at_once() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(1, Priority::NORMAL, t0 + 10 * SEC, t0);
    assert_eq!((s.len(), s.delayed_len()), (0, 1));
    let out = s.add(1, Priority::NORMAL, t0, t0);
    assert_eq!(out.wake, Wake::One);
    assert_eq!(
        (s.len(), s.delayed_len()),
        (1, 0),
        "ready before any promote"
    );
}

#[test]
fn re_adding_a_delayed_item_no_earlier_keeps_one_entry() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(1, Priority::NORMAL, t0 + 5 * SEC, t0);
    s.add(1, Priority::NORMAL, t0 + 5 * SEC, t0);
    s.add(1, Priority::NORMAL, t0 + 10 * SEC, t0);
    assert_eq!(s.entries(), 1, "the same or a later time changes nothing");
    s.add(1, Priority::NORMAL, t0 + 2 * SEC, t0);
    assert_eq!(s.entries(), 2, "an earlier time is a new heap entry");
    assert_eq!(s.promote(t0 + 2 * SEC), 1);
    assert_eq!(item(s.pop(t0 + 2 * SEC)), 1);
}

#[test]
fn only_an_earlier_deadline_wakes_every_sleeper() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    assert_eq!(
        s.add(1, Priority::NORMAL, t0 + 10 * SEC, t0).wake,
        Wake::All
    );
    assert_eq!(
        s.add(2, Priority::NORMAL, t0 + 10 * SEC, t0).wake,
        Wake::None,
        "the same deadline: sleepers already wake then"
    );
    assert_eq!(
        s.add(3, Priority::NORMAL, t0 + 20 * SEC, t0).wake,
        Wake::None
    );
    assert_eq!(s.add(4, Priority::NORMAL, t0 + 5 * SEC, t0).wake, Wake::All);
}

#[test]
fn promote_counts_what_it_moved() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    for i in 0..3 {
        s.add(i, Priority::NORMAL, t0 + SEC, t0);
    }
    s.add(9, Priority::NORMAL, t0 + 9 * SEC, t0);
    assert_eq!(s.promote(t0), 0);
    assert_eq!(s.promote(t0 + SEC), 3);
    assert_eq!(s.len(), 3);
}

/// Item 1 ends up delayed until t0+20 s with a stale heap entry for
/// t0+5 s in front of it (its first delay, superseded by an immediate add).
fn stale_entry_in_front(t0: Instant) -> State<u32> {
    let mut s: State<u32> = State::new();
    s.add(1, Priority::NORMAL, t0 + 5 * SEC, t0);
    s.add(1, Priority::NORMAL, t0, t0);
    assert_eq!(item(s.pop(t0)), 1);
    s.add(1, Priority::NORMAL, t0 + 20 * SEC, t0);
    s.done(&1, t0);
    assert_eq!(s.delayed_len(), 1);
    s
}

#[test]
fn a_stale_heap_entry_neither_releases_nor_dates_an_item() {
    let t0 = Instant::now();
    let mut s = stale_entry_in_front(t0);
    assert_eq!(
        s.pop(t0),
        Pop::Empty {
            next_ready: Some(t0 + 20 * SEC)
        },
        "the stale entry's time is not the next deadline"
    );
    let mut s = stale_entry_in_front(t0);
    assert_eq!(s.promote(t0 + 5 * SEC), 0, "not released at the stale time");
    assert_eq!(s.len(), 0);
    assert_eq!(s.promote(t0 + 20 * SEC), 1);
    assert_eq!(item(s.pop(t0 + 20 * SEC)), 1);
}

#[test]
fn processing_stats_count_and_time_items_being_processed() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(1, Priority::NORMAL, t0, t0);
    s.add(2, Priority::NORMAL, t0, t0);
    s.pop(t0);
    s.pop(t0 + SEC);
    assert_eq!(s.processing_stats(t0 + 3 * SEC), (2, 5.0, 3.0));
}

#[test]
fn many_priorities_keep_order_and_prune_empty_buckets() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    // Six priorities at once: handed out highest first, none lost.
    for p in 0..6 {
        s.add(p as u32, Priority(p), t0, t0);
    }
    let order: Vec<u32> = (0..6).map(|_| item(s.pop(t0))).collect();
    assert_eq!(order, vec![5, 4, 3, 2, 1, 0]);
    // A hundred priorities one after another: empty buckets do not pile up.
    for p in 0..100 {
        s.add(100 + p as u32, Priority(p), t0, t0);
        assert_eq!(item(s.pop(t0)), 100 + p as u32);
        assert!(s.buckets() <= 5, "{} buckets after {p}", s.buckets());
    }
}

#[test]
fn raising_a_ready_item_again_and_again_is_compacted_after_64_stale_entries() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(0, Priority::NORMAL, t0, t0);
    for k in 1..=64 {
        s.add(0, Priority(k), t0, t0);
        assert_eq!(s.entries(), k as usize + 1, "no compaction at {k} stale");
    }
    s.add(0, Priority(65), t0, t0);
    assert_eq!(
        s.entries(),
        1,
        "65 stale entries: compacted to the live one"
    );
    assert_eq!(item(s.pop(t0)), 0);
    assert_eq!(s.pop(t0), Pop::Empty { next_ready: None });
}

#[test]
fn stale_ready_entries_are_kept_while_no_more_than_the_live_ones() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    for i in 0..65 {
        s.add(i, Priority::NORMAL, t0, t0);
    }
    for i in 0..65 {
        s.add(i, Priority::HIGH, t0, t0);
    }
    assert_eq!(s.entries(), 130, "65 stale for 65 live: not compacted yet");
    let mut got: Vec<u32> = (0..65).map(|_| item(s.pop(t0))).collect();
    got.sort_unstable();
    assert_eq!(got, (0..65).collect::<Vec<_>>());
}

#[test]
fn moving_a_delayed_item_earlier_again_and_again_is_compacted_after_64() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    s.add(0, Priority::NORMAL, t0 + 1000 * SEC, t0);
    for k in 1..=64u32 {
        s.add(0, Priority::NORMAL, t0 + SEC * (1000 - k), t0);
        assert_eq!(s.entries(), k as usize + 1, "no compaction at {k} stale");
    }
    s.add(0, Priority::NORMAL, t0 + 900 * SEC, t0);
    assert_eq!(
        s.entries(),
        1,
        "65 stale entries: compacted to the live one"
    );
    assert_eq!(s.promote(t0 + 900 * SEC), 1);
    assert_eq!(item(s.pop(t0 + 900 * SEC)), 0);
}

#[test]
fn stale_delayed_entries_are_kept_while_no_more_than_the_live_ones() {
    let t0 = Instant::now();
    let mut s: State<u32> = State::new();
    for i in 0..65 {
        s.add(i, Priority::NORMAL, t0 + 100 * SEC, t0);
    }
    for i in 0..65 {
        s.add(i, Priority::NORMAL, t0 + 50 * SEC, t0);
    }
    assert_eq!(s.entries(), 130, "65 stale for 65 live: not compacted yet");
    assert_eq!(s.promote(t0 + 50 * SEC), 65);
}
