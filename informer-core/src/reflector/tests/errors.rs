//! Error handling: 429, other errors, transport failures and the backoff between retries.

use super::*;

/// tokio's timer rounds a sleep up to the next millisecond, so a jittered wait
/// drawn just under its upper bound can be observed up to 1 ms past it.
const TIMER_SLACK: f64 = 0.002;

#[tokio::test(start_paused = true)]
async fn watch_429_backs_off_then_rewatches_without_a_list() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::WatchErr(api_err(429, "TooManyRequests")),
        Step::Watch(vec![
            add("a", "11"),
            Item::Err(api_err(429, "TooManyRequests")),
        ]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(h.lw.lists().len(), 1);
    let first_gap = h.at(2) - h.at(1);
    assert!(
        (0.8..1.6 + TIMER_SLACK).contains(&first_gap),
        "first 429 backoff {first_gap}"
    );
    let second_gap = h.at(3) - h.at(2);
    assert!(
        (1.6..3.2 + TIMER_SLACK).contains(&second_gap),
        "second 429 backoff {second_gap}"
    );
    assert_eq!(h.lw.watches()[2].resource_version, "11");
    assert_eq!(h.metrics.count("watch_restart:too_many_requests"), 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_of_a_429_is_honoured() {
    let slow_down = ListWatchError::Api {
        status: Box::new(kube_core::Status::failure("slow", "TooManyRequests").with_code(429)),
        retry_after: Some(Duration::from_secs(5)),
    };
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::WatchErr(slow_down),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    let gap = h.at(2) - h.at(1);
    assert!((5.0..5.1).contains(&gap), "waited {gap}");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn other_watch_errors_back_off_then_relist() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![
            add("a", "11"),
            Item::Err(api_err(500, "InternalError")),
        ]),
        Step::List(Ok(page("12", &["a"], None))),
        Step::WatchErr(api_err(403, "Forbidden")),
        Step::List(Ok(page("13", &["a"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(6).await;
    let gap = h.at(2) - h.at(1);
    assert!(
        (0.8..1.6 + TIMER_SLACK).contains(&gap),
        "backoff before relist {gap}"
    );
    let gap = h.at(4) - h.at(3);
    assert!(
        (1.6..3.2 + TIMER_SLACK).contains(&gap),
        "second backoff {gap}"
    );
    assert_eq!(h.lw.lists()[1].resource_version, "11");
    assert_eq!(h.metrics.count("relist:error"), 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn transport_errors_back_off_then_rewatch() {
    let refused = ListWatchError::Transport(kube_client::Error::LinesCodecMaxLineLengthExceeded);
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::WatchErr(refused),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.lw.lists().len(), 1);
    let gap = h.at(2) - h.at(1);
    assert!((0.8..1.6 + TIMER_SLACK).contains(&gap), "{gap}");
    assert_eq!(h.metrics.count("watch_restart:transport"), 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_closes_at_once_without_events_backs_off() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![]),
        Step::Watch(vec![]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert!((0.8..1.6 + TIMER_SLACK).contains(&(h.at(2) - h.at(1))));
    assert!((1.6..3.2 + TIMER_SLACK).contains(&(h.at(3) - h.at(2))));
    assert_eq!(h.lw.lists().len(), 1);
    assert_eq!(h.lw.watches()[2].resource_version, "10");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn list_failures_back_off_doubling_to_the_30s_cap() {
    let mut steps: Vec<Step> = (0..9)
        .map(|_| Step::List(Err(api_err(500, "InternalError"))))
        .collect();
    steps.push(Step::List(Ok(page("10", &[], None))));
    steps.push(Step::Watch(vec![Item::Hang]));
    let h = start(steps);
    h.until_calls(11).await;
    let bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0];
    for (i, base) in bases.iter().enumerate() {
        let gap = h.at(i + 1) - h.at(i);
        assert!(
            gap >= *base && gap < 2.0 * base,
            "gap {i} = {gap}, base {base}"
        );
    }
    // the first retry of a list repeats resourceVersion=0
    assert!(h.lw.lists().iter().all(|l| l.resource_version == "0"));
    assert_eq!(h.metrics.count("list_failed:InternalError"), 9);
    assert_eq!(h.metrics.count("relist:error"), 9);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn backoff_resets_after_two_healthy_minutes() {
    let h = start(vec![
        Step::List(Err(api_err(500, "InternalError"))),
        Step::List(Err(api_err(500, "InternalError"))),
        Step::List(Ok(page("10", &[], None))),
        // healthy for 119 s: the backoff is still grown
        Step::Watch(vec![
            Item::Delay(Duration::from_secs(119)),
            Item::Err(api_err(500, "InternalError")),
        ]),
        Step::List(Ok(page("11", &[], None))),
        // healthy for 121 s: the backoff starts again at 800 ms
        Step::Watch(vec![
            Item::Delay(Duration::from_secs(121)),
            Item::Err(api_err(500, "InternalError")),
        ]),
        Step::List(Ok(page("12", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(8).await;
    let waits = h.metrics.backoffs.lock().clone();
    assert_eq!(waits.len(), 4, "{waits:?}");
    let secs: Vec<f64> = waits.iter().map(Duration::as_secs_f64).collect();
    assert!((0.8..1.6 + TIMER_SLACK).contains(&secs[0]), "{secs:?}");
    assert!((1.6..3.2 + TIMER_SLACK).contains(&secs[1]), "{secs:?}");
    assert!(
        (3.2..6.4 + TIMER_SLACK).contains(&secs[2]),
        "not reset after 119 s: {secs:?}"
    );
    assert!(
        (0.8..1.6 + TIMER_SLACK).contains(&secs[3]),
        "reset after 121 s: {secs:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_capped_at_a_minute() {
    let slow_down = ListWatchError::Api {
        status: Box::new(kube_core::Status::failure("slow", "TooManyRequests").with_code(429)),
        retry_after: Some(Duration::from_secs(3600)),
    };
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::WatchErr(slow_down),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.at(2) - h.at(1), 60.0);
    h.stop().await;
}
