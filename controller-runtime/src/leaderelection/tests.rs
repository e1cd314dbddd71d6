//! Leader election on tokio's paused clock, against an in-memory lease that
//! behaves like the API server (resourceVersion checks, 409 on races).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube_core::Status;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::lock::{Decision, Observed, decide, next_spec};
use super::*;

#[derive(Default)]
struct Store {
    lease: Mutex<Option<Lease>>,
    rv: AtomicU64,
}

/// One candidate's view of the shared store; `down` makes its calls fail,
/// `hang` makes them never answer, `slow_gets` holds delays for its next
/// reads (each read waits its delay, then reads the store: the server
/// answers late with the state at answer time).
#[derive(Clone)]
struct FakeLock {
    store: Arc<Store>,
    down: Arc<AtomicBool>,
    hang: Arc<AtomicBool>,
    slow_gets: Arc<Mutex<std::collections::VecDeque<Duration>>>,
}

impl FakeLock {
    fn new(store: &Arc<Store>) -> Self {
        FakeLock {
            store: store.clone(),
            down: Arc::default(),
            hang: Arc::default(),
            slow_gets: Arc::default(),
        }
    }
    async fn gate(&self, op: &'static str) -> Result<(), LeaderElectionError> {
        if self.hang.load(Ordering::SeqCst) {
            futures::future::pending::<()>().await;
        }
        if self.down.load(Ordering::SeqCst) {
            let status = Status::failure("server unavailable", "ServiceUnavailable").with_code(503);
            return Err(LeaderElectionError::Api {
                op,
                lease: self.describe(),
                source: kube_client::Error::Api(status.boxed()),
            });
        }
        Ok(())
    }
    fn stamp(&self, mut lease: Lease) -> Lease {
        let rv = self.store.rv.fetch_add(1, Ordering::SeqCst) + 1;
        lease.metadata.resource_version = Some(rv.to_string());
        lease
    }
}

impl LeaseLock for FakeLock {
    fn get(&self) -> BoxFuture<'_, Result<Option<Lease>, LeaderElectionError>> {
        Box::pin(async move {
            self.gate("get").await?;
            let delay = self.slow_gets.lock().pop_front();
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            Ok(self.store.lease.lock().clone())
        })
    }
    fn create(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaderElectionError>> {
        Box::pin(async move {
            self.gate("create").await?;
            let mut slot = self.store.lease.lock();
            if slot.is_some() {
                return Err(LeaderElectionError::Conflict {
                    lease: self.describe(),
                });
            }
            let stored = self.stamp(lease);
            *slot = Some(stored.clone());
            Ok(stored)
        })
    }
    fn update(&self, lease: Lease) -> BoxFuture<'_, Result<Lease, LeaderElectionError>> {
        Box::pin(async move {
            self.gate("update").await?;
            let mut slot = self.store.lease.lock();
            let current_rv = slot
                .as_ref()
                .and_then(|l| l.metadata.resource_version.clone());
            if current_rv.is_none() || current_rv != lease.metadata.resource_version {
                return Err(LeaderElectionError::Conflict {
                    lease: self.describe(),
                });
            }
            let stored = self.stamp(lease);
            *slot = Some(stored.clone());
            Ok(stored)
        })
    }
    fn describe(&self) -> String {
        "ns/lock".into()
    }
}

fn fast_config(id: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("ns", "lock", id)
        .lease_duration(Duration::from_secs(15))
        .renew_deadline(Duration::from_secs(10))
        .retry_period(Duration::from_secs(2))
}

type Timeline = Arc<Mutex<Vec<(String, bool, Instant)>>>;

fn candidate(store: &Arc<Store>, id: &str, timeline: &Timeline) -> (LeaderElector, FakeLock) {
    let lock = FakeLock::new(store);
    let (t1, t2) = (timeline.clone(), timeline.clone());
    let (id1, id2) = (id.to_string(), id.to_string());
    let elector = LeaderElector::builder_with_lock(fast_config(id), lock.clone())
        .on_started_leading(move || t1.lock().push((id1.clone(), true, Instant::now())))
        .on_stopped_leading(move || t2.lock().push((id2.clone(), false, Instant::now())))
        .build()
        .unwrap();
    (elector, lock)
}

/// Asserts that at no instant two candidates lead.
fn assert_never_two_leaders(timeline: &Timeline) {
    let mut leader: Option<String> = None;
    for (id, started, at) in timeline.lock().iter() {
        if *started {
            assert!(
                leader.is_none(),
                "{id} started leading at {at:?} while {leader:?} led"
            );
            leader = Some(id.clone());
        } else {
            assert_eq!(leader.as_deref(), Some(id.as_str()));
            leader = None;
        }
    }
}

