//! Streaming list: a WATCH with `sendInitialEvents=true` instead of LIST.

use super::*;

fn streaming(steps: Vec<Step>) -> Harness {
    start_with(steps, |b| b.streaming_list(true))
}

#[tokio::test(start_paused = true)]
async fn initial_events_up_to_the_end_bookmark_become_one_replace() {
    let h = streaming(vec![Step::Watch(vec![
        add("a", "5"),
        add("b", "7"),
        Item::Event(bookmark("8")),
        Item::Event(initial_events_end("9")),
        add("c", "10"),
        Item::Hang,
    ])]);
    h.until_ops(2).await;
    let w = &h.lw.watches()[0];
    assert!(w.send_initial_events);
    assert!(w.allow_bookmarks);
    assert_eq!(w.resource_version, "", "a consistent read on first sync");
    assert!((300..600).contains(&w.timeout_seconds.unwrap()));
    let mut ops = h.store.ops();
    if let Op::Replace(names, _) = &mut ops[0] {
        names.sort();
    }
    assert_eq!(
        ops,
        vec![
            ops_replace(&["a", "b"], "9"),
            Op::Add("c".into(), "10".into())
        ]
    );
    assert!(h.lw.lists().is_empty(), "no LIST when streaming works");
    assert_eq!(h.synced.get().as_deref(), Some("10"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn refused_streaming_list_falls_back_to_list() {
    let h = streaming(vec![
        Step::WatchErr(api_err(422, "Invalid")),
        Step::List(Ok(page("10", &["a"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.lw.lists(), vec![list_req(Some(500), "0", None)]);
    assert_eq!(h.at(1), h.at(0), "the fallback is immediate");
    let w = &h.lw.watches()[1];
    assert!(!w.send_initial_events);
    assert_eq!(w.resource_version, "10");
    assert_eq!(h.metrics.count("streaming_fallback"), 1);
    assert_eq!(h.store.ops(), vec![ops_replace(&["a"], "10")]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_before_the_bookmark_falls_back_to_list() {
    let h = streaming(vec![
        Step::Watch(vec![add("a", "5")]),
        Step::List(Ok(page("10", &["a", "b"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.store.ops(), vec![ops_replace(&["a", "b"], "10")]);
    assert_eq!(h.metrics.count("streaming_fallback"), 1);
    assert!(h.errors.lock()[0].contains("initial-events-end"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn after_a_relist_streaming_resumes_from_the_synced_rv() {
    let h = streaming(vec![
        Step::Watch(vec![
            add("a", "5"),
            Item::Event(initial_events_end("9")),
            add("b", "11"),
            Item::Err(api_err(410, "Expired")),
        ]),
        Step::Watch(vec![Item::Event(initial_events_end("20")), Item::Hang]),
    ]);
    h.until_calls(2).await;
    h.until_ops(3).await;
    let w = &h.lw.watches()[1];
    assert!(w.send_initial_events);
    assert_eq!(w.resource_version, "11");
    assert_eq!(h.store.ops()[2], ops_replace(&[], "20"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_expired_streaming_rv_falls_back_to_a_list_of_the_newest_data() {
    let h = streaming(vec![
        Step::Watch(vec![
            Item::Event(initial_events_end("9")),
            Item::Err(api_err(410, "Expired")),
        ]),
        Step::WatchErr(api_err(410, "Expired")),
        Step::List(Ok(page("30", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(4).await;
    assert_eq!(h.lw.watches()[1].resource_version, "9");
    assert_eq!(h.lw.lists(), vec![list_req(Some(500), "", None)]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_incomplete_stream_reports_how_many_events_came() {
    let h = streaming(vec![
        Step::Watch(vec![add("a", "5"), add("b", "6")]),
        Step::List(Ok(page("10", &["a", "b"], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    let errors = h.errors.lock().clone();
    assert!(
        errors.iter().any(|e| e.contains("after 2 events")),
        "{errors:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_expired_midway_lists_the_newest_data() {
    let h = streaming(vec![
        Step::Watch(vec![add("a", "5"), Item::Err(api_err(410, "Expired"))]),
        Step::List(Ok(page("30", &[], None))),
        Step::Watch(vec![Item::Hang]),
    ]);
    h.until_calls(3).await;
    assert_eq!(h.lw.lists(), vec![list_req(Some(500), "", None)]);
    h.stop().await;
}

/// A reflector streaming into a real DeltaFIFO (which takes lists by page),
/// the FIFO optionally knowing `known` objects already.
fn streaming_into_fifo(
    steps: Vec<Step>,
    page_size: u32,
    known: &[&str],
) -> (
    Arc<FakeLw>,
    Arc<crate::delta_fifo::DeltaFifo<Obj>>,
    Bump,
    CancellationToken,
) {
    let bump = Bump::new();
    let lw = FakeLw::new(&bump, steps);
    let indexer = Arc::new(crate::store::Indexer::new());
    for name in known {
        indexer.add(Arc::new(cm(name, "1"))).unwrap();
    }
    let fifo = Arc::new(crate::delta_fifo::DeltaFifo::new(Some(indexer)));
    let reflector = Reflector::builder(lw.clone(), fifo.clone())
        .name("test")
        .streaming_list(true)
        .page_size(page_size)
        .build();
    let cancel = CancellationToken::new();
    tokio::spawn(reflector.run(cancel.clone()));
    (lw, fifo, bump, cancel)
}

/// Pops everything queued: each key with its delta kinds.
fn drain(
    fifo: &crate::delta_fifo::DeltaFifo<Obj>,
) -> Vec<(String, Vec<crate::delta_fifo::DeltaType>)> {
    let mut out = Vec::new();
    while !fifo.is_empty() {
        let next = fifo.pop(|d| (d.key.to_string(), d.deltas.iter().map(|d| d.kind).collect()));
        match futures::FutureExt::now_or_never(next) {
            Some(Ok(item)) => out.push(item),
            other => panic!(
                "a queued item pops at once, got {:?}",
                other.map(|r| r.is_ok())
            ),
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn streamed_objects_reach_a_paged_store_before_the_end_bookmark() {
    let (lw, fifo, bump, cancel) = streaming_into_fifo(
        vec![Step::Watch(vec![
            add("a", "5"),
            add("b", "6"),
            add("c", "7"),
            Item::Hang,
        ])],
        2,
        &[],
    );
    let probe = lw.clone();
    bump.until("the stream hangs before its end", move || probe.hung() == 1)
        .await;
    // The first full page is in the FIFO; the third object waits for its
    // page to fill or the bookmark; nothing is synced yet.
    assert_eq!(fifo.len(), 2);
    assert!(!fifo.has_synced());
    assert_eq!(fifo.last_sync_resource_version(), None);
    use crate::delta_fifo::DeltaType::Replaced;
    assert_eq!(
        drain(&fifo),
        [
            ("ns/a".to_owned(), vec![Replaced]),
            ("ns/b".to_owned(), vec![Replaced])
        ]
    );
    cancel.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_streamed_state_in_pages_ends_like_one_replace() {
    let (lw, fifo, bump, cancel) = streaming_into_fifo(
        vec![Step::Watch(vec![
            add("a", "5"),
            add("b", "6"),
            add("c", "7"),
            Item::Event(WatchEvent::Deleted(cm("a", "8"))),
            Item::Event(initial_events_end("9")),
            Item::Hang,
        ])],
        2,
        &["old", "b"],
    );
    let probe = lw.clone();
    bump.until("the stream hangs after its end", move || probe.hung() == 1)
        .await;
    assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("9"));
    use crate::delta_fifo::DeltaType::{Deleted, Replaced};
    assert_eq!(
        drain(&fifo),
        [
            ("ns/a".to_owned(), vec![Replaced, Deleted]),
            ("ns/b".to_owned(), vec![Replaced]),
            ("ns/c".to_owned(), vec![Replaced]),
            ("ns/old".to_owned(), vec![Deleted]),
        ],
        "listed objects replaced, the deleted one deleted, a tombstone for the known one no event listed"
    );
    assert!(fifo.has_synced());
    cancel.cancel();
}
