//! Property: random interleavings of create/update/patch/delete, compaction
//! and dropped watches, with concurrent watchers that start from random
//! resource versions and resume like a reflector. Every watcher sees exactly
//! the writes after its starting point, in order, none missed or repeated,
//! or a clean 410 (only when that history really is gone), and every
//! watcher's reconstructed state equals a fresh LIST.

use crate::cm;
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const WINDOW: usize = 12;

#[derive(Debug, Clone)]
enum Op {
    Create(usize, u8),
    Update(usize, u8),
    Patch(usize, u8),
    Delete(usize),
    Compact,
    DropWatches,
    /// Start a watcher from a recorded revision (index, modulo), or from "0".
    Watch(Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..NAMES.len(), 0u8..3).prop_map(|(n, v)| Op::Create(n, v)),
        3 => (0..NAMES.len(), 0u8..3).prop_map(|(n, v)| Op::Update(n, v)),
        3 => (0..NAMES.len(), 0u8..3).prop_map(|(n, v)| Op::Patch(n, v)),
        2 => (0..NAMES.len()).prop_map(Op::Delete),
        1 => Just(Op::Compact),
        1 => Just(Op::DropWatches),
        3 => proptest::option::weighted(0.8, 0usize..64).prop_map(Op::Watch),
    ]
}

/// One write as the test observed it: (revision, name, type, data value).
type Write = (u64, String, &'static str, Option<String>);
type State = BTreeMap<String, String>;

fn data(c: &ConfigMap) -> Option<String> {
    c.data.as_ref().and_then(|d| d.get("v").cloned())
}

fn rv(c: &ConfigMap) -> u64 {
    c.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// How one watch connection started and what it delivered.
#[derive(Debug)]
enum Segment {
    /// Watched from a revision: the events received, and whether it ended with 410.
    FromRv { events: Vec<Write>, expired: bool },
    /// A streaming list: the initial state up to the initial-events-end
    /// bookmark at `at`, then live events.
    Stream {
        initial: State,
        at: u64,
        events: Vec<Write>,
    },
    /// A relist after 410: the list's revision and state.
    Relist { rev: u64, state: State },
}

/// Apply one event to a reconstructed state, rejecting repeats and gaps.
fn apply(
    state: &mut State,
    kind: &str,
    name: &str,
    d: Option<String>,
    r: u64,
) -> Result<(), String> {
    match kind {
        "ADDED" if state.contains_key(name) => Err(format!(
            "ADDED {name} at {r} but it is already known (repeat)"
        )),
        "MODIFIED" | "DELETED" if !state.contains_key(name) => Err(format!(
            "{kind} {name} at {r} for an unknown object (missed ADDED)"
        )),
        "DELETED" => {
            state.remove(name);
            Ok(())
        }
        _ => {
            state.insert(name.to_string(), d.unwrap_or_default());
            Ok(())
        }
    }
}

/// A reflector-like consumer: a streaming list (start None) or a watch from
/// an RV; resumes from its last RV when the stream ends, relists on 410,
/// until it has reached `target`.
async fn watcher(
    api: Api<ConfigMap>,
    start: Option<u64>,
    known: State,
    mut target: watch::Receiver<Option<u64>>,
) -> Result<(State, Vec<Segment>), String> {
    // A watch from RV X continues from the state at X (what a LIST at X gave).
    let mut state = known;
    let mut segments = Vec::new();
    let mut last = start.unwrap_or(0);
    let mut streaming = start.is_none();
    let reached = |t: &watch::Receiver<Option<u64>>, last: u64, streaming: bool| {
        !streaming && t.borrow().is_some_and(|t| last >= t)
    };
    loop {
        if reached(&target, last, streaming) {
            return Ok((state, segments));
        }
        let (wp, at) = if streaming {
            state.clear();
            (
                WatchParams::default().initial_events().timeout(30),
                String::new(),
            )
        } else {
            (
                WatchParams::default().disable_bookmarks().timeout(30),
                last.to_string(),
            )
        };
        let mut stream = api
            .watch(&wp, &at)
            .await
            .map_err(|e| format!("watch: {e}"))?
            .boxed();
        let mut events = Vec::new();
        let mut expired = false;
        let mut initial_end: Option<u64> = None;
        let mut initial = State::new();
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                _ = target.changed() => {
                    if reached(&target, last, streaming && initial_end.is_none()) { break; }
                    continue;
                }
            };
            let Some(ev) = next else { break };
            let ev = ev.map_err(|e| format!("watch stream error: {e}"))?;
            let (kind, obj) = match ev {
                WatchEvent::Added(o) => ("ADDED", o),
                WatchEvent::Modified(o) => ("MODIFIED", o),
                WatchEvent::Deleted(o) => ("DELETED", o),
                WatchEvent::Bookmark(b) => {
                    let r: u64 = b
                        .metadata
                        .resource_version
                        .parse()
                        .map_err(|_| "bad bookmark RV".to_string())?;
                    if !streaming {
                        return Err("bookmark without allowWatchBookmarks".into());
                    }
                    if b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .is_some_and(|v| v == "true")
                    {
                        initial_end = Some(r);
                        initial = state.clone();
                    }
                    last = last.max(r);
                    if initial_end.is_some() && reached(&target, last, false) {
                        break;
                    }
                    continue;
                }
                WatchEvent::Error(e) if e.code == 410 && e.reason == "Expired" => {
                    expired = true;
                    break;
                }
                WatchEvent::Error(e) => return Err(format!("unexpected watch error {e:?}")),
            };
            let name = obj.metadata.name.clone().unwrap_or_default();
            let r = rv(&obj);
            let synthetic = streaming && initial_end.is_none();
            if !synthetic && r <= last {
                return Err(format!(
                    "event {kind} {name} at {r} is not after {last}: repeated or out of order"
                ));
            }
            apply(&mut state, kind, &name, data(&obj), r)?;
            if !synthetic {
                last = r;
                events.push((r, name, kind, data(&obj)));
                if reached(&target, last, false) {
                    break;
                }
            }
        }
        if streaming {
            match initial_end {
                Some(at) => {
                    segments.push(Segment::Stream {
                        initial,
                        at,
                        events,
                    });
                    streaming = false;
                }
                // Dropped before the initial state was complete: start over.
                None => continue,
            }
        } else {
            segments.push(Segment::FromRv { events, expired });
        }
        if expired {
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("relist: {e}"))?;
            let rev: u64 = list
                .metadata
                .resource_version
                .as_deref()
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            state = list
                .items
                .iter()
                .map(|c| {
                    (
                        c.metadata.name.clone().unwrap_or_default(),
                        data(c).unwrap_or_default(),
                    )
                })
                .collect();
            last = rev;
            segments.push(Segment::Relist {
                rev,
                state: state.clone(),
            });
        }
    }
}