fn spawn(
    e: &LeaderElector,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<Result<(), LeaderElectionError>> {
    let (e, c) = (e.clone(), cancel.clone());
    tokio::spawn(async move { e.run(c).await })
}

/// A candidate running in the background: the elector, its lock, the token
/// that stops it, a subscription to its leading flag taken before it started,
/// and the run's task.
type Started = (
    LeaderElector,
    FakeLock,
    CancellationToken,
    tokio::sync::watch::Receiver<bool>,
    tokio::task::JoinHandle<Result<(), LeaderElectionError>>,
);

/// Builds candidate `id` on `store` and runs it in the background.
fn start(store: &Arc<Store>, id: &str, timeline: &Timeline) -> Started {
    let (e, lock) = candidate(store, id, timeline);
    let cancel = CancellationToken::new();
    let rx = e.subscribe();
    let run = spawn(&e, &cancel);
    (e, lock, cancel, rx, run)
}

/// [`start`]s candidate `id` and asserts it leads within a second.
async fn start_leading(store: &Arc<Store>, id: &str, timeline: &Timeline) -> Started {
    let mut started = start(store, id, timeline);
    assert!(wait_for_leading(&mut started.3, true, Duration::from_secs(1)).await);
    started
}

fn spec(store: &Store) -> LeaseSpec {
    store
        .lease
        .lock()
        .as_ref()
        .and_then(|l| l.spec.clone())
        .unwrap()
}

#[test]
fn config_defaults_and_validation_rules() {
    let cfg = LeaderElectionConfig::new("ns", "l", "me");
    assert_eq!(
        (
            cfg.timing.lease_duration,
            cfg.timing.renew_deadline,
            cfg.timing.retry_period
        ),
        (
            Duration::from_secs(15),
            Duration::from_secs(10),
            Duration::from_secs(2)
        )
    );
    assert!(cfg.validate().is_ok());
    let err = cfg
        .clone()
        .lease_duration(Duration::from_secs(10))
        .validate()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("must be greater than renew deadline"),
        "{err}"
    );
    // renew must exceed 1.2 x retry: 2.4 s is not enough for 2 s, 2.5 s is.
    let err = cfg
        .clone()
        .renew_deadline(Duration::from_millis(2400))
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("1.2 x retry period"), "{err}");
    assert!(
        cfg.clone()
            .renew_deadline(Duration::from_millis(2500))
            .validate()
            .is_ok()
    );
    assert!(cfg.clone().retry_period(Duration::ZERO).validate().is_err());
    assert!(LeaderElectionConfig::new("ns", "l", "").validate().is_err());
    assert!(LeaderElectionConfig::new("", "l", "me").validate().is_err());
    // An invalid config is refused by the builder too.
    let store = Arc::new(Store::default());
    let built = LeaderElector::builder_with_lock(
        cfg.renew_deadline(Duration::from_secs(1)),
        FakeLock::new(&store),
    )
    .build();
    assert!(matches!(
        built,
        Err(LeaderElectionError::InvalidConfig { .. })
    ));
}

#[test]
fn lease_duration_seconds_rounds_up() {
    let cfg = LeaderElectionConfig::new("ns", "l", "me");
    assert_eq!(
        cfg.clone()
            .lease_duration(Duration::from_millis(1500))
            .timing
            .lease_duration_seconds(),
        2
    );
    assert_eq!(
        cfg.clone()
            .lease_duration(Duration::from_millis(10))
            .timing
            .lease_duration_seconds(),
        1
    );
    assert_eq!(cfg.timing.lease_duration_seconds(), 15);
}

fn lease_held_by(holder: &str, transitions: i32) -> Lease {
    lock::new_lease(
        "ns",
        "lock",
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            lease_transitions: Some(transitions),
            ..Default::default()
        },
    )
}

#[tokio::test(start_paused = true)]
async fn expiry_is_judged_from_when_the_lease_was_last_seen_to_change() {
    let fallback = Duration::from_secs(99);
    let t0 = Instant::now();
    let seen = Observed::update(None, lease_held_by("other", 0), t0);
    assert_eq!(
        decide(&seen, "me", t0, fallback),
        Decision::Wait {
            expires_at: t0 + Duration::from_secs(15)
        }
    );
    tokio::time::advance(Duration::from_secs(14)).await;
    // Seen again unchanged: the clock keeps running from t0.
    let again = Observed::update(Some(&seen), lease_held_by("other", 0), Instant::now());
    assert_eq!(again.at, t0);
    assert!(matches!(
        decide(&again, "me", Instant::now(), fallback),
        Decision::Wait { .. }
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        decide(&again, "me", Instant::now(), fallback),
        Decision::Acquire
    );
    // A change (a renewal) restarts the clock.
    let mut renewed = lease_held_by("other", 0);
    renewed.spec.as_mut().unwrap().renew_time = Some(MicroTimeNow::now());
    let changed = Observed::update(Some(&again), renewed, Instant::now());
    assert_eq!(changed.at, Instant::now());
    assert!(matches!(
        decide(&changed, "me", Instant::now(), fallback),
        Decision::Wait { .. }
    ));
    // Free and own leases.
    let free = Observed::update(None, lease_held_by("", 3), t0);
    assert_eq!(decide(&free, "me", t0, fallback), Decision::Acquire);
    let mine = Observed::update(None, lease_held_by("me", 3), t0);
    assert_eq!(decide(&mine, "me", t0, fallback), Decision::Renew);
    // Without a duration in the lease, the fallback applies.
    let mut no_duration = lease_held_by("other", 0);
    no_duration.spec.as_mut().unwrap().lease_duration_seconds = None;
    let nd = Observed::update(None, no_duration, t0);
    assert_eq!(
        decide(&nd, "me", t0, fallback),
        Decision::Wait {
            expires_at: t0 + fallback
        }
    );
}

struct MicroTimeNow;
impl MicroTimeNow {
    fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now())
    }
}

