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
/// `give_up` to unwind). `leading` is this replica's leadership while it
/// leads (`None` without leader election or when it does not lead): if it
/// turns `false` first, every task is aborted at once and the loss is
/// reported.
pub(super) async fn drain_leader_tasks(
    tasks: &mut Tasks,
    deadline: Instant,
    give_up: Instant,
    leading: Option<&mut watch::Receiver<bool>>,
) -> Drained {
    let Some(leading) = leading.filter(|rx| *rx.borrow()) else {
        return Drained {
            unfinished: tasks.drain(deadline, give_up).await,
            lost: None,
        };
    };
    tokio::select! {
        unfinished = tasks.drain(deadline, give_up) => return Drained { unfinished, lost: None },
        // A closed channel means the elector is gone: it no longer renews.
        _ = leading.wait_for(|l| !*l) => {}
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
