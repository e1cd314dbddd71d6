//! Rate limiters: how long an item should wait before it is retried.
//!
//! A [`RateLimiter`] answers [`RateLimiter::when`] for an item that failed
//! (and records the failure), forgets an item that succeeded, and counts
//! failures. The implementations are client-go's, under client-go's names:
//!
//! - [`ItemExponentialFailureRateLimiter`]: `base * 2^failures` per item,
//!   capped (default 5 ms .. 1000 s);
//! - [`BucketRateLimiter`]: one token bucket shared by all items (default
//!   10 per second, burst 100);
//! - [`ItemFastSlowRateLimiter`]: a fast delay for the first attempts, then a
//!   slow one;
//! - [`MaxOfRateLimiter`]: the longest delay of several limiters;
//! - [`WithMaxWaitRateLimiter`]: caps another limiter's delay;
//! - [`default_controller_rate_limiter`]: what controllers use unless told
//!   otherwise.
//!
//! Time-based limiters read tokio's clock, so they follow a paused clock in
//! tests.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::Error;

/// Decides how long an item waits before it is retried.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::RateLimiter;
///
/// /// Always waits one second.
/// struct OneSecond;
/// impl<T> RateLimiter<T> for OneSecond {
///     fn when(&self, _: &T) -> Duration { Duration::from_secs(1) }
///     fn forget(&self, _: &T) {}
///     fn num_requeues(&self, _: &T) -> u32 { 0 }
/// }
/// assert_eq!(OneSecond.when(&"x"), Duration::from_secs(1));
/// ```
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait now; records one more failure for it.
    fn when(&self, item: &T) -> Duration;
    /// Forgets `item`'s failures (it succeeded).
    fn forget(&self, item: &T);
    /// How many failures `item` had since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// Implements [`RateLimiter`] for a smart pointer by forwarding every call to
/// the limiter it points to.
macro_rules! forward_rate_limiter {
    ($($ptr:ident),+) => {$(
        impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for $ptr<R> {
            fn when(&self, item: &T) -> Duration {
                (**self).when(item)
            }
            fn forget(&self, item: &T) {
                (**self).forget(item);
            }
            fn num_requeues(&self, item: &T) -> u32 {
                (**self).num_requeues(item)
            }
        }
    )+};
}

forward_rate_limiter!(Arc, Box);

/// The controller default: the longer of a per-item exponential backoff
/// (5 ms .. 1000 s) and an overall token bucket (10 per second, burst 100).
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{default_controller_rate_limiter, RateLimiter};
/// let limiter = default_controller_rate_limiter();
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.num_requeues(&"a"), 2);
/// ```
#[must_use]
pub fn default_controller_rate_limiter<T>() -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::default()),
        Box::new(BucketRateLimiter::default()),
    ])
}

/// Failure counts per item, shared by the per-item limiters.
struct Failures<T>(Mutex<HashMap<T, u32>>);

impl<T: Clone + Eq + Hash> Failures<T> {
    fn new() -> Self {
        Failures(Mutex::new(HashMap::new()))
    }
    /// Records a failure; returns the count before it.
    fn record(&self, item: &T) -> u32 {
        let mut map = self.0.lock();
        if let Some(count) = map.get_mut(item) {
            let before = *count;
            *count = count.saturating_add(1);
            return before;
        }
        map.insert(item.clone(), 1);
        0
    }
    fn forget(&self, item: &T) {
        self.0.lock().remove(item);
    }
    fn count(&self, item: &T) -> u32 {
        self.0.lock().get(item).copied().unwrap_or(0)
    }
}

/// Per-item exponential backoff: the n-th failure (from 0) waits
/// `base * 2^n`, never more than `max`; an overflow gives `max`.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_millis(3));
/// assert_eq!(limiter.when(&1), Duration::from_millis(1));
/// assert_eq!(limiter.when(&1), Duration::from_millis(2));
/// assert_eq!(limiter.when(&1), Duration::from_millis(3));
/// assert_eq!(limiter.when(&2), Duration::from_millis(1));
/// ```
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Failures<T>,
}

impl<T: Clone + Eq + Hash> ItemExponentialFailureRateLimiter<T> {
    /// Backoff from `base`, doubling per failure, capped at `max`.
    #[must_use]
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Failures::new(),
        }
    }
}

impl<T: Clone + Eq + Hash> Default for ItemExponentialFailureRateLimiter<T> {
    /// 5 ms doubling up to 1000 s.
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

/// `base * 2^exp`, or `max` if that is larger or does not fit.
fn exponential(base: Duration, exp: u32, max: Duration) -> Duration {
    let factor = 1u128.checked_shl(exp).filter(|_| exp < 127);
    let nanos = factor.and_then(|f| base.as_nanos().checked_mul(f));
    match nanos {
        Some(n) if n <= max.as_nanos() => {
            // n <= max, which is a Duration, so it fits.
            let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
            let sub = u32::try_from(n % 1_000_000_000).unwrap_or(0);
            Duration::new(secs, sub)
        }
        _ => max,
    }
}

impl<T: Clone + Eq + Hash + Send + Sync> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        exponential(self.base, self.failures.record(item), self.max)
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.count(item)
    }
}

