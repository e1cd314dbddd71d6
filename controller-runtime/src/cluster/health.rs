//! How an engaged cluster is reached and watched: the backoff between
//! failed attempts (jittered, so that members that failed together do not
//! retry together), the look at a reached one, and what the fleet reports
//! about each cluster.

use std::time::Duration;

use rand::Rng;

/// How the fleet reaches an engaged cluster: it asks the API server for
/// its version and, once its informers run, whether they have synced and
/// whether their lists are forbidden. A failure (unreachable, 401, a
/// timeout, a 403 on a list, informers not synced within the manager's
/// cache-sync timeout) is retried after `initial`, doubled after each
/// further failure up to `max`; a cluster that answers is asked again
/// every `probe_interval`, so that one that stops answering is reported
/// (in [`ClusterHealth`], the metrics and, if asked, `/readyz`) while its
/// informers retry on their own. Each look gives up after `probe_timeout`.
/// Every wait is lengthened by a random part of up to `jitter` of it
/// (default 0.2, client-go's `wait.Jitter`), so that members engaged or
/// failed at the same moment do not look in lockstep.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::cluster::EngageBackoff;
/// let fast = EngageBackoff::default().initial(Duration::from_millis(50)).max(Duration::from_secs(1));
/// assert_eq!(fast.next(Duration::from_millis(800)), Duration::from_secs(1));
/// let exact = fast.jitter(0.0); // every member waits exactly as long
/// # let _ = exact;
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngageBackoff {
    /// The wait after the first failure (default 500 ms).
    pub initial: Duration,
    /// The longest wait between attempts (default 30 s).
    pub max: Duration,
    /// The wait between looks at a cluster that answers (default 10 s).
    pub probe_interval: Duration,
    /// How long one look may take (default 5 s).
    pub probe_timeout: Duration,
    /// The most each wait is lengthened by, as a fraction of it, drawn
    /// anew for every wait (default 0.2; clamped to 0..=1).
    pub jitter: f64,
}

impl Default for EngageBackoff {
    fn default() -> Self {
        EngageBackoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(5),
            jitter: 0.2,
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

    /// Sets the most each wait is lengthened by, as a fraction of it
    /// (`0.0`: no jitter).
    #[must_use]
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction;
        self
    }

    /// The wait after the one of `previous`: doubled, at most `max` (before
    /// jitter).
    pub fn next(&self, previous: Duration) -> Duration {
        previous.saturating_mul(2).min(self.max)
    }

    /// `wait`, lengthened by a random part of up to `jitter` of it.
    pub(crate) fn spread(&self, wait: Duration) -> Duration {
        self.spread_by(wait, rand::rng().random_range(0.0..=1.0))
    }

    /// `wait`, lengthened by `draw` (0..=1) times `jitter` of it.
    fn spread_by(&self, wait: Duration, draw: f64) -> Duration {
        let fraction = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        wait.saturating_add(wait.mul_f64(fraction * draw.clamp(0.0, 1.0)))
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
    /// Engaged, not ready yet: not reached (or the manager is not
    /// running), or reached and its informers still making their first
    /// lists (for up to the manager's cache-sync timeout).
    Pending,
    /// Its API server answered the last look, every informer started in
    /// it has synced, and none of their last lists was forbidden: its
    /// caches can be trusted and its requests reconciled.
    Ready,
    /// The last look failed (no answer, an error, an informer forbidden to
    /// list (403), informers not synced within the manager's cache-sync
    /// timeout, or an [engage hook](super::Fleet::on_engage) failed);
    /// looked at again with backoff.
    Failing {
        /// Looks failed in a row.
        failures: u64,
        /// The last failure.
        error: String,
    },
}

impl ClusterHealth {
    /// Whether the cluster answered its last look with its informers
    /// synced and permitted to list.
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

    #[test]
    fn jitter_lengthens_a_wait_by_at_most_its_fraction() {
        let b = EngageBackoff::default().jitter(0.5);
        let wait = Duration::from_millis(1000);
        assert_eq!(b.spread_by(wait, 0.0), wait);
        assert_eq!(b.spread_by(wait, 1.0), Duration::from_millis(1500));
        assert_eq!(
            b.spread_by(wait, 7.0),
            Duration::from_millis(1500),
            "draw clamped"
        );
        assert_eq!(b.jitter(0.0).spread_by(wait, 1.0), wait);
        assert_eq!(b.jitter(f64::NAN).spread_by(wait, 1.0), wait);
        assert_eq!(
            b.jitter(9.0).spread_by(wait, 1.0),
            wait * 2,
            "fraction clamped"
        );
        for _ in 0..100 {
            let spread = b.spread(wait);
            assert!(
                spread >= wait && spread <= Duration::from_millis(1500),
                "{spread:?}"
            );
        }
    }
}