#[test]
fn a_new_holder_increments_transitions_a_renewal_does_not() {
    let now = jiff::Timestamp::now();
    let created = next_spec(None, "a", 15, now);
    assert_eq!(created.lease_transitions, Some(0));
    assert_eq!(created.holder_identity.as_deref(), Some("a"));
    assert!(created.acquire_time.is_some() && created.renew_time.is_some());
    let later = now + jiff::SignedDuration::from_secs(5);
    let renewed = next_spec(Some(&created), "a", 15, later);
    assert_eq!(renewed.lease_transitions, Some(0));
    assert_eq!(renewed.acquire_time, created.acquire_time);
    assert_ne!(renewed.renew_time, created.renew_time);
    let taken = next_spec(Some(&renewed), "b", 15, later);
    assert_eq!(taken.lease_transitions, Some(1));
    assert_eq!(taken.holder_identity.as_deref(), Some("b"));
    assert_ne!(taken.acquire_time, created.acquire_time);
    let released = lock::released_spec(Some(&taken), later);
    assert_eq!(released.holder_identity.as_deref(), Some(""));
    assert_eq!(released.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn single_candidate_creates_the_lease_and_leads() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (a, _, cancel, _rx, run) = start_leading(&store, "a", &timeline).await;
    assert!(a.is_leader());
    assert_eq!(spec(&store).holder_identity.as_deref(), Some("a"));
    assert_eq!(spec(&store).lease_transitions, Some(0));
    assert_eq!(a.observed_leader().as_deref(), Some("a"));
    // It keeps renewing: the renew time moves on.
    let first_rv = store.rv.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(store.rv.load(Ordering::SeqCst) >= first_rv + 3);
    assert!(a.is_leader());
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert!(!a.is_leader());
    assert_eq!(
        spec(&store).holder_identity.as_deref(),
        Some(""),
        "released on cancel"
    );
}

#[tokio::test(start_paused = true)]
async fn successor_takes_over_at_once_after_release() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (_a, _, ca, _rxa, ra) = start_leading(&store, "a", &timeline).await;
    let (b, _, cb, mut rxb, rb) = start(&store, "b", &timeline);
    // B waits as long as A renews.
    assert!(!wait_for_leading(&mut rxb, true, Duration::from_secs(60)).await);
    assert_eq!(b.observed_leader().as_deref(), Some("a"));
    let released_at = Instant::now();
    ca.cancel();
    ra.await.unwrap().unwrap();
    // Within one retry period (+ jitter), far sooner than the lease duration.
    assert!(
        wait_for_leading(
            &mut rxb,
            true,
            Duration::from_millis(2400) + Duration::from_millis(10)
        )
        .await
    );
    assert!(released_at.elapsed() < Duration::from_secs(15));
    assert_eq!(spec(&store).holder_identity.as_deref(), Some("b"));
    assert_eq!(spec(&store).lease_transitions, Some(1));
    assert_never_two_leaders(&timeline);
    cb.cancel();
    rb.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn leader_that_cannot_renew_stops_before_a_successor_starts() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (a, lock_a, _ca, _rxa, ra) = start_leading(&store, "a", &timeline).await;
    let (_b, _, cb, mut rxb, rb) = start(&store, "b", &timeline);
    tokio::time::sleep(Duration::from_secs(5)).await;
    lock_a.down.store(true, Ordering::SeqCst);
    let cut = Instant::now();
    let err = ra.await.unwrap().unwrap_err();
    assert!(
        matches!(err, LeaderElectionError::LostLease { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("renew deadline"), "{err}");
    assert!(!a.is_leader());
    // A stopped no later than renew deadline after its last renewal (which
    // was at most one retry period before the cut).
    assert!(cut.elapsed() <= Duration::from_secs(10));
    assert!(wait_for_leading(&mut rxb, true, Duration::from_secs(20)).await);
    assert!(
        cut.elapsed() <= Duration::from_secs(15 + 3),
        "takeover within the lease duration"
    );
    assert_eq!(spec(&store).lease_transitions, Some(1));
    assert_never_two_leaders(&timeline);
    let tl = timeline.lock().clone();
    assert_eq!(
        tl.iter()
            .map(|(id, s, _)| (id.as_str(), *s))
            .collect::<Vec<_>>(),
        [("a", true), ("a", false), ("b", true)]
    );
    cb.cancel();
    rb.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn hanging_renewal_stops_leading_at_the_renew_deadline() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (_a, lock_a, _ca, mut rxa, ra) = start_leading(&store, "a", &timeline).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    lock_a.hang.store(true, Ordering::SeqCst);
    let last_renew = timeline.lock()[0].2; // acquired then, no renewal since
    assert!(wait_for_leading(&mut rxa, false, Duration::from_secs(30)).await);
    assert_eq!(Instant::now() - last_renew, Duration::from_secs(10));
    assert!(ra.await.unwrap().is_err());
}

#[tokio::test(start_paused = true)]
async fn leader_that_finds_another_holder_stops_at_once() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (_a, _, _ca, mut rxa, ra) = start_leading(&store, "a", &timeline).await;
    {
        let mut slot = store.lease.lock();
        let lease = slot.as_mut().unwrap();
        lease.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
        lease.metadata.resource_version = Some("999".into());
    }
    let taken = Instant::now();
    assert!(wait_for_leading(&mut rxa, false, Duration::from_secs(3)).await);
    assert!(
        taken.elapsed() <= Duration::from_secs(2),
        "at the next renewal attempt"
    );
    let err = ra.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("intruder"), "{err}");
    // A lost leader does not release a lease it no longer holds.
    assert_eq!(spec(&store).holder_identity.as_deref(), Some("intruder"));
}