fn state_at(writes: &[Write], rev: u64) -> State {
    let mut s = State::new();
    for (_, name, kind, d) in writes.iter().filter(|w| w.0 <= rev) {
        if *kind == "DELETED" {
            s.remove(name);
        } else {
            s.insert(name.clone(), d.clone().unwrap_or_default());
        }
    }
    s
}

async fn run_case(ops: Vec<Op>) -> Result<(), String> {
    let env = TestEnv::builder()
        .history_window(WINDOW)
        .start()
        .await
        .map_err(|e| e.to_string())?;
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let (target_tx, target_rx) = watch::channel(None);
    let mut writes: Vec<Write> = Vec::new();
    let mut compactions: Vec<u64> = Vec::new();
    let mut revisions: Vec<u64> = vec![env.current_revision()];
    let mut watchers = Vec::new();
    let pp = PatchParams::default();
    for op in ops {
        let result = match &op {
            Op::Create(n, v) => api
                .create(&PostParams::default(), &cm(NAMES[*n], &[], &v.to_string()))
                .await
                .map(|c| Some(("ADDED", c))),
            Op::Update(n, v) => match api.get_opt(NAMES[*n]).await {
                Ok(Some(mut c)) => {
                    let before = rv(&c);
                    c.data = Some([("v".to_string(), v.to_string())].into());
                    api.replace(NAMES[*n], &PostParams::default(), &c)
                        .await
                        .map(|c| (rv(&c) != before).then_some(("MODIFIED", c)))
                }
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            },
            Op::Patch(n, v) => {
                let before = api.get_opt(NAMES[*n]).await.ok().flatten().map(|c| rv(&c));
                api.patch(
                    NAMES[*n],
                    &pp,
                    &Patch::Merge(serde_json::json!({"data": {"v": v.to_string()}})),
                )
                .await
                .map(|c| (Some(rv(&c)) != before).then_some(("MODIFIED", c)))
            }
            Op::Delete(n) => api
                .delete(NAMES[*n], &Default::default())
                .await
                .map(|e| e.left().map(|c| ("DELETED", c))),
            Op::Compact => {
                env.faults().compact();
                compactions.push(env.current_revision());
                Ok(None)
            }
            Op::DropWatches => {
                env.faults().drop_watches();
                Ok(None)
            }
            Op::Watch(choice) => {
                let start = choice.map(|i| revisions[i % revisions.len()]);
                let known = start.map(|x| state_at(&writes, x)).unwrap_or_default();
                watchers.push((
                    start,
                    tokio::spawn(watcher(api.clone(), start, known, target_rx.clone())),
                ));
                Ok(None)
            }
        };
        match result {
            Ok(Some((kind, c))) => {
                writes.push((
                    rv(&c),
                    c.metadata.name.clone().unwrap_or_default(),
                    kind,
                    data(&c),
                ));
                revisions.push(rv(&c));
            }
            Ok(None) => {}
            Err(kube_client::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(format!("{op:?} failed: {e}")),
        }
    }
    let final_rev = env.current_revision();
    target_tx.send_replace(Some(writes.last().map_or(0, |w| w.0)));
    let fresh: State = api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                data(c).unwrap_or_default(),
            )
        })
        .collect();
    if fresh != state_at(&writes, final_rev) {
        return Err(format!(
            "LIST {fresh:?} disagrees with the writes {writes:?}"
        ));
    }
    for (start, handle) in watchers {
        let (state, segments) = tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .map_err(|_| format!("watcher from {start:?} did not catch up"))?
            .map_err(|e| e.to_string())??;
        if state != fresh {
            return Err(format!(
                "watcher from {start:?} reconstructed {state:?}, LIST says {fresh:?}; segments {segments:?}"
            ));
        }
        check_segments(start, &segments, &writes, &compactions)?;
    }
    Ok(())
}

