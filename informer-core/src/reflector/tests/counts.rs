//! What a list reports (items and pages, for the `informer_list_*`
//! metrics and logs) and how a watch that breaks mid-stream resumes.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_paged_list_reports_its_items_and_pages() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a", "b"], Some("c1")))),
        Step::List(Ok(page("10", &["c"], Some("c2")))),
        Step::List(Ok(page("10", &["d", "e"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(
        (
            h.metrics.count("list_items:5"),
            h.metrics.count("list_pages:3")
        ),
        (1, 1)
    );
    h.stop().await;
}

/// A connection that breaks after events were applied is resumed at once
/// from the last one, like a watch the server closed (no backoff, no
/// relist); it is still reported.
#[tokio::test(start_paused = true)]
async fn a_watch_broken_mid_stream_resumes_at_once_from_the_last_event() {
    let broken = ListWatchError::Transport(kube_client::Error::LinesCodecMaxLineLengthExceeded);
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![add("a", "11"), Item::Err(broken)]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.at(2) - h.at(1), 0.0, "no backoff before the new watch");
    assert_eq!(h.lw.watches()[1].resource_version, "11");
    assert_eq!(h.lw.lists().len(), 1);
    assert_eq!(h.metrics.count("watch_restart:transport"), 1);
    assert_eq!(h.errors.lock().len(), 1, "reported to the error handler");
    h.stop().await;
}

/// A minimum watch timeout beyond what the server's `timeoutSeconds` can
/// carry is clamped to about half the range (so twice it still fits), not
/// to nothing.
#[tokio::test(start_paused = true)]
async fn an_enormous_minimum_watch_timeout_is_clamped_not_lost() {
    let h = start_with(
        vec![
            Step::List(Ok(page("10", &[], None))),
            Step::Watch(vec![Item::Hang]),
        ],
        |b| b.min_watch_timeout(Duration::from_secs(u64::MAX)),
    );
    h.until_calls(2).await;
    let t = h.lw.watches()[0].timeout_seconds.unwrap();
    assert!(t >= u32::MAX / 2, "timeoutSeconds {t}");
    h.stop().await;
}

/// A failed LIST without a `Status` reason is labelled by what failed.
#[tokio::test(start_paused = true)]
async fn list_failures_without_a_reason_are_labelled_transport_or_error() {
    let undecodable = serde_json::from_str::<u8>("x").unwrap_err();
    let h = start(vec![
        Step::List(Err(ListWatchError::Transport(
            kube_client::Error::LinesCodecMaxLineLengthExceeded,
        ))),
        Step::List(Err(ListWatchError::DecodeList(undecodable))),
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(
        (
            h.metrics.count("list_failed:transport"),
            h.metrics.count("list_failed:error")
        ),
        (1, 1)
    );
    h.stop().await;
}
