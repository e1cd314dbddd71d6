//! Lease timing shared by everything that holds a Lease by renewing it
//! (leader election, shard membership): the three durations, their rules,
//! the rounding to `spec.leaseDurationSeconds`, and the renew-deadline
//! clock of a renewing holder.

use std::time::Duration;

use tokio::time::Instant;

/// Default time a non-leader waits, from when it last saw the lease change,
/// before taking it over.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default time a leader keeps trying to renew before it stops leading.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default wait between two attempts to acquire or renew.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// A timing that breaks a rule of [`LeaseTiming::validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TimingError {
    /// The retry period is zero.
    #[error("retry period must be positive")]
    ZeroRetryPeriod,
    /// The lease duration is not longer than the renew deadline.
    #[error(
        "lease duration ({lease_duration:?}) must be greater than renew deadline ({renew_deadline:?})"
    )]
    LeaseNotAfterDeadline {
        /// The lease duration.
        lease_duration: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
    },
    /// The renew deadline is not longer than 1.2 x the retry period.
    #[error(
        "renew deadline ({renew_deadline:?}) must be greater than 1.2 x retry period ({retry_period:?})"
    )]
    DeadlineTooShort {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The retry period.
        retry_period: Duration,
    },
}

/// How long a Lease lasts, how long its holder keeps trying to renew it,
/// and how often it tries: the timing of leader election and of shard
/// membership.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::leaderelection::LeaseTiming;
/// let timing = LeaseTiming::default();
/// assert_eq!(timing.lease_duration, Duration::from_secs(15));
/// assert!(timing.validate().is_ok());
/// assert!(timing.renew_deadline(Duration::from_secs(20)).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct LeaseTiming {
    /// How long a lease lasts without renewal, judged by each candidate's
    /// local clock from when it last saw the lease change.
    pub lease_duration: Duration,
    /// How long the holder keeps retrying a renewal before it gives up.
    pub renew_deadline: Duration,
    /// Wait between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    /// Lease 15 s, renew deadline 10 s, retry 2 s.
    fn default() -> Self {
        LeaseTiming {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

impl LeaseTiming {
    /// Sets the lease duration.
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// Sets the renew deadline.
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// Sets the retry period.
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }

    /// Checks a non-zero retry period and lease > renew deadline > 1.2 x
    /// retry period, so that a holder that cannot renew gives up before any
    /// other candidate can judge its lease expired.
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.retry_period.is_zero() {
            return Err(TimingError::ZeroRetryPeriod);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(TimingError::LeaseNotAfterDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err(TimingError::DeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// The lease duration as written to `spec.leaseDurationSeconds`: whole
    /// seconds, rounded up, at least 1.
    pub(crate) fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        if secs >= f64::from(i32::MAX) {
            i32::MAX
        } else {
            (secs as i32).max(1)
        }
    }
}

/// The clock of a holder renewing its Lease: when the next attempt is due
/// and when the renew deadline (counted from the start of the last
/// successful renewal) runs out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenewClock {
    timing: LeaseTiming,
    last_renew: Instant,
    next: Instant,
}

impl RenewClock {
    /// A clock for a lease last renewed by an attempt started at `renewed`.
    pub(crate) fn new(timing: LeaseTiming, renewed: Instant) -> Self {
        RenewClock {
            timing,
            last_renew: renewed,
            next: renewed + timing.retry_period,
        }
    }

    /// When the renew deadline runs out.
    pub(crate) fn deadline(&self) -> Instant {
        self.last_renew + self.timing.renew_deadline
    }

    /// When to wake for the next attempt (never after the deadline).
    pub(crate) fn wake_at(&self) -> Instant {
        self.next.min(self.deadline())
    }

    /// Records a successful renewal by an attempt started at `started`: the
    /// next one is due a retry period later.
    pub(crate) fn renewed(&mut self, started: Instant) {
        self.last_renew = started;
        self.next = started + self.timing.retry_period;
    }

    /// Records a failed attempt started at `started`, to be retried `retry`
    /// later; `Err` with the reason when the deadline has run out.
    pub(crate) fn failed(&mut self, started: Instant, retry: Duration) -> Result<(), String> {
        if Instant::now() >= self.deadline() {
            return Err(format!(
                "no successful renewal within the renew deadline ({:?})",
                self.timing.renew_deadline
            ));
        }
        self.next = started + retry;
        Ok(())
    }
}

/// What one renewal attempt found.
#[derive(Debug)]
pub(crate) enum Attempted {
    /// The Lease was written: renewed.
    Renewed,
    /// Not written (an error or a lost write race): retried, until the
    /// renew deadline runs out.
    Failed,
    /// The Lease is someone else's: lost now, for this reason.
    Lost(String),
}

/// The renewal loop of a Lease holder (leader election and shard
/// membership both run it): an attempt when the next one is due or `early`
/// resolves first, each bounded by the renew deadline; a failed attempt is
/// retried `retry` later. Returns `Ok` when `cancel` fires and `Err` with
/// the reason when the Lease is lost: found held by another, or no attempt
/// succeeded within the renew deadline of the last success (`renewed`, the
/// start of the attempt that acquired it).
pub(crate) async fn renew_until_lost<A, W>(
    timing: LeaseTiming,
    renewed: Instant,
    retry: Duration,
    cancel: &tokio_util::sync::CancellationToken,
    mut early: impl FnMut() -> W,
    mut attempt: impl FnMut() -> A,
) -> Result<(), String>
where
    A: Future<Output = Attempted>,
    W: Future<Output = ()>,
{
    let mut clock = RenewClock::new(timing, renewed);
    loop {
        let deadline = clock.deadline();
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            () = tokio::time::sleep_until(clock.wake_at()) => {}
            () = early() => {}
        }
        let started = Instant::now();
        let attempted = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            r = tokio::time::timeout_at(deadline, attempt()) => r,
        };
        match attempted {
            Ok(Attempted::Renewed) => {
                clock.renewed(started);
                continue;
            }
            Ok(Attempted::Lost(reason)) => return Err(reason),
            Ok(Attempted::Failed) | Err(_) => {}
        }
        clock.failed(started, retry)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn renew_clock_counts_the_deadline_from_the_last_renewal() {
        let timing = LeaseTiming::default();
        let t0 = Instant::now();
        let mut clock = RenewClock::new(timing, t0);
        assert_eq!(clock.wake_at(), t0 + timing.retry_period);
        assert_eq!(clock.deadline(), t0 + timing.renew_deadline);
        tokio::time::advance(Duration::from_secs(3)).await;
        let t1 = Instant::now();
        clock.renewed(t1);
        assert_eq!(clock.deadline(), t1 + timing.renew_deadline);
        // A failure before the deadline retries, never later than the deadline.
        assert!(clock.failed(t1, Duration::from_secs(60)).is_ok());
        assert_eq!(clock.wake_at(), clock.deadline());
        tokio::time::advance(timing.renew_deadline).await;
        let reason = clock.failed(Instant::now(), timing.retry_period);
        assert!(reason.is_err_and(|r| r.contains("within the renew deadline (10s)")));
    }

    /// The shared renewal loop: attempts every retry period, at once on an
    /// early wake, retries failures sooner, and reports the loss at the
    /// renew deadline of the last success, or at once when told.
    #[tokio::test(start_paused = true)]
    async fn the_renewal_loop_keeps_its_deadline_and_wakes_early() {
        use std::sync::Mutex;
        use tokio_util::sync::CancellationToken;
        let timing = LeaseTiming::default();
        let t0 = Instant::now();
        let attempts: Mutex<Vec<Duration>> = Mutex::new(Vec::new());
        let early = tokio::sync::Notify::new();
        // Two successes, then failures only.
        let attempt = || {
            let mut seen = attempts.lock().unwrap();
            seen.push(t0.elapsed());
            let ok = seen.len() <= 2;
            async move {
                if ok {
                    Attempted::Renewed
                } else {
                    Attempted::Failed
                }
            }
        };
        let poke = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            early.notify_one();
        };
        let never = CancellationToken::new();
        let (lost, ()) = tokio::join!(
            renew_until_lost(
                timing,
                t0,
                Duration::from_secs(1),
                &never,
                || early.notified(),
                attempt
            ),
            poke
        );
        let reason = lost.unwrap_err();
        assert!(reason.contains("within the renew deadline"), "{reason}");
        let seen = attempts.lock().unwrap().clone();
        // The early wake at 0.5 s, then a retry period later; failures
        // every second until the deadline, 10 s after the last success.
        assert_eq!(seen[0], Duration::from_millis(500));
        assert_eq!(seen[1], Duration::from_millis(2500));
        assert_eq!(seen[2], Duration::from_millis(4500));
        assert_eq!(t0.elapsed(), Duration::from_millis(12_500));
        // Lost when an attempt says so, and `Ok` once cancelled.
        let lost = renew_until_lost(
            timing,
            Instant::now(),
            timing.retry_period,
            &never,
            std::future::pending,
            || async { Attempted::Lost("taken".to_string()) },
        )
        .await;
        assert_eq!(lost, Err("taken".to_string()));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let ended = renew_until_lost(
            timing,
            Instant::now(),
            timing.retry_period,
            &cancel,
            std::future::pending,
            || async { Attempted::Failed },
        )
        .await;
        assert_eq!(ended, Ok(()));
    }
}
