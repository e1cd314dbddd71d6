use super::*;
use crate::action::Action;
use crate::reconcile::{CallInfo, Reconciler};

struct Noop;

impl Reconciler for Noop {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, _: Request, _: CallInfo) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

fn req(cluster: &str, name: &str) -> ClusterRequest {
    ClusterRequest::new(cluster, Request::new(Some("ns"), name))
}

fn lane(limit: usize) -> (Lane<ClusterRequest>, Queue<ClusterRequest>) {
    let queue = Queue::new();
    let lane = Lane::new(
        Arc::from("edge"),
        Arc::new(Noop),
        Vec::new(),
        limit,
        None,
        queue.clone(),
    );
    (lane, queue)
}

#[tokio::test(start_paused = true)]
async fn requests_wait_parked_until_the_caches_synced() {
    let (lane, queue) = lane(2);
    assert!(lane.admit(&req("edge", "a")).is_none());
    assert!(lane.admit(&req("edge", "b")).is_none());
    assert_eq!((lane.parked(), queue.len()), (2, 0), "parked, not queued");
    assert_eq!(lane.set_synced(), 2);
    assert_eq!(
        (lane.parked(), queue.len()),
        (0, 2),
        "released into the queue"
    );
    assert!(lane.admit(&req("edge", "a")).is_some());
}

/// A lane at its share of the workers parks the next request and lets one
/// go each time a reconcile ends: no polling.
#[tokio::test(start_paused = true)]
async fn a_lane_at_its_share_parks_and_a_freed_slot_releases_one() {
    let (lane, queue) = lane(1);
    lane.set_synced();
    let slot = lane.admit(&req("edge", "a")).expect("a free slot");
    assert!(lane.admit(&req("edge", "b")).is_none());
    assert!(lane.admit(&req("edge", "c")).is_none());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        (lane.parked(), queue.len()),
        (2, 0),
        "nothing polls them back"
    );
    drop(slot);
    assert_eq!(
        (lane.parked(), queue.len()),
        (1, 1),
        "one released per freed slot"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_cluster_parks_its_requests_and_signals_its_reconciles() {
    let (lane, queue) = lane(2);
    lane.set_synced();
    let mut failing = Box::pin(lane.failing());
    assert!(futures::poll!(&mut failing).is_pending());
    assert!(lane.set_healthy(false));
    assert!(!lane.set_healthy(false), "no change");
    assert!(futures::poll!(&mut failing).is_ready());
    assert!(lane.admit(&req("edge", "a")).is_none());
    assert_eq!(queue.len(), 0);
    assert!(lane.set_healthy(true));
    assert_eq!((lane.parked(), queue.len()), (0, 1));
}

/// The lane follows its cluster's health as it changes, with no time
/// passing (nothing polls): parked on `Failing`, still parked on `Pending`
/// after that, released on `Ready`.
#[tokio::test(start_paused = true)]
async fn health_changes_park_and_release_the_lane_at_once() {
    let (lane, queue) = lane(2);
    lane.set_synced();
    let (health, watch) = watch::channel(ClusterHealth::Pending);
    let changes = std::cell::RefCell::new(Vec::new());
    let mut follow = Box::pin(lane.follow_health(watch, |h| changes.borrow_mut().push(h)));
    let start = tokio::time::Instant::now();
    assert!(futures::poll!(&mut follow).is_pending());
    assert!(
        lane.admit(&req("edge", "a")).is_some(),
        "Pending at first: open"
    );

    health.send_replace(ClusterHealth::Failing {
        failures: 1,
        error: "no answer".into(),
    });
    assert!(futures::poll!(&mut follow).is_pending());
    assert!(futures::poll!(Box::pin(lane.failing())).is_ready());
    assert!(lane.admit(&req("edge", "b")).is_none(), "parked");
    health.send_replace(ClusterHealth::Pending);
    assert!(futures::poll!(&mut follow).is_pending());
    assert!(
        lane.admit(&req("edge", "c")).is_none(),
        "Failing then Pending: still parked"
    );
    assert_eq!((lane.parked(), queue.len()), (2, 0));

    health.send_replace(ClusterHealth::Ready);
    assert!(futures::poll!(&mut follow).is_pending());
    assert_eq!((lane.parked(), queue.len()), (0, 2), "released on Ready");
    assert_eq!(*changes.borrow(), [false, true]);
    assert_eq!(tokio::time::Instant::now(), start, "no time passed");
}

/// A member `Pending` again after having synced (another informer in it
/// making its first list) keeps its lane open.
#[tokio::test(start_paused = true)]
async fn pending_after_ready_does_not_park() {
    let (lane, _queue) = lane(2);
    lane.set_synced();
    let (health, watch) = watch::channel(ClusterHealth::Ready);
    let mut follow = Box::pin(lane.follow_health(watch, |_| {}));
    assert!(futures::poll!(&mut follow).is_pending());
    health.send_replace(ClusterHealth::Pending);
    assert!(futures::poll!(&mut follow).is_pending());
    assert!(lane.admit(&req("edge", "a")).is_some());
    assert!(futures::poll!(Box::pin(lane.failing())).is_pending());
}

/// Following ends when the lane closes for good.
#[tokio::test(start_paused = true)]
async fn following_health_ends_when_the_lane_closes() {
    let (lane, _queue) = lane(2);
    let (_health, watch) = watch::channel(ClusterHealth::Ready);
    let mut follow = Box::pin(lane.follow_health(watch, |_| {}));
    assert!(futures::poll!(&mut follow).is_pending());
    lane.detach();
    assert!(futures::poll!(&mut follow).is_ready());
}

#[tokio::test(start_paused = true)]
async fn a_detached_lane_drops_its_parked_requests() {
    let (lane, queue) = lane(2);
    assert!(lane.admit(&req("edge", "a")).is_none());
    let detached = lane.detached();
    lane.detach();
    assert!(detached.is_cancelled());
    assert_eq!(lane.parked(), 0);
    assert_eq!(lane.wait_synced(Duration::from_secs(1)).await, Ok(false));
    lane.set_synced();
    assert_eq!(queue.len(), 0);
}

/// One cluster spending its whole bucket does not slow another's retries.
#[tokio::test(start_paused = true)]
async fn each_cluster_has_its_own_bucket() {
    let buckets = ClusterBuckets::default();
    for i in 0..100 {
        assert_eq!(buckets.when(&req("a", &i.to_string())), Duration::ZERO);
    }
    assert_eq!(
        buckets.when(&req("a", "more")),
        Duration::from_millis(100),
        "a's bucket is empty"
    );
    assert_eq!(buckets.when(&req("b", "first")), Duration::ZERO);
    buckets.remove("a");
    assert_eq!(
        buckets.when(&req("a", "again")),
        Duration::ZERO,
        "a new bucket"
    );
}
