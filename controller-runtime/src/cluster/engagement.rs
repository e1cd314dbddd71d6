//! One engaged cluster's task while the manager runs: reach it (retrying
//! with jittered backoff), run the engage hooks, attach it (start its
//! informers, let fleet controllers in), then keep looking at it and report its health:
//! `Ready` only while it answers, its informers have synced and none of
//! them is forbidden to list.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Cluster;
use super::fleet::Fleet;
use super::health::ClusterHealth;
use super::hooks::run_hooks;
use super::permissions::ListAccess;

/// How long a disengaged cluster's informers and event writer get to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What one look at the cluster found.
#[derive(Debug, PartialEq)]
pub(super) enum Look {
    /// It answered, its informers synced and none is forbidden.
    Ready,
    /// It answered; these informers have not synced yet.
    Syncing(Vec<String>),
    /// No answer, an error, a forbidden list or a failed hook.
    Down(String),
}

/// What the task remembers between looks, and what it makes of each.
pub(super) struct Verdicts {
    /// The wait after the next failure (before jitter).
    delay: Duration,
    /// When the informers were first seen unsynced, in the current run of
    /// unsynced looks.
    syncing_since: Option<Instant>,
    /// Looks failed in a row.
    failures: u64,
}

impl Verdicts {
    pub(super) fn new(initial: Duration) -> Self {
        Verdicts {
            delay: initial,
            syncing_since: None,
            failures: 0,
        }
    }

    /// The health `look` means at `now` and how long to wait (before
    /// jitter) for the next look. Informers still syncing keep the cluster
    /// `Pending` (looked at again soon) until `sync_timeout` has passed
    /// since they were first seen unsynced; then each look is a failure.
    pub(super) fn judge(
        &mut self,
        look: Look,
        now: Instant,
        fleet: &super::EngageBackoff,
        sync_timeout: Duration,
    ) -> (ClusterHealth, Duration) {
        let error = match look {
            Look::Ready => {
                self.delay = fleet.initial;
                self.syncing_since = None;
                self.failures = 0;
                return (ClusterHealth::Ready, fleet.probe_interval);
            }
            Look::Syncing(unsynced) => {
                let since = *self.syncing_since.get_or_insert(now);
                if now.saturating_duration_since(since) < sync_timeout {
                    self.failures = 0;
                    return (
                        ClusterHealth::Pending,
                        fleet.initial.min(fleet.probe_interval),
                    );
                }
                format!(
                    "informers not synced within {sync_timeout:?}: {}",
                    unsynced.join(", ")
                )
            }
            Look::Down(error) => {
                self.syncing_since = None;
                error
            }
        };
        self.failures += 1;
        let wait = self.delay;
        self.delay = fleet.next(self.delay);
        (
            ClusterHealth::Failing {
                failures: self.failures,
                error,
            },
            wait,
        )
    }
}

impl Fleet {
    /// Starts the engagement task of `cluster` (its list access seen
    /// through `access`), until `stop`.
    pub(super) fn spawn_engagement(
        &self,
        cluster: Cluster,
        access: Arc<ListAccess>,
        stop: CancellationToken,
    ) -> JoinHandle<()> {
        let run = Engaged {
            cluster,
            access,
            stop,
            fleet: self.clone(),
        };
        tokio::spawn(run.run())
    }
}

/// One running engagement.
struct Engaged {
    cluster: Cluster,
    access: Arc<ListAccess>,
    stop: CancellationToken,
    fleet: Fleet,
}