#[tokio::test(start_paused = true)]
async fn cancel_before_acquiring_returns_without_leading() {
    let store = Arc::new(Store::default());
    *store.lease.lock() = Some(FakeLock::new(&store).stamp(lease_held_by("other", 4)));
    let timeline = Timeline::default();
    let (a, _) = candidate(&store, "a", &timeline);
    let ca = CancellationToken::new();
    let ra = spawn(&a, &ca);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!a.is_leader());
    ca.cancel();
    ra.await.unwrap().unwrap();
    assert!(timeline.lock().is_empty());
    assert_eq!(spec(&store).holder_identity.as_deref(), Some("other"));
}

#[tokio::test(start_paused = true)]
async fn racing_candidates_never_lead_together() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let mut runs = Vec::new();
    let mut cancels = Vec::new();
    let mut electors = Vec::new();
    for id in ["a", "b", "c", "d"] {
        let (e, _) = candidate(&store, id, &timeline);
        let c = CancellationToken::new();
        runs.push(spawn(&e, &c));
        cancels.push(c);
        electors.push(e);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(electors.iter().filter(|e| e.is_leader()).count(), 1);
    // Hand leadership around by cancelling whoever leads, three times.
    for _ in 0..3 {
        let idx = electors.iter().position(LeaderElector::is_leader).unwrap();
        cancels[idx].cancel();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(electors.iter().filter(|e| e.is_leader()).count(), 1);
    }
    assert_eq!(spec(&store).lease_transitions, Some(3));
    assert_never_two_leaders(&timeline);
    for c in &cancels {
        c.cancel();
    }
    for r in runs {
        r.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn release_retries_once_after_an_unrelated_write() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (_a, lock_a, ca, _rxa, ra) = start_leading(&store, "a", &timeline).await;
    // Someone else touches the lease (a label), bumping its resourceVersion.
    {
        let mut slot = store.lease.lock();
        let touched = slot.take().unwrap();
        *slot = Some(lock_a.stamp(touched));
    }
    ca.cancel();
    ra.await.unwrap().unwrap();
    assert_eq!(spec(&store).holder_identity.as_deref(), Some(""));
}

#[tokio::test(start_paused = true)]
async fn a_hung_acquire_attempt_is_abandoned_and_retried() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (a, lock_a) = candidate(&store, "a", &timeline);
    lock_a.hang.store(true, Ordering::SeqCst);
    let ca = CancellationToken::new();
    let mut rxa = a.subscribe();
    let ra = spawn(&a, &ca);
    tokio::time::sleep(Duration::from_secs(1)).await;
    lock_a.hang.store(false, Ordering::SeqCst);
    // The hung attempt times out after the renew deadline (10 s); the next
    // one, a retry period later, succeeds.
    assert!(wait_for_leading(&mut rxa, true, Duration::from_secs(13)).await);
    ca.cancel();
    ra.await.unwrap().unwrap();
}

mod cadence_and_reporting;
mod slow_reads;
