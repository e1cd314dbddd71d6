//! The fleet against API servers made of closures, on tokio's paused
//! clock: what its looks do over time, exactly.

use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use kube_client::Client;
use kube_client::client::Body;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::cache::CacheScope;
use crate::events::RecorderConfig;
use crate::healthz::Checks;
use crate::metrics::Metrics;

pub(super) fn options() -> ClusterOptions {
    ClusterOptions {
        resync: Duration::ZERO,
        strip_managed_fields: true,
        streaming_list: false,
        protobuf: false,
        cache_sync_timeout: Duration::from_secs(30),
        scope: CacheScope::new(),
        events: RecorderConfig::new("test", "test"),
    }
}

pub(super) fn fleet(backoff: EngageBackoff) -> Fleet {
    Fleet::new(options(), backoff, &Metrics::new().unwrap(), Checks::new()).unwrap()
}

/// A client whose server refuses everything at once (503), noting when it
/// was asked.
fn refusing(asked: Arc<Mutex<Vec<Instant>>>) -> Client {
    let svc = tower::service_fn(move |_: Request<Body>| {
        asked.lock().push(Instant::now());
        async move {
            let status = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "unavailable", "reason": "ServiceUnavailable", "code": 503,
            });
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .status(503)
                    .header("content-type", "application/json")
                    .body(Body::from(status.to_string().into_bytes()))
                    .unwrap(),
            )
        }
    });
    Client::new(svc, "default")
}

/// Engages `members` refusing clusters at the same instant and returns when
/// each was asked, once each was asked `looks` times.
async fn looks_of(backoff: EngageBackoff, members: usize, looks: usize) -> Vec<Vec<Duration>> {
    let fleet = fleet(backoff);
    let start = Instant::now();
    let asked: Vec<Arc<Mutex<Vec<Instant>>>> = (0..members).map(|_| Arc::default()).collect();
    for (i, times) in asked.iter().enumerate() {
        fleet
            .engage(&format!("m{i}"), refusing(Arc::clone(times)))
            .unwrap();
    }
    let stop = CancellationToken::new();
    fleet.start(&stop);
    while asked.iter().any(|a| a.lock().len() < looks) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    fleet
        .shutdown(Instant::now() + Duration::from_secs(5))
        .await;
    asked
        .iter()
        .map(|a| a.lock().iter().take(looks).map(|t| *t - start).collect())
        .collect()
}

fn backoff() -> EngageBackoff {
    EngageBackoff::default()
        .initial(Duration::from_secs(1))
        .max(Duration::from_secs(8))
}

#[tokio::test(start_paused = true)]
async fn members_that_fail_together_do_not_retry_in_lockstep() {
    let looks = looks_of(backoff(), 8, 5).await;
    // Each member waits 1, 2, 4, 8 s (doubling), each wait lengthened by
    // up to a fifth: its k-th look falls between the sum of the waits and
    // 1.2 times it.
    let bases = [0u64, 1, 3, 7, 15];
    for member in &looks {
        for (look, base) in member.iter().zip(bases) {
            let base = Duration::from_secs(base);
            assert!(
                *look >= base && *look <= base.mul_f64(1.2) + Duration::from_millis(20),
                "look at {look:?}, base {base:?}: {member:?}"
            );
        }
    }
    // All looked at once first, then spread: from the second look on,
    // the members look at different instants. (The timer has millisecond
    // ticks, so two of eight may share one of the 200 to 1,600 ticks a
    // look's jitter spans; half of them sharing would be a one-in-a-
    // billion draw.)
    for k in 1..5 {
        let mut at: Vec<Duration> = looks.iter().map(|m| m[k]).collect();
        at.sort();
        at.dedup();
        assert!(
            at.len() > looks.len() / 2,
            "look {k} in lockstep: {looks:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn without_jitter_members_retry_in_lockstep() {
    // The contrast that shows the test above can fail.
    let looks = looks_of(backoff().jitter(0.0), 4, 4).await;
    for k in 0..4 {
        assert!(looks.iter().all(|m| m[k] == looks[0][k]), "{looks:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_refusing_member_is_failing_and_counted() {
    let fleet = fleet(backoff());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let cluster = fleet.engage("m", refusing(Arc::clone(&asked))).unwrap();
    assert_eq!(cluster.health(), ClusterHealth::Pending);
    let mut health = cluster.watch_health();
    let stop = CancellationToken::new();
    fleet.start(&stop);
    health.changed().await.unwrap();
    assert!(
        matches!(&*health.borrow(), ClusterHealth::Failing { failures: 1, error } if error.contains("unavailable")),
        "{:?}",
        *health.borrow()
    );
    assert_eq!(fleet.health("m"), Some(cluster.health()));
    stop.cancel();
    fleet
        .shutdown(Instant::now() + Duration::from_secs(5))
        .await;
}
