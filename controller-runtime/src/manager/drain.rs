//! The graceful drain of leader-only work on shutdown, with leadership
//! still watched.
//!
//! After the manager's main loop ends, controllers get up to the
//! graceful-shutdown timeout to finish their in-flight reconciles. That
//! timeout (30 s by default) is longer than a lease (15 s), so the lease can
//! be lost while draining. A replica that stopped leading must not go on
//! writing as if it led: the moment the elector reports the loss, every
//! leader-only task is aborted (in-flight reconciles are dropped at their
//! next await) and the drain reports the loss, so that `run` returns
//! [`ManagerError::LeadershipLost`](super::ManagerError::LeadershipLost)
//! instead of success.
//!
//! Which error a stop reports when the lease expires during it is decided
//! here, whatever the order of the two events:
//!
//! - leadership lost at or before the moment the drain begins, or while
//!   leader-only work is still draining: the work is aborted at once and
//!   the stop reports `LeadershipLost` (also when some runnable overran
//!   the graceful timeout: the loss is the graver fact);
//! - leadership lost after the leader-only work has ended (while other
//!   runnables drain, or while the lease is released): nothing ran as a
//!   leader after the loss, so the stop reports what it would have
//!   otherwise, `Ok` or `ShutdownTimeout`, and the loss is only logged.

use tokio::sync::watch;
use tokio::time::Instant;

use super::tasks::Tasks;

/// How the drain of leader-only work ended.
pub(super) struct Drained {
    /// Runnables that did not stop before the deadline and were aborted.
    pub unfinished: Vec<String>,
    /// Why leadership was lost during the drain, if it was.
    pub lost: Option<String>,
}

/// Waits until `deadline` for `tasks` to finish (aborted ones get until
/// `give_up` to unwind). `leading` is this replica's leadership when it
/// started leader-only work (`None` without leader election or when it
/// never led): if it reads `false` before the tasks have ended (already
/// when the drain begins included), every task is aborted at once and the
/// loss is reported.
pub(super) async fn drain_leader_tasks(
    tasks: &mut Tasks,
    deadline: Instant,
    give_up: Instant,
    leading: Option<&mut watch::Receiver<bool>>,
) -> Drained {
    let Some(leading) = leading else {
        return Drained {
            unfinished: tasks.drain(deadline, give_up).await,
            lost: None,
        };
    };
    tokio::select! {
        // The loss first: when both are ready, the loss decides.
        biased;
        // A closed channel means the elector is gone: it no longer renews.
        _ = leading.wait_for(|l| !*l) => {}
        unfinished = tasks.drain(deadline, give_up) => return Drained { unfinished, lost: None },
    }
    tracing::error!("lost the lease while draining for shutdown; aborting leader-only work");
    tasks.abort_all();
    // Aborted tasks end at their next await; wait for that so nothing of
    // theirs runs after `run` returns.
    let _ = tasks.drain(Instant::now(), give_up).await;
    Drained {
        unfinished: Vec::new(),
        lost: Some("this replica stopped leading while draining for shutdown".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::manager::{Runnable, runnable_fn};

    const GRACE: Duration = Duration::from_secs(10);
    const CLEANUP: Duration = Duration::from_secs(5);

    /// A leader-only task that ignores its stop.
    fn stubborn() -> (Tasks, CancellationToken) {
        let stop = CancellationToken::new();
        let r: Arc<dyn Runnable> = Arc::new(runnable_fn("stubborn", true, |_stop| {
            std::future::pending::<Result<(), crate::error::BoxError>>()
        }));
        (Tasks::spawn_all(&[r], &stop), stop)
    }

    fn bounds() -> (Instant, Instant) {
        let deadline = Instant::now() + GRACE;
        (deadline, deadline + CLEANUP)
    }

    /// Order 1: the lease expires while leader-only work still drains.
    #[tokio::test(start_paused = true)]
    async fn a_loss_before_the_grace_expires_aborts_and_is_reported() {
        let (mut tasks, _stop) = stubborn();
        let (tx, mut rx) = watch::channel(true);
        let (deadline, give_up) = bounds();
        tokio::spawn(async move {
            tokio::time::sleep(GRACE / 2).await;
            let _ = tx.send(false);
            // Held open: a closed channel would count as a loss too.
            std::future::pending::<()>().await;
        });
        let started = Instant::now();
        let drained = drain_leader_tasks(&mut tasks, deadline, give_up, Some(&mut rx)).await;
        assert!(drained.lost.is_some());
        assert!(drained.unfinished.is_empty(), "{:?}", drained.unfinished);
        assert_eq!(started.elapsed(), GRACE / 2, "aborted at the loss");
    }

    /// Order 2: the grace expires first, the lease only later: the overrun
    /// is reported (as `ShutdownTimeout` by the manager), not a loss.
    #[tokio::test(start_paused = true)]
    async fn a_loss_after_the_grace_expired_is_not_reported() {
        let (mut tasks, _stop) = stubborn();
        let (tx, mut rx) = watch::channel(true);
        let (deadline, give_up) = bounds();
        tokio::spawn(async move {
            tokio::time::sleep(GRACE * 2).await;
            let _ = tx.send(false);
            std::future::pending::<()>().await;
        });
        let drained = drain_leader_tasks(&mut tasks, deadline, give_up, Some(&mut rx)).await;
        assert_eq!(drained.lost, None);
        assert_eq!(drained.unfinished, vec!["stubborn".to_string()]);
    }

    /// Leadership already lost when the drain begins (lost in the same
    /// instant as the stop was asked for): reported, even when there is
    /// no leader-only work left to abort.
    #[tokio::test(start_paused = true)]
    async fn a_loss_before_the_drain_begins_is_reported_even_without_work() {
        for with_work in [true, false] {
            let (mut tasks, _stop) = if with_work {
                stubborn()
            } else {
                (Tasks::default(), CancellationToken::new())
            };
            let (_tx, mut rx) = watch::channel(false);
            let (deadline, give_up) = bounds();
            let drained = drain_leader_tasks(&mut tasks, deadline, give_up, Some(&mut rx)).await;
            assert!(drained.lost.is_some(), "with work: {with_work}");
            assert!(drained.unfinished.is_empty());
        }
    }

    /// Without leader election the drain only waits for the work.
    #[tokio::test(start_paused = true)]
    async fn without_leadership_the_drain_waits_out_the_grace() {
        let (mut tasks, _stop) = stubborn();
        let (deadline, give_up) = bounds();
        let drained = drain_leader_tasks(&mut tasks, deadline, give_up, None).await;
        assert_eq!(drained.lost, None);
        assert_eq!(drained.unfinished, vec!["stubborn".to_string()]);
    }
}
