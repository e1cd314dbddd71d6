//! The sharder's label writes: the patches of one look, sent at most
//! [`ShardingConfig::relabel_in_flight`] at once and at most
//! [`ShardingConfig::relabel_per_second`] a second.
//!
//! A look turns what it decided into jobs, one per primary key (or per
//! object for the writes that belong to no primary). A job's writes run in
//! order, one after the other: its owned objects first, then the primary,
//! and the primary only if every owned object was written, so the new shard
//! finds them in its cache when it gets the owner. Jobs run concurrently,
//! in no particular order, as the handshake in [`labels`](super::super::labels)
//! needs no order between keys. Each write is a merge patch guarded by the
//! `resourceVersion` its decision was made on: a conflict (409) or a
//! vanished object (404) fails that write only, and the look tries the key
//! again next time, as when the writes were sequential.
//!
//! The rate is a token bucket shared by every look of one sharder term (a
//! burst as large as the writes allowed in flight, then one write per
//! `1 / per_second`), on tokio's clock.
//!
//! [`ShardingConfig::relabel_in_flight`]: crate::sharding::config::ShardingConfig::relabel_in_flight
//! [`ShardingConfig::relabel_per_second`]: crate::sharding::config::ShardingConfig::relabel_per_second

use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::{Entry, KindCache};

/// One patch of one object: of the kind `caches[kind]` of the look (the
/// primary is 0, owned kind `i` is `i + 1`).
pub(super) struct Write {
    pub(super) kind: usize,
    pub(super) entry: Entry,
    pub(super) patch: serde_json::Value,
}

/// The writes of one key: `first` in order (all attempted), then `then`
/// if every one of `first` succeeded; `tag` says what the look does with
/// the outcome.
pub(super) struct Job<T> {
    pub(super) first: Vec<Write>,
    pub(super) then: Option<Write>,
    pub(super) tag: T,
}

/// How a job went.
pub(super) struct Outcome<T> {
    pub(super) tag: T,
    /// Every write of `first` succeeded.
    pub(super) first_ok: bool,
    /// `then`'s result; `None` when there was none or it was not attempted.
    pub(super) then_ok: Option<bool>,
}

impl<T> Outcome<T> {
    /// Every write of the job was made.
    pub(super) fn all_ok(&self) -> bool {
        self.first_ok && self.then_ok != Some(false)
    }
}

/// A token bucket on tokio's clock: `burst` writes at once, then one per
/// `interval` (the generic cell rate algorithm, each caller waiting for
/// its slot).
#[derive(Debug)]
struct Pace {
    interval: Duration,
    /// How far ahead of now the next slot may be and still be free now.
    tolerance: Duration,
    /// When the bucket is next empty with no write waiting.
    theoretical: Mutex<Option<Instant>>,
}

impl Pace {
    fn new(per_second: u32, burst: usize) -> Pace {
        let interval = Duration::from_secs(1) / per_second.max(1);
        let burst = u32::try_from(burst.max(1)).unwrap_or(u32::MAX);
        Pace {
            interval,
            tolerance: interval.saturating_mul(burst - 1),
            theoretical: Mutex::new(None),
        }
    }

    /// Waits for this write's slot.
    async fn admit(&self) {
        let now = Instant::now();
        let slot = {
            let mut tat = self.theoretical.lock();
            let base = tat.map_or(now, |t| t.max(now));
            *tat = Some(base + self.interval);
            base.checked_sub(self.tolerance).unwrap_or(now).max(now)
        };
        if slot > now {
            tokio::time::sleep_until(slot).await;
        }
    }
}

/// Sends the sharder's writes within its limits; one per sharder term.
#[derive(Debug)]
pub(super) struct Writer {
    in_flight: usize,
    pace: Pace,
}

impl Writer {
    /// At most `in_flight` writes at once (at least one) and `per_second`
    /// a second (at least one).
    pub(super) fn new(in_flight: usize, per_second: u32) -> Writer {
        let in_flight = in_flight.max(1);
        Writer {
            in_flight,
            pace: Pace::new(per_second, in_flight),
        }
    }

    /// Runs `jobs` against `caches`, at most `in_flight` at once (each job
    /// has one write in flight at a time); their outcomes in any order.
    pub(super) async fn run<T>(
        &self,
        caches: &[Box<dyn KindCache>],
        jobs: Vec<Job<T>>,
    ) -> Vec<Outcome<T>> {
        futures::stream::iter(jobs)
            .map(|job| self.one(caches, job))
            .buffer_unordered(self.in_flight)
            .collect()
            .await
    }

    async fn one<T>(&self, caches: &[Box<dyn KindCache>], job: Job<T>) -> Outcome<T> {
        let mut first_ok = true;
        for w in job.first {
            first_ok &= self.write(caches, w).await;
        }
        let then_ok = match job.then {
            Some(w) if first_ok => Some(self.write(caches, w).await),
            _ => None,
        };
        Outcome {
            tag: job.tag,
            first_ok,
            then_ok,
        }
    }

    async fn write(&self, caches: &[Box<dyn KindCache>], w: Write) -> bool {
        let Some(cache) = caches.get(w.kind) else {
            return false;
        };
        self.pace.admit().await;
        cache.patch(&w.entry, w.patch).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_pace_lets_a_burst_through_then_one_per_interval() {
        let pace = Pace::new(100, 5);
        let start = Instant::now();
        for _ in 0..5 {
            pace.admit().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the burst waits for nothing"
        );
        for _ in 0..10 {
            pace.admit().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(100),
            "then 10 ms each"
        );
        // Idle for a while: the bucket fills up to the burst again, no more.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let idle = Instant::now();
        for _ in 0..7 {
            pace.admit().await;
        }
        assert_eq!(idle.elapsed(), Duration::from_millis(20));
    }
}
