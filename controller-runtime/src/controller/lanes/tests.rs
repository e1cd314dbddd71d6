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
