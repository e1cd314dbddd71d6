//! How an engaged cluster is reached and watched: the backoff between
//! failed attempts, the look at a reached one, and what the fleet reports
//! about each cluster.

use std::time::Duration;

/// How the fleet reaches an engaged cluster: it asks the API server for
/// its version (and, once its informers run, sees whether their lists are
/// forbidden); a failure (unreachable, 401, a timeout, a 403 on a list) is
/// retried after `initial`, doubled after each further failure up to
/// `max`; a cluster that answers is asked again every `probe_interval`, so
/// that one that stops answering is reported (in [`ClusterHealth`], the
/// metrics and, if asked, `/readyz`) while its informers retry on their
/// own. Each look gives up after `probe_timeout`.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::cluster::EngageBackoff;
/// let fast = EngageBackoff::default().initial(Duration::from_millis(50)).max(Duration::from_secs(1));
/// assert_eq!(fast.next(Duration::from_millis(800)), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngageBackoff {
    /// The wait after the first failure (default 500 ms).
    pub initial: Duration,
    /// The longest wait between attempts (default 30 s).
    pub max: Duration,
    /// The wait between looks at a cluster that answers (default 10 s).
    pub probe_interval: Duration,
    /// How long one look may take (default 5 s).
    pub probe_timeout: Duration,
}

impl Default for EngageBackoff {
    fn default() -> Self {
        EngageBackoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(5),
        }
    }
}

impl EngageBackoff {
    /// Sets the wait after the first failure.
    #[must_use]
    pub fn initial(mut self, wait: Duration) -> Self {
        self.initial = wait;
        self
    }

    /// Sets the longest wait between attempts.
    #[must_use]
    pub fn max(mut self, wait: Duration) -> Self {
        self.max = wait;
        self
    }

    /// Sets the wait between looks at a cluster that answers.
    #[must_use]
    pub fn probe_interval(mut self, wait: Duration) -> Self {
        self.probe_interval = wait;
        self
    }

    /// Sets how long one look may take.
    #[must_use]
    pub fn probe_timeout(mut self, limit: Duration) -> Self {
        self.probe_timeout = limit;
        self
    }

    /// The wait after the one of `previous`: doubled, at most `max`.
    pub fn next(&self, previous: Duration) -> Duration {
        previous.saturating_mul(2).min(self.max)
    }
}

/// What the fleet knows of one engaged cluster.
///
/// ```
/// use controller_runtime::cluster::ClusterHealth;
/// assert!(ClusterHealth::Ready.is_ready());
/// assert!(!ClusterHealth::Pending.is_ready());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterHealth {
    /// Engaged, not reached yet (or the manager is not running).
    Pending,
    /// Its API server answered the last look and none of its informers'
    /// last lists was forbidden; its informers run.
    Ready,
    /// The last look failed (no answer, an error, or an informer forbidden
    /// to list, 403); looked at again with backoff.
    Failing {
        /// Looks failed in a row.
        failures: u64,
        /// The last failure.
        error: String,
    },
}

impl ClusterHealth {
    /// Whether the cluster answered its last look, permitting its
    /// informers' lists.
    pub fn is_ready(&self) -> bool {
        matches!(self, ClusterHealth::Ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_max() {
        let b = EngageBackoff::default()
            .initial(Duration::from_millis(100))
            .max(Duration::from_millis(350));
        let mut wait = b.initial;
        let mut waits = vec![wait];
        for _ in 0..3 {
            wait = b.next(wait);
            waits.push(wait);
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 350, 350]);
    }
}
