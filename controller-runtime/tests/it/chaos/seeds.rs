//! The seeds one fault scenario runs, from the environment: the first
//! (`CHAOS_SEED`, default 1), how many (the scenario's own variable, else
//! `CHAOS_SEEDS`, else 24) and how many at once; running them, and the
//! verdict that names every failed seed and how to replay one.

use std::future::Future;

use futures::StreamExt;
use tokio::time::Instant;

/// `name` from the environment as a number, else `default`.
pub(super) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seeds of one run of a scenario.
pub(super) struct Seeds {
    pub(super) first: u64,
    pub(super) count: u64,
    pub(super) parallel: usize,
    pub(super) started: Instant,
}

impl Seeds {
    /// The seeds the environment asks for: the count from `count_var`
    /// (when set) or `CHAOS_SEEDS`, `parallel_var` (default
    /// `default_parallel`) of them at once.
    pub(super) fn from_env(
        count_var: Option<&str>,
        parallel_var: &str,
        default_parallel: u64,
    ) -> Self {
        let count = count_var
            .and_then(|var| std::env::var(var).ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| env_u64("CHAOS_SEEDS", 24));
        let parallel = env_u64(parallel_var, default_parallel).max(1);
        Seeds {
            first: env_u64("CHAOS_SEED", 1),
            count,
            parallel: usize::try_from(parallel).unwrap_or(1),
            started: Instant::now(),
        }
    }

    /// Runs `run` for every seed, `parallel` at once; the results in the
    /// order they finished.
    pub(super) async fn run<T, F, Fut>(&self, run: F) -> Vec<T>
    where
        F: Fn(u64) -> Fut,
        Fut: Future<Output = T>,
    {
        futures::stream::iter(self.first..self.first + self.count)
            .map(run)
            .buffer_unordered(self.parallel)
            .collect()
            .await
    }

    /// A line for the summary: how many seeds, from which, in how long.
    pub(super) fn summary(&self, failed: usize) -> String {
        format!(
            "{} seeds from {} in {:.1?} ({} at once): {failed} failed",
            self.count,
            self.first,
            self.started.elapsed(),
            self.parallel
        )
    }

    /// Fails the test when any seed failed, naming each and how to replay one.
    pub(super) fn verdict(&self, scenario: &str, failures: &[String]) {
        assert!(
            failures.is_empty(),
            "{} of {} {scenario}seeds failed; replay one with CHAOS_SEED=<seed> CHAOS_SEEDS=1\n{}",
            failures.len(),
            self.count,
            failures.join("\n")
        );
    }
}