fn expect_prefix(x: u64, events: &[Write], writes: &[Write]) -> Result<(), String> {
    let expected: Vec<&Write> = writes
        .iter()
        .filter(|w| w.0 > x)
        .take(events.len())
        .collect();
    let got: Vec<&Write> = events.iter().collect();
    if got != expected {
        return Err(format!(
            "watch from {x} delivered {got:?}, expected {expected:?}"
        ));
    }
    Ok(())
}

/// Each segment from RV X delivered exactly the writes after X, in order
/// (a prefix of them), and a 410 only when that history really was gone.
fn check_segments(
    start: Option<u64>,
    segments: &[Segment],
    writes: &[Write],
    compactions: &[u64],
) -> Result<(), String> {
    let mut from = start.unwrap_or(0);
    for seg in segments {
        match seg {
            Segment::Stream {
                initial,
                at,
                events,
            } => {
                if *initial != state_at(writes, *at) {
                    return Err(format!(
                        "initial events at {at} gave {initial:?}, expected {:?}",
                        state_at(writes, *at)
                    ));
                }
                expect_prefix(*at, events, writes)?;
                from = events.last().map_or(*at, |e| e.0);
            }
            Segment::FromRv { events, expired } => {
                expect_prefix(from, events, writes)?;
                if *expired {
                    let after = writes.iter().filter(|w| w.0 > from).count();
                    let legit = compactions.iter().any(|c| *c > from) || after > WINDOW;
                    if !legit {
                        return Err(format!(
                            "410 for RV {from} although its history was retained"
                        ));
                    }
                }
                from = events.last().map_or(from, |e| e.0);
            }
            Segment::Relist { rev, state } => {
                if *state != state_at(writes, *rev) {
                    return Err(format!("relist at {rev} gave {state:?}"));
                }
                from = *rev;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn watchers_reconstruct_exactly_what_list_returns(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let outcome = rt.block_on(run_case(ops));
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
    }
}
