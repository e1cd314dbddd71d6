use std::time::Duration;

use super::*;
use crate::controller::outcome::{RESULTS, ReconcileOutcome};
use crate::error::BoxError;
use crate::metrics::Metrics;

fn boxed(msg: &str) -> BoxError {
    msg.to_string().into()
}

/// The value of the sample line `series` (name plus labels) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn outcomes_map_to_the_controller_runtime_series() {
    let metrics = Metrics::new().unwrap();
    let rec = ControllerMetrics::new(&metrics, "c");
    let d = Duration::from_millis(20);
    rec.observe(&ReconcileOutcome::Success, d);
    rec.observe(&ReconcileOutcome::Success, d);
    rec.observe(&ReconcileOutcome::Requeue, d);
    rec.observe(&ReconcileOutcome::RequeueAfter(Duration::from_secs(1)), d);
    rec.observe(&ReconcileOutcome::Error(boxed("e")), d);
    rec.observe(&ReconcileOutcome::Terminal(boxed("t")), d);
    rec.observe(&ReconcileOutcome::Panic("p".into()), d);
    rec.observe(&ReconcileOutcome::Timeout(Duration::from_secs(1)), d);
    let text = metrics.encode().unwrap();
    let total = |result: &str| {
        sample(
            &text,
            &format!(r#"controller_runtime_reconcile_total{{controller="c",result="{result}"}}"#),
        )
    };
    assert_eq!(total("success"), Some(2.0));
    assert_eq!(total("requeue"), Some(1.0));
    assert_eq!(total("requeue_after"), Some(1.0));
    assert_eq!(total("error"), Some(4.0));
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_errors_total{controller="c"}"#
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_terminal_reconcile_errors_total{controller="c"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_panics_total{controller="c"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_time_seconds_count{controller="c"}"#
        ),
        Some(8.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_time_seconds_bucket{controller="c",le="0.025"}"#
        ),
        Some(8.0)
    );
    assert!(text.contains("# TYPE controller_runtime_reconcile_time_seconds histogram"));
    assert!(text.contains("# TYPE controller_runtime_reconcile_total counter"));
}

#[test]
fn result_series_start_at_zero() {
    let metrics = Metrics::new().unwrap();
    let _rec = ControllerMetrics::new(&metrics, "fresh");
    let text = metrics.encode().unwrap();
    for result in RESULTS {
        let series = format!(
            r#"controller_runtime_reconcile_total{{controller="fresh",result="{result}"}}"#
        );
        assert_eq!(sample(&text, &series), Some(0.0), "{series} in\n{text}");
    }
}

#[test]
fn gauges_track_workers() {
    let metrics = Metrics::new().unwrap();
    let rec = ControllerMetrics::new(&metrics, "g");
    rec.set_max_concurrent_reconciles(4);
    let a = rec.worker_active();
    let b = rec.worker_active();
    let text = metrics.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_max_concurrent_reconciles{controller="g"}"#
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_active_workers{controller="g"}"#
        ),
        Some(2.0)
    );
    drop((a, b));
    let text = metrics.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_active_workers{controller="g"}"#
        ),
        Some(0.0)
    );
}

#[test]
fn registries_are_per_manager() {
    let a = Metrics::new().unwrap();
    let b = Metrics::new().unwrap();
    ControllerMetrics::new(&a, "x").observe(&ReconcileOutcome::Success, Duration::ZERO);
    assert!(!b.encode().unwrap().contains(r#"controller="x""#));
}
