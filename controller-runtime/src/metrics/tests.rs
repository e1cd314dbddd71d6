use std::time::Duration;

use prometheus::IntCounter;

use super::*;
use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

/// The value of the sample line `series` (name plus labels) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
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
        .controller_vecs()
        .reconcile_total
        .with_label_values(&["web", "success"])
        .inc();
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
    sink.oversized_answer(inf, "list_page");
    let text = metrics.encode().unwrap();
    assert_eq!(
        sample(
            &text,
            r#"informer_lists_total{cluster="",informer="/api/v1/configmaps"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_list_items{cluster="",informer="/api/v1/configmaps"}"#
        ),
        Some(7.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_watch_events_total{cluster="",informer="/api/v1/configmaps",type="added"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_relists_total{cause="expired",cluster="",informer="/api/v1/configmaps"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_handler_pending{cluster="",handler="h1",informer="/api/v1/configmaps"}"#
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"informer_oversized_answers_total{cluster="",informer="/api/v1/configmaps",part="list_page"}"#
        ),
        Some(1.0)
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
