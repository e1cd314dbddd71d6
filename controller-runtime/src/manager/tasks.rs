//! The manager's task bookkeeping: runnables running as named tasks, and
//! the wait for a shutdown signal.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ManagerError, Runnable};
use crate::error::BoxError;

/// Runnable tasks with their names, so that a timeout can say which did
/// not finish.
#[derive(Default)]
pub(super) struct Tasks {
    set: JoinSet<Result<(), BoxError>>,
    names: HashMap<tokio::task::Id, String>,
}

impl Tasks {
    pub(super) fn spawn_all(runnables: &[Arc<dyn Runnable>], stop: &CancellationToken) -> Self {
        let mut tasks = Tasks::default();
        for runnable in runnables {
            tasks.spawn(runnable, stop);
        }
        tasks
    }

    /// Starts `runnable` as one more task, stopped by a child of `stop`.
    pub(super) fn spawn(&mut self, runnable: &Arc<dyn Runnable>, stop: &CancellationToken) {
        let name = runnable.name();
        tracing::debug!(runnable = %name, "starting runnable");
        let handle = self
            .set
            .spawn(Arc::clone(runnable).start(stop.child_token()));
        self.names.insert(handle.id(), name);
    }

    /// The next task to end: `None` when none is left, else its failure if
    /// it failed.
    pub(super) async fn next_failure(&mut self) -> Option<Option<ManagerError>> {
        let joined = self.set.join_next_with_id().await?;
        Some(match joined {
            Ok((id, Ok(()))) => {
                let name = self.names.remove(&id).unwrap_or_default();
                tracing::debug!(runnable = %name, "runnable finished");
                None
            }
            Ok((id, Err(source))) => Some(ManagerError::Runnable {
                name: self.names.remove(&id).unwrap_or_default(),
                source,
            }),
            Err(join_error) => {
                let name = self.names.remove(&join_error.id()).unwrap_or_default();
                if join_error.is_cancelled() {
                    None
                } else {
                    Some(ManagerError::Runnable {
                        name,
                        source: Box::new(join_error),
                    })
                }
            }
        })
    }

    pub(super) fn abort_all(&mut self) {
        self.set.abort_all();
    }

    /// Waits for every task until `deadline`; aborts the rest and returns
    /// their names. Aborted tasks end at their next await; one that blocks
    /// its thread is waited for until `give_up` at most, then left behind.
    pub(super) async fn drain(&mut self, deadline: Instant, give_up: Instant) -> Vec<String> {
        loop {
            match tokio::time::timeout_at(deadline, self.next_failure()).await {
                Ok(None) => return Vec::new(),
                Ok(Some(Some(error))) => tracing::warn!(%error, "runnable failed while stopping"),
                Ok(Some(None)) => {}
                Err(_) => {
                    let mut left: Vec<String> = self.names.drain().map(|(_, n)| n).collect();
                    left.sort();
                    self.set.abort_all();
                    let unwound = async { while self.set.join_next().await.is_some() {} };
                    if tokio::time::timeout_at(give_up, unwound).await.is_err() {
                        tracing::warn!(runnables = ?left, "aborted runnables did not unwind in time");
                    }
                    return left;
                }
            }
        }
    }
}

pub(super) async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the manager");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
