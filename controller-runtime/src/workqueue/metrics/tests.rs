//! Metrics tests: drive a queue on the paused clock, scrape a real registry
//! with the text encoder, check names, labels and values.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{Encoder, Registry, TextEncoder};
use tokio::time::advance;

use super::*;
use crate::workqueue::tests::support::soon;
use crate::workqueue::{AddOptions, Queue};

const SEC: Duration = Duration::from_secs(1);

fn scrape(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// The value of `metric` for the queue `queue` (labels as the encoder
/// sorts them), or `None` if the series is absent.
fn value(text: &str, metric: &str, queue: &str) -> Option<f64> {
    let prefix = format!("{metric}{{controller=\"{queue}\",name=\"{queue}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap())
}

/// Lets the periodic refresh task run after the clock moved.
async fn settle() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn prometheus_metrics_follow_the_queue() {
    let registry = Registry::new();
    let provider = Arc::new(PrometheusMetricsProvider::new(&registry).unwrap());
    let q: Queue<&str> = Queue::builder()
        .name("pods")
        .metrics(provider.clone())
        .build();
    let other: Queue<&str> = Queue::builder().name("secrets").metrics(provider).build();

    q.add("a");
    q.add("b");
    q.add("a"); // already pending: not an add
    other.add("x");
    let text = scrape(&registry);
    assert_eq!(value(&text, ADDS_TOTAL, "pods"), Some(2.0));
    assert_eq!(value(&text, DEPTH, "pods"), Some(2.0));
    assert_eq!(value(&text, ADDS_TOTAL, "secrets"), Some(1.0));

    advance(2 * SEC).await;
    let a = soon(q.get()).await.unwrap();
    assert_eq!(a, "a");
    advance(3 * SEC).await;
    settle().await;
    let text = scrape(&registry);
    assert_eq!(value(&text, DEPTH, "pods"), Some(1.0));
    assert_eq!(value(&text, UNFINISHED_WORK_SECONDS, "pods"), Some(3.0));
    assert_eq!(
        value(&text, LONGEST_RUNNING_PROCESSOR_SECONDS, "pods"),
        Some(3.0)
    );

    let b = soon(q.get()).await.unwrap();
    advance(SEC).await;
    settle().await;
    let text = scrape(&registry);
    assert_eq!(
        value(&text, UNFINISHED_WORK_SECONDS, "pods"),
        Some(5.0),
        "4 s + 1 s"
    );
    assert_eq!(
        value(&text, LONGEST_RUNNING_PROCESSOR_SECONDS, "pods"),
        Some(4.0)
    );

    q.done(&a);
    q.done(&b);
    q.add_rate_limited("c");
    advance(SEC).await;
    settle().await;
    let text = scrape(&registry);
    let queued = format!("{QUEUE_DURATION_SECONDS}_count");
    let queued_sum = format!("{QUEUE_DURATION_SECONDS}_sum");
    let worked = format!("{WORK_DURATION_SECONDS}_count");
    let worked_sum = format!("{WORK_DURATION_SECONDS}_sum");
    assert_eq!(value(&text, &queued, "pods"), Some(2.0));
    assert_eq!(
        value(&text, &queued_sum, "pods"),
        Some(7.0),
        "a waited 2 s, b 5 s"
    );
    assert_eq!(value(&text, &worked, "pods"), Some(2.0));
    assert_eq!(value(&text, &worked_sum, "pods"), Some(5.0), "a 4 s, b 1 s");
    assert_eq!(value(&text, RETRIES_TOTAL, "pods"), Some(1.0));
    assert_eq!(value(&text, ADDS_TOTAL, "pods"), Some(3.0));
    assert_eq!(
        value(&text, DEPTH, "pods"),
        Some(1.0),
        "c is ready after 5 ms"
    );
    assert_eq!(value(&text, UNFINISHED_WORK_SECONDS, "pods"), Some(0.0));
    assert_eq!(
        value(&text, LONGEST_RUNNING_PROCESSOR_SECONDS, "pods"),
        Some(0.0)
    );
    assert_eq!(value(&text, RETRIES_TOTAL, "secrets"), Some(0.0));

    for (name, kind) in [
        (DEPTH, "gauge"),
        (ADDS_TOTAL, "counter"),
        (QUEUE_DURATION_SECONDS, "histogram"),
        (WORK_DURATION_SECONDS, "histogram"),
        (UNFINISHED_WORK_SECONDS, "gauge"),
        (LONGEST_RUNNING_PROCESSOR_SECONDS, "gauge"),
        (RETRIES_TOTAL, "counter"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "{name}: {text}"
        );
    }
    assert!(text.contains(
        r#"workqueue_queue_duration_seconds_bucket{controller="pods",name="pods",le="1"} 0"#
    ));
    assert!(text.contains(
        r#"workqueue_queue_duration_seconds_bucket{controller="pods",name="pods",le="10"} 2"#
    ));
    // Twelve buckets from 10 ns to 1000 s, plus +Inf.
    let buckets = text
        .lines()
        .filter(|l| l.starts_with(r#"workqueue_work_duration_seconds_bucket{controller="pods""#))
        .count();
    assert_eq!(buckets, 13, "{text}");
    assert!(text.contains(
        r#"workqueue_work_duration_seconds_bucket{controller="pods",name="pods",le="0.00000001"} 0"#
    ), "{text}");
}

#[test]
fn registering_twice_on_one_registry_is_an_error_naming_the_metric() {
    let registry = Registry::new();
    PrometheusMetricsProvider::new(&registry).unwrap();
    let err = PrometheusMetricsProvider::new(&registry).unwrap_err();
    assert!(matches!(err, Error::MetricRegistration { name: DEPTH, .. }));
    assert!(err.to_string().contains("workqueue_depth"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn refresh_metrics_works_without_the_periodic_task() {
    let registry = Registry::new();
    let provider = Arc::new(PrometheusMetricsProvider::new(&registry).unwrap());
    let q: Queue<u8> = Queue::builder()
        .name("q")
        .metrics(provider)
        .metrics_update_period(Duration::from_secs(3600))
        .build();
    q.add(1);
    let _one = soon(q.get()).await.unwrap();
    advance(10 * SEC).await;
    assert_eq!(
        value(&scrape(&registry), UNFINISHED_WORK_SECONDS, "q"),
        Some(0.0)
    );
    q.refresh_metrics();
    assert_eq!(
        value(&scrape(&registry), UNFINISHED_WORK_SECONDS, "q"),
        Some(10.0)
    );
}

#[tokio::test]
async fn noop_provider_reports_nothing_and_the_queue_still_works() {
    let q: Queue<u8> = Queue::builder()
        .metrics(Arc::new(NoopMetricsProvider))
        .build();
    q.add(1);
    q.add_rate_limited(2);
    assert_eq!(soon(q.get()).await, Some(1));
    q.done(&1);
    q.refresh_metrics();
    let m = NoopMetricsProvider.queue_metrics("x");
    m.inc_adds();
    m.set_depth(3);
}

/// client-go counts a retry on every `AddAfter` (zero delay included) and on
/// every rate-limited add, once; a delayed add to a shut-down queue is
/// dropped and not counted.
#[tokio::test(start_paused = true)]
async fn retries_count_every_delayed_add_not_only_rate_limited_ones() {
    let registry = Registry::new();
    let provider = Arc::new(PrometheusMetricsProvider::new(&registry).unwrap());
    let q: Queue<&str> = Queue::builder().name("r").metrics(provider).build();
    let retries = || value(&scrape(&registry), RETRIES_TOTAL, "r");
    q.add("plain");
    assert_eq!(retries(), Some(0.0), "a plain add is not a retry");
    q.add_after("later", 5 * SEC);
    assert_eq!(retries(), Some(1.0), "add_after counts");
    q.add_after("now", Duration::ZERO);
    assert_eq!(retries(), Some(2.0), "a zero-delay add_after counts too");
    q.add_rate_limited("failed");
    assert_eq!(retries(), Some(3.0), "a rate-limited add counts once");
    q.add_with("opt", AddOptions::new().after(SEC));
    q.add_with("opt-rl", AddOptions::new().rate_limited());
    assert_eq!(
        retries(),
        Some(5.0),
        "delayed and rate-limited add_with count"
    );
    q.add_with("opt-now", AddOptions::new());
    assert_eq!(retries(), Some(5.0), "an immediate add_with does not");
    q.shut_down();
    q.add_after("dropped", SEC);
    assert_eq!(retries(), Some(5.0), "adds after shut down are dropped");
}

#[tokio::test(start_paused = true)]
async fn the_refresher_outlives_an_idle_start_runs_through_a_drain_and_then_stops() {
    let registry = Registry::new();
    let provider = Arc::new(PrometheusMetricsProvider::new(&registry).unwrap());
    let q: Queue<&str> = Queue::builder().name("idle").metrics(provider).build();
    // The refresher's first ticks find nothing being processed.
    advance(SEC).await;
    settle().await;
    let tasks = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    q.add("a");
    let a = soon(q.get()).await.unwrap();
    advance(3 * SEC).await;
    settle().await;
    assert_eq!(
        value(&scrape(&registry), UNFINISHED_WORK_SECONDS, "idle"),
        Some(3.0)
    );
    // Shut down with "a" in flight: still refreshed while it drains.
    q.shut_down();
    advance(2 * SEC).await;
    settle().await;
    assert_eq!(
        value(&scrape(&registry), UNFINISHED_WORK_SECONDS, "idle"),
        Some(5.0)
    );
    advance(2 * SEC).await;
    settle().await;
    assert_eq!(
        value(&scrape(&registry), UNFINISHED_WORK_SECONDS, "idle"),
        Some(7.0),
        "refreshed on every tick of the drain, not only the first"
    );
    q.done(&a);
    advance(SEC).await;
    settle().await;
    assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        tasks - 1,
        "the refresher stops once the queue is shut down and drained"
    );
}