impl Engaged {
    async fn run(self) {
        let name = self.cluster.name().to_string();
        let writer = self
            .cluster
            .take_event_writer()
            .map(|w| tokio::spawn(w.run(self.stop.clone())));
        let backoff = self.fleet.backoff();
        let sync_timeout = self.fleet.sync_timeout();
        let metrics = self.fleet.metrics();
        let mut verdicts = Verdicts::new(backoff.initial);
        let mut attached = false;
        loop {
            let look = tokio::select! {
                () = self.stop.cancelled() => break,
                look = self.look(&mut attached) => look,
            };
            let (health, wait) = verdicts.judge(look, Instant::now(), &backoff, sync_timeout);
            match &health {
                ClusterHealth::Ready => metrics.answered(&name),
                ClusterHealth::Pending => {}
                ClusterHealth::Failing { failures, error } => {
                    metrics.failed(&name);
                    tracing::warn!(cluster = %name, %error, failures, retry_in = ?wait, "cluster not ready");
                }
            }
            self.cluster.set_health(health);
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep(backoff.spread(wait)) => {}
            }
        }
        let give_up = Instant::now() + STOP_TIMEOUT;
        if !self.cluster.stop_informers(give_up).await {
            tracing::warn!(cluster = %name, "informers did not stop in time");
        }
        if let Some(writer) = writer
            && tokio::time::timeout_at(give_up, writer).await.is_err()
        {
            tracing::warn!(cluster = %name, "event writer did not stop in time");
        }
    }

    /// Asks the API server for its version; once it answers, runs the
    /// engage hooks and attaches the cluster (the first time), then sees whether its informers may list
    /// and have synced.
    async fn look(&self, attached: &mut bool) -> Look {
        let backoff = self.fleet.backoff();
        let client = self.cluster.client();
        match tokio::time::timeout(backoff.probe_timeout, client.apiserver_version()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => return Look::Down(error.to_string()),
            Err(_) => return Look::Down(format!("no answer within {:?}", backoff.probe_timeout)),
        }
        if !*attached {
            // The hooks run again at each look until they all succeed.
            if let Err(error) = run_hooks(&self.fleet.hooks(), &self.cluster).await {
                return Look::Down(error);
            }
            if !self.attach() {
                // Disengaged meanwhile: the stop token ends the task.
                return Look::Down("disengaged".to_string());
            }
            *attached = true;
            tracing::info!(cluster = %self.cluster.name(), "cluster reached; informers started");
            // Fleet controllers start their watches as it attaches: not
            // ready before a look that sees their informers.
            return Look::Syncing(self.cluster.unsynced());
        }
        let forbidden = self.access.forbidden();
        if !forbidden.is_empty() {
            return Look::Down(format!("forbidden (403) to list: {}", forbidden.join(", ")));
        }
        let unsynced = self.cluster.unsynced();
        if unsynced.is_empty() {
            Look::Ready
        } else {
            Look::Syncing(unsynced)
        }
    }

    /// Starts the informers and lets fleet controllers in, unless the
    /// cluster was disengaged meanwhile; `false` then.
    fn attach(&self) -> bool {
        self.fleet.attach(&self.cluster, &self.stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::EngageBackoff;

    fn backoff() -> EngageBackoff {
        EngageBackoff::default()
            .initial(Duration::from_millis(100))
            .max(Duration::from_millis(400))
            .probe_interval(Duration::from_secs(10))
    }

    fn failures(health: &ClusterHealth) -> u64 {
        match health {
            ClusterHealth::Failing { failures, .. } => *failures,
            _ => 0,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ready_needs_synced_informers_and_unsynced_ones_fail_after_the_timeout() {
        let b = backoff();
        let timeout = Duration::from_secs(2);
        let mut v = Verdicts::new(b.initial);
        let start = Instant::now();
        let syncing = || Look::Syncing(vec!["pods".into()]);

        let (health, wait) = v.judge(syncing(), start, &b, timeout);
        assert_eq!(health, ClusterHealth::Pending, "answers, not synced");
        assert_eq!(wait, b.initial, "looked at again soon while syncing");
        let (health, _) = v.judge(syncing(), start + Duration::from_millis(1999), &b, timeout);
        assert_eq!(health, ClusterHealth::Pending);
        let (health, wait) = v.judge(syncing(), start + timeout, &b, timeout);
        assert_eq!(failures(&health), 1, "{health:?}");
        assert!(matches!(&health, ClusterHealth::Failing { error, .. } if error.contains("pods")));
        assert_eq!(wait, b.initial);
        let (health, wait) = v.judge(syncing(), start + timeout * 2, &b, timeout);
        assert_eq!((failures(&health), wait), (2, b.initial * 2), "backs off");

        let (health, wait) = v.judge(Look::Ready, start + timeout * 3, &b, timeout);
        assert_eq!((health, wait), (ClusterHealth::Ready, b.probe_interval));
        // A new run of unsynced looks starts its own clock.
        let later = start + timeout * 10;
        let (health, _) = v.judge(syncing(), later, &b, timeout);
        assert_eq!(health, ClusterHealth::Pending);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_and_a_ready_look_resets() {
        let b = backoff();
        let mut v = Verdicts::new(b.initial);
        let now = Instant::now();
        let mut waits = Vec::new();
        for i in 1..=4 {
            let (health, wait) = v.judge(Look::Down("refused".into()), now, &b, Duration::MAX);
            assert_eq!(failures(&health), i);
            waits.push(wait.as_millis());
        }
        assert_eq!(waits, [100, 200, 400, 400]);
        assert_eq!(
            v.judge(Look::Ready, now, &b, Duration::MAX).0,
            ClusterHealth::Ready
        );
        let (health, wait) = v.judge(Look::Down("refused".into()), now, &b, Duration::MAX);
        assert_eq!((failures(&health), wait), (1, b.initial));
    }
}
