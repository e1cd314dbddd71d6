//! The reflector's retry backoff: exponential with jitter, forgotten after a
//! healthy spell.
//!
//! The base wait starts at 800 ms and doubles on each failure up to 30 s.
//! Each actual wait is the base stretched by a random factor in
//! `[1, 1 + jitter)` (jitter 1.0 by default, as client-go's reflector does),
//! so that many informers restarted together do not retry in lockstep. When
//! the reflector has run for 2 minutes since the end of its last wait, the
//! next failure starts again from 800 ms.

use std::time::Duration;

use tokio::time::Instant;

/// Backoff parameters of a [`Reflector`](super::Reflector).
///
/// ```
/// use std::time::Duration;
/// use informer_core::reflector::BackoffConfig;
/// let quick = BackoffConfig { initial: Duration::from_millis(100), ..BackoffConfig::default() };
/// assert_eq!(quick.max, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// The first wait (before jitter). Default 800 ms.
    pub initial: Duration,
    /// The largest base wait (before jitter). Default 30 s.
    pub max: Duration,
    /// How much the base grows per failure. Default 2.
    pub factor: f64,
    /// Each wait is `base * (1 + jitter * r)` with `r` uniform in `[0, 1)`.
    /// Default 1.0; 0 disables jitter.
    pub jitter: f64,
    /// After this long without a wait, the base starts again at `initial`.
    /// Default 2 minutes.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// The state of one reflector's backoff.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    /// The base of the next wait.
    next_base: Duration,
    /// When the last wait ended (or will end).
    last_wait_end: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Self {
        Self {
            next_base: config.initial,
            config,
            last_wait_end: None,
        }
    }

    /// The next wait, given the time now and a random number in `[0, 1)`.
    pub(crate) fn next_delay_with(&mut self, now: Instant, random: f64) -> Duration {
        let healthy = self
            .last_wait_end
            .is_none_or(|end| now.saturating_duration_since(end) >= self.config.reset_after);
        if healthy {
            self.next_base = self.config.initial;
        }
        let base = self.next_base.min(self.config.max);
        self.next_base = base
            .mul_f64(self.config.factor.max(1.0))
            .min(self.config.max);
        let stretch = 1.0 + self.config.jitter.max(0.0) * random.clamp(0.0, 1.0);
        let delay = base.mul_f64(stretch);
        self.last_wait_end = Some(now + delay);
        delay
    }

    /// The next wait, jittered with the thread's random generator.
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.next_delay_with(Instant::now(), rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test(start_paused = true)]
    async fn doubles_from_800ms_to_a_30s_cap_without_jitter() {
        let mut b = Backoff::new(BackoffConfig::default());
        let now = Instant::now();
        let got: Vec<Duration> = (0..8).map(|_| b.next_delay_with(now, 0.0)).collect();
        let want = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0].map(secs);
        assert_eq!(got, want);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_stays_within_base_and_twice_base() {
        let mut b = Backoff::new(BackoffConfig::default());
        let now = Instant::now();
        let bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0];
        for base in bases {
            let d = b.next_delay();
            assert!(
                d >= secs(base) && d < secs(2.0 * base),
                "{d:?} outside [{base}, {})",
                2.0 * base
            );
        }
        // the extremes of the random factor
        let mut b = Backoff::new(BackoffConfig::default());
        assert_eq!(b.next_delay_with(now, 0.999_999).as_millis(), 1599);
    }

    #[tokio::test(start_paused = true)]
    async fn resets_after_two_healthy_minutes_only() {
        let mut b = Backoff::new(BackoffConfig::default());
        let t0 = Instant::now();
        assert_eq!(b.next_delay_with(t0, 0.0), secs(0.8));
        assert_eq!(b.next_delay_with(t0 + secs(1.0), 0.0), secs(1.6));
        // healthy for 119 s after the last wait ended (at 1 s + 1.6 s): no reset
        let end = t0 + secs(2.6);
        assert_eq!(b.next_delay_with(end + secs(119.0), 0.0), secs(3.2));
        // healthy for 120 s after that wait ended: back to 800 ms
        let end = end + secs(119.0) + secs(3.2);
        assert_eq!(b.next_delay_with(end + secs(120.0), 0.0), secs(0.8));
        assert_eq!(b.next_delay_with(end + secs(121.0), 0.0), secs(1.6));
    }

    #[tokio::test(start_paused = true)]
    async fn custom_parameters_apply() {
        let cfg = BackoffConfig {
            initial: secs(1.0),
            max: secs(3.0),
            factor: 3.0,
            jitter: 0.0,
            reset_after: secs(10.0),
        };
        let mut b = Backoff::new(cfg);
        let now = Instant::now();
        let got: Vec<Duration> = (0..3).map(|_| b.next_delay_with(now, 0.5)).collect();
        assert_eq!(got, [1.0, 3.0, 3.0].map(secs));
    }
}
