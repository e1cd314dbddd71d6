//! Tests for every rate-limiter rule, on tokio's paused clock.

use std::time::Duration;

use tokio::time::advance;

use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn exponential_doubles_per_failure_and_caps() {
    let l = ItemExponentialFailureRateLimiter::new(MS, Duration::from_millis(1000));
    let got: Vec<u128> = (0..12).map(|_| l.when(&"a").as_millis()).collect();
    assert_eq!(got, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000]);
    assert_eq!(l.num_requeues(&"a"), 12);
}

#[test]
fn exponential_is_per_item_and_forget_resets() {
    let l = ItemExponentialFailureRateLimiter::new(MS, Duration::from_secs(1));
    l.when(&"a");
    l.when(&"a");
    assert_eq!(l.when(&"b"), MS);
    assert_eq!(l.num_requeues(&"a"), 2);
    l.forget(&"a");
    assert_eq!(l.num_requeues(&"a"), 0);
    assert_eq!(l.when(&"a"), MS);
    assert_eq!(l.num_requeues(&"b"), 1);
}

#[test]
fn exponential_overflow_gives_the_cap() {
    let max = Duration::from_secs(1000);
    let l = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), max);
    for _ in 0..200 {
        assert!(l.when(&1) <= max);
    }
    assert_eq!(l.when(&1), max);
    assert_eq!(
        exponential(Duration::from_secs(1), 64, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        exponential(Duration::from_secs(1), 127, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        exponential(Duration::from_secs(1), 128, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        exponential(Duration::from_secs(1), u32::MAX, Duration::MAX),
        Duration::MAX
    );
    assert_eq!(
        exponential(Duration::from_nanos(3), 40, Duration::MAX),
        Duration::from_nanos(3 << 40)
    );
}

#[test]
fn exponential_default_is_5ms_to_1000s() {
    let l = ItemExponentialFailureRateLimiter::default();
    assert_eq!(l.when(&0), Duration::from_millis(5));
    assert_eq!(l.when(&0), Duration::from_millis(10));
    for _ in 0..40 {
        l.when(&0);
    }
    assert_eq!(l.when(&0), Duration::from_secs(1000));
}

#[tokio::test(start_paused = true)]
async fn bucket_allows_burst_then_spaces_reservations() {
    let b = BucketRateLimiter::new(10.0, 3).unwrap();
    let when = |b: &BucketRateLimiter| RateLimiter::<u8>::when(b, &0);
    assert_eq!(when(&b), Duration::ZERO);
    assert_eq!(when(&b), Duration::ZERO);
    assert_eq!(when(&b), Duration::ZERO);
    assert_eq!(when(&b), Duration::from_millis(100));
    assert_eq!(when(&b), Duration::from_millis(200));
    assert_eq!(when(&b), Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn bucket_refills_over_time_up_to_burst() {
    let b = BucketRateLimiter::new(10.0, 2).unwrap();
    let when = |b: &BucketRateLimiter| RateLimiter::<u8>::when(b, &0);
    when(&b);
    when(&b);
    assert_eq!(when(&b), Duration::from_millis(100));
    // Pays back the debt of one token and refills one: 200 ms.
    advance(Duration::from_millis(200)).await;
    assert_eq!(when(&b), Duration::ZERO);
    assert_eq!(when(&b), Duration::from_millis(100));
    // A long idle time refills only up to the burst.
    advance(Duration::from_secs(60)).await;
    assert_eq!(when(&b), Duration::ZERO);
    assert_eq!(when(&b), Duration::ZERO);
    assert_eq!(when(&b), Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn bucket_default_is_10_per_second_burst_100() {
    let b = BucketRateLimiter::default();
    for _ in 0..100 {
        assert_eq!(RateLimiter::<u8>::when(&b, &0), Duration::ZERO);
    }
    assert_eq!(RateLimiter::<u8>::when(&b, &0), Duration::from_millis(100));
    assert_eq!(RateLimiter::<u8>::num_requeues(&b, &0), 0);
}

#[test]
fn bucket_rejects_bad_parameters() {
    for (rate, burst) in [
        (0.0, 1),
        (-1.0, 1),
        (f64::NAN, 1),
        (f64::INFINITY, 1),
        (1.0, 0),
    ] {
        let err = BucketRateLimiter::new(rate, burst).err().unwrap();
        assert!(matches!(err, Error::InvalidBucket { .. }));
        assert!(err.to_string().contains("token bucket"), "{err}");
    }
}

#[test]
fn fast_slow_switches_after_max_fast_attempts_per_item() {
    let l = ItemFastSlowRateLimiter::new(MS, Duration::from_secs(1), 3);
    let got: Vec<Duration> = (0..5).map(|_| l.when(&"a")).collect();
    assert_eq!(
        got,
        [MS, MS, MS, Duration::from_secs(1), Duration::from_secs(1)]
    );
    assert_eq!(l.when(&"b"), MS);
    assert_eq!(l.num_requeues(&"a"), 5);
    l.forget(&"a");
    assert_eq!(l.num_requeues(&"a"), 0);
    assert_eq!(l.when(&"a"), MS);
}

#[test]
fn max_of_takes_the_longest_and_forgets_in_all() {
    let l = MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            MS,
            Duration::from_secs(1),
        )),
        Box::new(ItemFastSlowRateLimiter::new(
            3 * MS,
            Duration::from_secs(5),
            2,
        )),
    ]);
    let got: Vec<u128> = (0..4).map(|_| l.when(&"a").as_millis()).collect();
    assert_eq!(got, [3, 3, 5000, 5000]);
    assert_eq!(l.num_requeues(&"a"), 4);
    l.forget(&"a");
    assert_eq!(l.num_requeues(&"a"), 0);
    assert_eq!(l.when(&"a"), 3 * MS);
}

#[test]
fn max_of_nothing_waits_zero() {
    let l: MaxOfRateLimiter<u8> = MaxOfRateLimiter::new(Vec::new());
    assert_eq!(l.when(&0), Duration::ZERO);
    assert_eq!(l.num_requeues(&0), 0);
}

#[test]
fn max_wait_caps_the_inner_delay_and_passes_the_rest_through() {
    let l = WithMaxWaitRateLimiter::new(
        ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(100)),
        Duration::from_secs(5),
    );
    let got: Vec<u64> = (0..5).map(|_| l.when(&"a").as_secs()).collect();
    assert_eq!(got, [1, 2, 4, 5, 5]);
    assert_eq!(l.num_requeues(&"a"), 5);
    l.forget(&"a");
    assert_eq!(l.when(&"a"), Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn default_controller_limiter_is_max_of_exponential_and_bucket() {
    let l = default_controller_rate_limiter();
    // Per-item exponential dominates while the bucket has tokens.
    assert_eq!(l.when(&0u32), Duration::from_millis(5));
    assert_eq!(l.when(&0u32), Duration::from_millis(10));
    // Drain the bucket with other items (98 tokens left, 1 each).
    for i in 1..=98u32 {
        assert_eq!(l.when(&i), Duration::from_millis(5));
    }
    // Bucket empty: the next new item waits for the bucket, not 5 ms.
    assert_eq!(l.when(&1000u32), Duration::from_millis(100));
    assert_eq!(l.num_requeues(&0), 2);
    // The exponential cap is 1000 s.
    for _ in 0..40 {
        l.when(&7u32);
    }
    assert_eq!(l.when(&7u32), Duration::from_secs(1000));
}

#[test]
fn shared_limiters_work_through_arc_and_box() {
    let shared = Arc::new(ItemExponentialFailureRateLimiter::new(
        MS,
        Duration::from_secs(1),
    ));
    let boxed: Box<dyn RateLimiter<u8>> = Box::new(Arc::clone(&shared));
    boxed.when(&1);
    assert_eq!(shared.num_requeues(&1), 1);
    boxed.forget(&1);
    assert_eq!(RateLimiter::num_requeues(&shared, &1), 0);
}