/// One token bucket for all items: `rate` tokens per second, holding at
/// most `burst`. Each [`RateLimiter::when`] reserves a token and returns how
/// long until that token exists (zero while tokens are left), like Go's
/// `rate.Limiter.Reserve().Delay()`. It does not track items: `forget` does
/// nothing and `num_requeues` is 0.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{BucketRateLimiter, RateLimiter};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), controller_runtime::workqueue::Error> {
/// let bucket = BucketRateLimiter::new(10.0, 1)?;
/// assert_eq!(RateLimiter::<()>::when(&bucket, &()), Duration::ZERO);
/// // The next token comes in 100 ms (the clock is paused here).
/// assert_eq!(RateLimiter::<()>::when(&bucket, &()), Duration::from_millis(100));
/// # Ok(())
/// # }
/// ```
pub struct BucketRateLimiter {
    rate: f64,
    burst: f64,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilled at `rate` per second.
    ///
    /// # Errors
    /// [`Error::InvalidBucket`] if `rate` is not positive and finite or
    /// `burst` is 0.
    pub fn new(rate: f64, burst: u32) -> Result<Self, Error> {
        if !(rate.is_finite() && rate > 0.0) || burst == 0 {
            return Err(Error::InvalidBucket { rate, burst });
        }
        Ok(BucketRateLimiter {
            rate,
            burst: f64::from(burst),
            bucket: Mutex::new(Bucket {
                tokens: f64::from(burst),
                last: Instant::now(),
            }),
        })
    }

    fn reserve(&self) -> Duration {
        let now = Instant::now();
        let mut bucket = self.bucket.lock();
        let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate).min(self.burst);
        bucket.last = now;
        bucket.tokens -= 1.0;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-bucket.tokens / self.rate).unwrap_or(Duration::MAX)
        }
    }
}

impl Default for BucketRateLimiter {
    /// 10 tokens per second, burst 100.
    fn default() -> Self {
        BucketRateLimiter {
            rate: 10.0,
            burst: 100.0,
            bucket: Mutex::new(Bucket {
                tokens: 100.0,
                last: Instant::now(),
            }),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// Per item: `fast` for the first `max_fast_attempts` failures, then `slow`.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{ItemFastSlowRateLimiter, RateLimiter};
/// let limiter = ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 2);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(10));
/// ```
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    failures: Failures<T>,
}

impl<T: Clone + Eq + Hash> ItemFastSlowRateLimiter<T> {
    /// Waits `fast` for the first `max_fast_attempts` failures, then `slow`.
    #[must_use]
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        ItemFastSlowRateLimiter {
            fast,
            slow,
            max_fast_attempts,
            failures: Failures::new(),
        }
    }
}

impl<T: Clone + Eq + Hash + Send + Sync> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        if self.failures.record(item) < self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.count(item)
    }
}

/// The longest delay of several limiters. Every limiter is asked (so each
/// records the failure); `num_requeues` is the largest count; `forget`
/// forgets in all.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter};
/// let limiter = MaxOfRateLimiter::new(vec![
///     Box::new(ItemFastSlowRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1), 1)),
///     Box::new(ItemFastSlowRateLimiter::new(Duration::from_millis(2), Duration::from_millis(3), 5)),
/// ]);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(2));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
/// ```
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`; with none, every delay is zero.
    #[must_use]
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Another limiter's delay, never more than `max_wait`.
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::workqueue::{ItemExponentialFailureRateLimiter, RateLimiter, WithMaxWaitRateLimiter};
/// let limiter = WithMaxWaitRateLimiter::new(
///     ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000)),
///     Duration::from_secs(3),
/// );
/// let delays: Vec<u64> = (0..4).map(|_| limiter.when(&"a").as_secs()).collect();
/// assert_eq!(delays, [1, 2, 3, 3]);
/// ```
pub struct WithMaxWaitRateLimiter<T> {
    inner: Box<dyn RateLimiter<T>>,
    max_wait: Duration,
}

impl<T> WithMaxWaitRateLimiter<T> {
    /// Caps `inner`'s delays at `max_wait`.
    #[must_use]
    pub fn new(inner: impl RateLimiter<T> + 'static, max_wait: Duration) -> Self {
        WithMaxWaitRateLimiter {
            inner: Box::new(inner),
            max_wait,
        }
    }
}

impl<T> RateLimiter<T> for WithMaxWaitRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.inner.when(item).min(self.max_wait)
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.inner.num_requeues(item)
    }
}

#[cfg(test)]
mod tests;
