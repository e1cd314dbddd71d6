//! One test per Reflector rule, against a scripted lister-watcher on
//! tokio's paused clock.

mod counts;
mod errors;
pub(super) mod fake;
mod streaming;
mod surface;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::fake::*;
use super::*;
use crate::list_watch::{ListRequest, WatchEvent};

struct Harness {
    bump: Bump,
    lw: Arc<FakeLw>,
    store: Arc<RecordingStore>,
    metrics: Arc<CountingMetrics>,
    errors: Arc<Mutex<Vec<String>>>,
    synced: SyncedResourceVersion,
    cancel: CancellationToken,
    task: JoinHandle<()>,
    started: Instant,
}

fn start(steps: Vec<Step>) -> Harness {
    start_with(steps, |b| b)
}

fn start_with(
    steps: Vec<Step>,
    configure: impl FnOnce(ReflectorBuilder<Obj>) -> ReflectorBuilder<Obj>,
) -> Harness {
    let bump = Bump::new();
    let lw = FakeLw::new(&bump, steps);
    let store = RecordingStore::new(&bump);
    let metrics = CountingMetrics::new(&bump);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    let reflector = configure(
        Reflector::builder(lw.clone(), store.clone())
            .name("test")
            .metrics(metrics.clone())
            .watch_error_handler(move |e| sink.lock().push(e.to_string())),
    )
    .build();
    let synced = reflector.synced_resource_version();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(reflector.run(cancel.clone()));
    Harness {
        bump,
        lw,
        store,
        metrics,
        errors,
        synced,
        cancel,
        task,
        started: Instant::now(),
    }
}

impl Harness {
    /// Waits until every scripted step was consumed.
    async fn until_script_done(&self) {
        let lw = self.lw.clone();
        self.bump
            .until("the script is consumed", move || lw.script_done())
            .await;
    }

    async fn until_calls(&self, n: usize) {
        let lw = self.lw.clone();
        self.bump
            .until(&format!("{n} calls were made"), move || {
                lw.calls().len() >= n
            })
            .await;
    }

    async fn until_ops(&self, n: usize) {
        let store = self.store.clone();
        self.bump
            .until(&format!("{n} store operations"), move || {
                store.ops().len() >= n
            })
            .await;
    }

    /// Seconds since start at which call `i` was made.
    fn at(&self, i: usize) -> f64 {
        (self.lw.calls()[i].at - self.started).as_secs_f64()
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(1), self.task)
            .await
            .expect("reflector stops on cancellation")
            .expect("reflector task did not panic");
    }
}

fn list_req(limit: Option<u32>, rv: &str, cont: Option<&str>) -> ListRequest {
    ListRequest {
        limit,
        continue_token: cont.map(str::to_owned),
        resource_version: rv.into(),
        resource_version_match: None,
    }
}

fn add(name: &str, rv: &str) -> Item {
    Item::Event(WatchEvent::Added(cm(name, rv)))
}

fn ops_replace(names: &[&str], rv: &str) -> Op {
    Op::Replace(names.iter().map(|s| (*s).to_owned()).collect(), rv.into())
}

