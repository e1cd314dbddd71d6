//! How often a leader writes the lease, and what an elector reports: its
//! `Debug`, the new-leader callback, its default identity. Written against
//! mutants (`cargo mutants`) the other tests let live.

use super::*;

/// The holder renews once per retry period, counted from the write that won
/// the lease: no write before the first period is over, then exactly one per
/// period (every write bumps the fake server's resourceVersion).
#[tokio::test(start_paused = true)]
async fn the_leader_writes_the_lease_once_per_retry_period() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (a, _, cancel, _rx, run) = start_leading(&store, "a", &timeline).await;
    let acquired = timeline.lock()[0].2;
    let created = store.rv.load(Ordering::SeqCst);
    assert_eq!(created, 1, "the lease was created once");

    tokio::time::sleep_until(acquired + Duration::from_millis(1999)).await;
    assert_eq!(
        store.rv.load(Ordering::SeqCst),
        created,
        "no renewal within the first retry period"
    );
    tokio::time::sleep_until(acquired + Duration::from_millis(7000)).await;
    assert_eq!(
        store.rv.load(Ordering::SeqCst),
        created + 3,
        "one renewal at 2 s, 4 s and 6 s"
    );
    assert!(a.is_leader());
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn debug_shows_the_config_and_whether_it_leads() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (a, _) = candidate(&store, "a", &timeline);
    let shown = format!("{a:?}");
    assert!(
        shown.starts_with("LeaderElector {")
            && shown.contains("identity: \"a\"")
            && shown.contains("leading: false"),
        "{shown}"
    );
}

/// `on_new_leader` runs once for each change of holder, not for every
/// observation of the same holder (a follower reads the lease every retry
/// period).
#[tokio::test(start_paused = true)]
async fn the_new_leader_callback_runs_once_per_holder() {
    let store = Arc::new(Store::default());
    let timeline = Timeline::default();
    let (_a, _, ca, _rxa, ra) = start_leading(&store, "a", &timeline).await;
    let heard = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&heard);
    let b = LeaderElector::builder_with_lock(fast_config("b"), FakeLock::new(&store))
        .on_new_leader(move |holder| sink.lock().push(holder.to_string()))
        .build()
        .unwrap();
    let cb = CancellationToken::new();
    let mut rxb = b.subscribe();
    let rb = spawn(&b, &cb);
    // b reads the lease held by a about ten times.
    assert!(!wait_for_leading(&mut rxb, true, Duration::from_secs(20)).await);
    assert_eq!(*heard.lock(), ["a"]);

    ca.cancel();
    ra.await.unwrap().unwrap();
    assert!(wait_for_leading(&mut rxb, true, Duration::from_secs(5)).await);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        *heard.lock(),
        ["a", "b"],
        "the released lease has no holder"
    );
    cb.cancel();
    rb.await.unwrap().unwrap();
}

/// The default identity is the host name (or `unknown-host`) and a random
/// 16-hex-digit suffix, different for each call.
#[test]
fn the_default_identity_is_the_host_and_a_random_suffix() {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string());
    let a = default_identity();
    let b = default_identity();
    assert_ne!(a, b);
    for id in [&a, &b] {
        let suffix = id
            .strip_prefix(&format!("{host}_"))
            .unwrap_or_else(|| panic!("{id} does not start with {host}_"));
        assert_eq!(suffix.len(), 16, "{id}");
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
}

/// A lease naming no positive duration (0 or negative) is judged with the
/// candidate's own lease duration, never as already expired.
#[tokio::test(start_paused = true)]
async fn a_lease_without_a_positive_duration_uses_the_fallback() {
    let fallback = Duration::from_secs(15);
    let t0 = Instant::now();
    for seconds in [0, -5] {
        let mut lease = lease_held_by("other", 0);
        lease.spec.as_mut().unwrap().lease_duration_seconds = Some(seconds);
        let seen = Observed::update(None, lease, t0);
        assert_eq!(
            decide(&seen, "me", t0, fallback),
            Decision::Wait {
                expires_at: t0 + fallback
            },
            "leaseDurationSeconds {seconds}"
        );
    }
}

/// The lease a candidate creates is named and placed as configured (the
/// API server rejects a create without them).
#[test]
fn a_new_lease_carries_its_name_and_namespace() {
    let lease = lock::new_lease("kube-system", "my-operator", LeaseSpec::default());
    assert_eq!(lease.metadata.name.as_deref(), Some("my-operator"));
    assert_eq!(lease.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(lease.spec, Some(LeaseSpec::default()));
}
