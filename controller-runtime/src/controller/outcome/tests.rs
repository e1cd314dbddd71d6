use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::terminal::{TerminalError, is_terminal};

#[derive(Debug, thiserror::Error)]
enum MyError {
    #[error("flaky")]
    Flaky,
    #[error("bad spec")]
    BadSpec(#[source] TerminalError),
}

impl Terminal for MyError {}

/// A reconciler error that wraps with `#[error(transparent)]`, twice.
#[derive(Debug, thiserror::Error)]
enum Outer {
    #[error(transparent)]
    Inner(#[from] InnerError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Terminal for Outer {}

#[derive(Debug, thiserror::Error)]
enum InnerError {
    #[error(transparent)]
    Invalid(#[from] TerminalError),
}

/// Decides by variant, without any TerminalError inside.
#[derive(Debug, thiserror::Error)]
enum ByVariant {
    #[error("spec.size {0} is too large")]
    TooLarge(u32),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Terminal for ByVariant {
    fn is_terminal(&self) -> bool {
        matches!(self, ByVariant::TooLarge(_))
    }
}

struct Fails<E>(fn() -> E);

impl<E: Terminal> Reconciler for Fails<E> {
    type Error = E;
    async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, E> {
        Err((self.0)())
    }
}

async fn outcome_of<E: Terminal>(make: fn() -> E) -> ReconcileOutcome {
    run_reconcile(
        &Fails(make),
        Request::new(Some("ns"), "x"),
        CallInfo::new("c", 1),
        None,
    )
    .await
}

#[tokio::test]
async fn terminal_error_survives_transparent_wrappers() {
    let make = || Outer::from(InnerError::from(TerminalError::new("replicas < 0")));
    let wrapped = make();
    assert!(wrapped.is_terminal());
    assert!(is_terminal(&wrapped));
    assert_eq!(wrapped.to_string(), "terminal error: replicas < 0");
    let out = outcome_of(make).await;
    assert!(out.is_terminal(), "{out:?}");
    assert_eq!(out.queue_actions(), vec![QueueAction::Forget]);
}

#[tokio::test]
async fn transparent_wrapper_of_an_ordinary_error_is_retried() {
    let out = outcome_of(|| Outer::from(std::io::Error::other("timeout"))).await;
    assert!(!out.is_terminal() && out.is_error(), "{out:?}");
    assert_eq!(out.queue_actions(), vec![QueueAction::AddRateLimited]);
}

#[tokio::test]
async fn the_error_type_decides_by_variant() {
    let out = outcome_of(|| ByVariant::TooLarge(9)).await;
    assert!(out.is_terminal(), "{out:?}");
    let out = outcome_of(|| ByVariant::from(std::io::Error::other("timeout"))).await;
    assert!(!out.is_terminal(), "{out:?}");
}

struct Scripted {
    calls: AtomicUsize,
    mode: &'static str,
}

impl Reconciler for Scripted {
    type Error = MyError;
    async fn reconcile(&self, _req: Request, ctx: CallInfo) -> Result<Action, MyError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        assert_eq!(&*ctx.controller, "test");
        match self.mode {
            "done" => Ok(Action::done()),
            "requeue" => Ok(Action::requeue_rate_limited()),
            "after" => Ok(Action::requeue_after(Duration::from_secs(7))),
            "after-and-requeue" => Ok(Action {
                requeue_after: Some(Duration::ZERO),
                requeue: true,
            }),
            "error" => Err(MyError::Flaky),
            "terminal" => Err(MyError::BadSpec(TerminalError::new("replicas < 0"))),
            "panic" => panic!("reconciler bug"),
            "panic-string" => panic!("bug in {}", "object"),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(Action::done())
            }
            other => unreachable!("{other}"),
        }
    }
}

async fn outcome(mode: &'static str, timeout: Option<Duration>) -> ReconcileOutcome {
    let r = Scripted {
        calls: AtomicUsize::new(0),
        mode,
    };
    let out = run_reconcile(
        &r,
        Request::new(Some("ns"), "a"),
        CallInfo::new("test", 1),
        timeout,
    )
    .await;
    assert_eq!(r.calls.load(Ordering::SeqCst), 1);
    out
}

#[tokio::test(start_paused = true)]
async fn outcomes_map_to_queue_actions_per_spec() {
    use QueueAction::*;
    let d7 = Duration::from_secs(7);
    let cases: Vec<(&str, Vec<QueueAction>, &str)> = vec![
        ("done", vec![Forget], "success"),
        ("requeue", vec![AddRateLimited], "requeue"),
        ("after", vec![Forget, AddAfter(d7)], "requeue_after"),
        ("error", vec![AddRateLimited], "error"),
        ("terminal", vec![Forget], "error"),
        ("panic", vec![AddRateLimited], "error"),
    ];
    for (mode, actions, label) in cases {
        let out = outcome(mode, None).await;
        assert_eq!(out.queue_actions(), actions, "{mode}");
        assert_eq!(out.result_label(), label, "{mode}");
    }
}

#[tokio::test(start_paused = true)]
async fn terminal_error_is_found_in_source_chain_and_not_requeued() {
    let out = outcome("terminal", None).await;
    assert!(out.is_terminal() && out.is_error());
    assert!(!out.queue_actions().contains(&QueueAction::AddRateLimited));
    let out = outcome("error", None).await;
    assert!(!out.is_terminal() && out.is_error());
}

#[tokio::test(start_paused = true)]
async fn panics_are_caught_counted_and_keep_their_message() {
    match outcome("panic", None).await {
        ReconcileOutcome::Panic(msg) => assert_eq!(msg, "reconciler bug"),
        other => panic!("expected panic outcome, got {other:?}"),
    }
    match outcome("panic-string", None).await {
        ReconcileOutcome::Panic(msg) => assert_eq!(msg, "bug in object"),
        other => panic!("expected panic outcome, got {other:?}"),
    }
    let out = outcome("panic", None).await;
    assert!(out.is_panic() && out.is_error());
}

#[tokio::test(start_paused = true)]
async fn timeout_drops_a_slow_reconcile_and_retries_it() {
    let start = tokio::time::Instant::now();
    let out = outcome("slow", Some(Duration::from_secs(10))).await;
    assert!(matches!(out, ReconcileOutcome::Timeout(d) if d == Duration::from_secs(10)));
    assert_eq!(start.elapsed(), Duration::from_secs(10));
    assert_eq!(out.queue_actions(), vec![QueueAction::AddRateLimited]);
    // Without a timeout a fast reconcile is unaffected.
    assert!(matches!(
        outcome("done", Some(Duration::from_secs(1))).await,
        ReconcileOutcome::Success
    ));
}

#[tokio::test]
async fn requeue_after_wins_over_requeue_flag() {
    let out = outcome("after-and-requeue", None).await;
    assert!(matches!(out, ReconcileOutcome::RequeueAfter(d) if d.is_zero()));
    assert_eq!(Action::done(), Action::default());
}

#[tokio::test]
async fn arc_reconciler_delegates() {
    let r = Arc::new(Scripted {
        calls: AtomicUsize::new(0),
        mode: "error",
    });
    let out = run_reconcile(
        &r,
        Request::new(None::<String>, "a"),
        CallInfo::new("test", 2).with_retries(3),
        None,
    )
    .await;
    assert!(matches!(out, ReconcileOutcome::Error(e) if e.to_string() == "flaky"));
}

#[tokio::test(start_paused = true)]
async fn erased_reconciler_keeps_terminal_and_timeout_classification() {
    let terminal: Arc<dyn DynReconciler> = Arc::new(Scripted {
        calls: AtomicUsize::new(0),
        mode: "terminal",
    });
    let out = terminal
        .run(
            Request::new(None::<String>, "a"),
            CallInfo::new("test", 1),
            None,
        )
        .await;
    assert!(out.is_terminal());
    let slow: Arc<dyn DynReconciler> = Arc::new(Scripted {
        calls: AtomicUsize::new(0),
        mode: "slow",
    });
    let out = slow
        .run(
            Request::new(None::<String>, "a"),
            CallInfo::new("test", 1),
            Some(Duration::from_secs(1)),
        )
        .await;
    assert!(matches!(out, ReconcileOutcome::Timeout(_)));
}

mod classification;