#[tokio::test(start_paused = true)]
async fn first_list_asks_for_rv_0_with_limit_500_then_watches_from_the_list_rv() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a", "b"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(2).await;
    assert_eq!(h.lw.lists(), vec![list_req(Some(500), "0", None)]);
    let w = &h.lw.watches()[0];
    assert_eq!(w.resource_version, "10");
    assert!(w.allow_bookmarks);
    assert!(!w.send_initial_events);
    let t = w.timeout_seconds.unwrap();
    assert!((300..600).contains(&t), "timeout {t}");
    assert_eq!(h.store.ops(), vec![ops_replace(&["a", "b"], "10")]);
    assert_eq!(h.synced.get().as_deref(), Some("10"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_timeouts_are_spread_over_300_to_600_seconds() {
    // Each watch delivers one event and ends; the next one reopens at once.
    let mut steps = vec![Step::List(Ok(page("1", &[], None)))];
    for i in 0..60 {
        steps.push(Step::Watch(vec![add("a", &(i + 2).to_string())]));
    }
    let h = start(steps);
    h.until_script_done().await;
    h.until_calls(62).await;
    let timeouts: Vec<u32> =
        h.lw.watches()
            .iter()
            .map(|w| w.timeout_seconds.unwrap())
            .collect();
    assert!(
        timeouts.iter().all(|t| (300..600).contains(t)),
        "{timeouts:?}"
    );
    let min = *timeouts.iter().min().unwrap();
    let max = *timeouts.iter().max().unwrap();
    assert!(
        max - min > 100,
        "timeouts should be drawn from the whole range: {timeouts:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn paginates_with_continue_tokens_and_replaces_once_with_every_page() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a", "b"], Some("c1")))),
        Step::List(Ok(page("10", &["c", "d"], Some("c2")))),
        Step::List(Ok(page("10", &["e"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(
        h.lw.lists(),
        vec![
            list_req(Some(500), "0", None),
            list_req(Some(500), "0", Some("c1")),
            list_req(Some(500), "0", Some("c2")),
        ]
    );
    assert_eq!(
        h.store.ops(),
        vec![ops_replace(&["a", "b", "c", "d", "e"], "10")]
    );
    assert_eq!(h.lw.watches()[0].resource_version, "10");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_continue_token_falls_back_to_one_full_list() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a", "b"], Some("c1")))),
        Step::List(Err(api_err(410, "Expired"))),
        Step::List(Ok(page("12", &["a", "b", "c"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(
        h.lw.lists(),
        vec![
            list_req(Some(500), "0", None),
            list_req(Some(500), "0", Some("c1")),
            list_req(None, "0", None),
        ]
    );
    assert_eq!(h.store.ops(), vec![ops_replace(&["a", "b", "c"], "12")]);
    assert_eq!(h.lw.watches()[0].resource_version, "12");
    // Reported as one list of 3 items in 2 pages (the broken one counts).
    assert_eq!(
        (
            h.metrics.count("list_items:3"),
            h.metrics.count("list_pages:2")
        ),
        (1, 1)
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn explicit_page_size_is_used_for_every_list() {
    let h = start_with(
        vec![
            Step::List(Ok(page("10", &["a"], None))),
            Step::Watch(vec![Item::Err(api_err(410, "Expired"))]),
            Step::List(Ok(page("11", &["a"], None))),
            Step::Watch(vec![Item::Hang]),
        ],
        |b| b.page_size(2),
    );
    h.until_calls(4).await;
    assert_eq!(
        h.lw.lists(),
        vec![list_req(Some(2), "0", None), list_req(Some(2), "10", None)]
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_that_ends_normally_is_reopened_from_the_last_rv_without_a_list() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a"], None))),
        Step::Watch(vec![
            add("b", "11"),
            Item::Event(WatchEvent::Modified(cm("a", "12"))),
            Item::Event(WatchEvent::Deleted(cm("b", "13"))),
        ]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.lw.lists().len(), 1);
    assert_eq!(h.lw.watches()[1].resource_version, "13");
    assert_eq!(h.at(2), h.at(1), "no backoff after a normal end");
    assert_eq!(
        h.store.ops(),
        vec![
            ops_replace(&["a"], "10"),
            Op::Add("b".into(), "11".into()),
            Op::Update("a".into(), "12".into()),
            Op::Delete("b".into(), "13".into()),
        ]
    );
    assert_eq!(h.metrics.count("watch_restart:closed"), 1);
    assert_eq!(h.metrics.count("event:added"), 1);
    assert_eq!(h.metrics.count("event:deleted"), 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn bookmarks_only_move_the_resource_version() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a"], None))),
        Step::Watch(vec![
            Item::Event(bookmark("20")),
            Item::Event(bookmark("25")),
        ]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.store.ops(), vec![ops_replace(&["a"], "10")]);
    assert_eq!(h.lw.watches()[1].resource_version, "25");
    assert_eq!(h.synced.get().as_deref(), Some("25"));
    assert_eq!(h.metrics.count("event:bookmark"), 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_410_relists_from_the_last_rv_at_once() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a"], None))),
        Step::Watch(vec![add("b", "11"), Item::Err(api_err(410, "Expired"))]),
        Step::List(Ok(page("15", &["a", "b"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    // A relist from a specific RV is not paginated (served from the watch cache).
    assert_eq!(
        h.lw.lists(),
        vec![list_req(Some(500), "0", None), list_req(None, "11", None)]
    );
    assert_eq!(h.at(2), h.at(1), "a 410 relists without backoff");
    assert_eq!(h.lw.watches()[1].resource_version, "15");
    assert_eq!(h.metrics.count("relist:expired"), 1);
    assert_eq!(h.errors.lock().len(), 1);
    assert!(h.errors.lock()[0].contains("410"), "{:?}", h.errors.lock());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn watch_open_refused_with_410_relists() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::WatchErr(api_err(410, "Gone")),
        Step::List(Ok(page("20", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(h.lw.lists()[1], list_req(None, "10", None));
    assert_eq!(h.lw.watches()[1].resource_version, "20");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn expired_list_answer_relists_with_empty_rv_then_returns_to_the_synced_rv() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a"], None))),
        Step::Watch(vec![Item::Err(api_err(410, "Expired"))]),
        Step::List(Err(api_err(410, "Expired"))),
        Step::List(Ok(page("30", &["a"], None))),
        Step::Watch(vec![add("b", "31"), Item::Err(api_err(410, "Expired"))]),
        Step::List(Ok(page("40", &["a", "b"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(7).await;
    assert_eq!(
        h.lw.lists(),
        vec![
            list_req(Some(500), "0", None),
            list_req(None, "10", None),
            list_req(Some(500), "", None),
            list_req(None, "31", None),
        ]
    );
    assert_eq!(h.lw.watches()[1].resource_version, "30");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn too_large_rv_answer_relists_with_empty_rv() {
    let too_large = ListWatchError::api(
        504,
        "Timeout",
        "Too large resource version: 99, current: 12",
    );
    let h = start(vec![
        Step::List(Ok(page("99", &[], None))),
        Step::Watch(vec![Item::Err(api_err(410, "Expired"))]),
        Step::List(Err(too_large)),
        Step::List(Ok(page("12", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(5).await;
    assert_eq!(h.lw.lists()[1].resource_version, "99");
    assert_eq!(h.lw.lists()[2].resource_version, "");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_relist_in_one_answer_over_the_cap_is_listed_again_in_pages() {
    let oversized = ListWatchError::Oversized {
        part: crate::list_watch::OversizedPart::ListPage,
        limit: 64 << 20,
    };
    let h = start(vec![
        Step::List(Ok(page("10", &["a"], None))),
        Step::Watch(vec![add("b", "11"), Item::Err(api_err(410, "Expired"))]),
        Step::List(Err(oversized)),
        Step::List(Ok(page("12", &["a", "b"], None))),
        Step::Watch(vec![add("c", "13"), Item::Err(api_err(410, "Expired"))]),
        Step::List(Ok(page("14", &["a", "b", "c"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(7).await;
    assert_eq!(
        h.lw.lists(),
        vec![
            list_req(Some(500), "0", None),
            list_req(None, "11", None),
            list_req(Some(500), "11", None),
            list_req(Some(500), "13", None),
        ],
        "paged at once, and from then on"
    );
    assert_eq!(h.metrics.count("oversized:list_page"), 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_paginated_first_list_keeps_relists_paginated() {
    let h = start(vec![
        Step::List(Ok(page("10", &["a"], Some("c1")))),
        Step::List(Ok(page("10", &["b"], None))),
        Step::Watch(vec![add("c", "11"), Item::Err(api_err(410, "Expired"))]),
        Step::List(Ok(page("12", &["a", "b", "c"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(5).await;
    assert_eq!(h.lw.lists()[2], list_req(Some(500), "11", None));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn undecodable_events_are_counted_and_skipped() {
    let mut bad_page = page("10", &["a"], None);
    bad_page.undecodable.push(crate::list_watch::DecodeFailure {
        event_type: Some("LIST".into()),
        key: Some("ns/broken".into()),
        resource_version: Some("9".into()),
        error: "bad".into(),
    });
    let h = start(vec![
        Step::List(Ok(bad_page)),
        Step::Watch(vec![
            Item::Event(undecodable("ns/x", "12")),
            add("b", "13"),
            Item::Hang,
        ]),
    ]);
    h.until_ops(2).await;
    assert_eq!(
        h.store.ops(),
        vec![ops_replace(&["a"], "10"), Op::Add("b".into(), "13".into())]
    );
    assert_eq!(h.metrics.count("decode_failure"), 2);
    assert_eq!(h.lw.calls().len(), 2, "the watch goes on after a bad event");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn undecodable_event_still_moves_the_rv() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![Item::Event(undecodable("ns/x", "12"))]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.lw.watches()[1].resource_version, "12");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_abandoned_after_its_timeout() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![Item::Hang]),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    let timeout = f64::from(h.lw.watches()[0].timeout_seconds.unwrap());
    let gap = h.at(2) - h.at(1);
    assert!(
        (gap - timeout - 30.0).abs() < 0.01,
        "gap {gap} timeout {timeout}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_a_hanging_watch_and_a_backoff() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(2).await;
    h.stop().await;

    let h = start(vec![Step::List(Err(api_err(500, "InternalError")))]);
    h.until_calls(1).await;
    let metrics = h.metrics.clone();
    h.bump
        .until("backing off", move || metrics.count("backoff") == 1)
        .await;
    let lw = h.lw.clone();
    h.stop().await;
    assert_eq!(lw.calls().len(), 1, "no call after cancellation");
}

#[tokio::test(start_paused = true)]
async fn resync_calls_the_store_every_period() {
    let h = start_with(
        vec![
            Step::List(Ok(page("10", &["a"], None))),
            Step::Watch(vec![Item::Hang]),
        ],
        |b| b.resync_period(Duration::from_secs(10)),
    );
    h.until_ops(4).await;
    let ops = h.store.ops();
    assert_eq!(ops[0], ops_replace(&["a"], "10"));
    assert_eq!(&ops[1..4], &[Op::Resync, Op::Resync, Op::Resync]);
    assert_eq!(h.started.elapsed(), Duration::from_secs(30));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn resync_asks_should_resync_first() {
    let allowed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = allowed.clone();
    let h = start_with(
        vec![
            Step::List(Ok(page("10", &["a"], None))),
            Step::Watch(vec![Item::Hang]),
        ],
        move |b| {
            b.resync_period(Duration::from_secs(10))
                .should_resync(move || flag.load(std::sync::atomic::Ordering::SeqCst))
        },
    );
    h.until_calls(2).await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!(
        h.store.ops().len(),
        1,
        "no resync while should_resync says no"
    );
    allowed.store(true, std::sync::atomic::Ordering::SeqCst);
    h.until_ops(2).await;
    assert_eq!(h.store.ops()[1], Op::Resync);
    assert_eq!(h.started.elapsed(), Duration::from_secs(40));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn last_sync_resource_version_follows_lists_and_events() {
    let h = start(vec![
        Step::List(Ok(page("10", &[], None))),
        Step::Watch(vec![add("a", "11"), Item::Hang]),
    ]);
    assert_eq!(h.synced.get(), None);
    h.until_ops(2).await;
    assert_eq!(h.synced.get().as_deref(), Some("11"));
    assert_eq!(h.metrics.count("list"), 1);
    h.stop().await;
}
