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
}
