//! How a draining FIFO gives memory back: in a few halving steps, each
//! leaving room for twice what is still queued. Added for the shrink
//! mutants that the capacity bounds in `tests.rs` left alive (see
//! docs/reliability.md, "Mutation testing").

use super::*;

#[test]
fn a_drain_reallocates_a_few_times_and_keeps_twice_what_is_queued() {
    // Shrinking halves the slack, so draining N items reallocates O(log N)
    // times, not once per pop, and a refill right after a shrink does not
    // reallocate at once.
    const N: usize = 10_000;
    let fifo = DeltaFifo::new(None);
    fifo.replace((0..N).map(|i| cm(&format!("o{i:05}"), "1")).collect(), "1");
    let mut last = capacities(&fifo);
    let mut reallocations = 0;
    for i in 0..N {
        pop_now(&fifo);
        let left = N - i - 1;
        let now = capacities(&fifo);
        // The map's reported capacity also drops by one when a removal
        // leaves a tombstone slot; a reallocation drops it by far more.
        for (name, was, is, slack) in [("queue", last.0, now.0, 0), ("map", last.1, now.1, 1)] {
            if is + slack < was {
                reallocations += 1;
                let floor = (2 * left).max(state::RETAINED_CAPACITY);
                assert!(
                    is >= floor,
                    "{name} shrunk from {was} to {is} with {left} queued (want at least {floor})"
                );
            }
        }
        last = now;
    }
    assert!(
        reallocations <= 30,
        "{reallocations} reallocations to drain {N} items"
    );
}
