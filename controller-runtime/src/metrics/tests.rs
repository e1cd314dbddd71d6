use super::*;
use crate::reconcile::BoxError;
use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

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
    let rec = metrics.controller("c");
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
    let _rec = metrics.controller("fresh");
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
    let rec = metrics.controller("g");
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
    a.controller("x")
        .observe(&ReconcileOutcome::Success, Duration::ZERO);
    assert!(!b.encode().unwrap().contains(r#"controller="x""#));
}

#[test]
fn registering_a_name_twice_is_an_error() {
    let metrics = Metrics::new().unwrap();
    let dup = IntCounter::new("controller_runtime_reconcile_total", "dup").unwrap();
    let err = metrics.register(Box::new(dup)).unwrap_err();
    assert!(
        err.to_string().starts_with("prometheus registry: "),
        "{err}"
    );
}

#[tokio::test]
async fn router_serves_text_format() {
    let metrics = Metrics::new().unwrap();
    metrics
        .controller("web")
        .observe(&ReconcileOutcome::Success, Duration::ZERO);
    let resp = metrics
        .router()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()[header::CONTENT_TYPE],
        "text/plain; version=0.0.4"
    );
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert_eq!(
        sample(
            &text,
            r#"controller_runtime_reconcile_total{controller="web",result="success"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn informer_adapter_records_under_informer_names() {
    use informer_core::metrics::{RelistCause, WatchEventType};
    let metrics = Metrics::new().unwrap();
    let sink = metrics.informer_metrics();
    let inf = "/api/v1/configmaps";
    sink.list_completed(inf, 7, 1, Duration::from_millis(30));
    sink.watch_event(inf, WatchEventType::Added);
    sink.watch_event(inf, WatchEventType::Added);
    sink.relist(inf, RelistCause::Expired);
    sink.handler_pending(inf, "h1", 3);
    let text = metrics.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"informer_lists_total{informer="/api/v1/configmaps"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_list_items{informer="/api/v1/configmaps"}"#
        ),
        Some(7.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_watch_events_total{informer="/api/v1/configmaps",type="added"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_relists_total{cause="expired",informer="/api/v1/configmaps"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_handler_pending{handler="h1",informer="/api/v1/configmaps"}"#
        ),
        Some(3.0)
    );
}

#[test]
fn workqueue_metrics_share_the_registry() {
    let metrics = Metrics::new().unwrap();
    let queue: crate::workqueue::Queue<&str> = crate::workqueue::Queue::builder()
        .name("cms")
        .metrics(metrics.workqueue_metrics())
        .build();
    queue.add("a");
    let text = metrics.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"workqueue_adds_total{controller="cms",name="cms"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, r#"workqueue_depth{controller="cms",name="cms"}"#),
        Some(1.0)
    );
}
