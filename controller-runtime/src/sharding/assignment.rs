//! Assignment: which requests one sharded controller of this replica may
//! reconcile now, and the handover rule that keeps two replicas from
//! reconciling one object at once.
//!
//! A [`ShardGate`] follows the replica's [`RingView`]. For each request a
//! worker is about to reconcile it answers ([`ShardGate::begin`]):
//!
//! - [`Admission::NotMine`]: the acting epoch gives the key to another
//!   replica; the request is dropped (and remembered, in case the key moves
//!   here before the owner's cache shows the object again);
//! - [`Admission::Wait`]: the key is ours in the acting epoch, but the epoch
//!   is not settled yet (some member has not acknowledged it, so the
//!   previous owner may still be reconciling it); the request is parked and
//!   queued again once the epoch settles;
//! - [`Admission::Reconcile`]: go; the returned [`InFlight`] guard counts the
//!   reconcile until it ends;
//! - [`Admission::Fenced`]: the replica lost its shard Lease; nothing runs.
//!
//! A request may run when its key is ours in the acting epoch `e` and either
//! `e` is settled (every member acknowledged `e` or later), or the key was
//! already ours in the epoch this gate last saw settled and that epoch is
//! `e - 1` (continuity: a key that stays put keeps being reconciled through
//! a change elsewhere on the ring).
//!
//! When the gate adopts a new epoch it stops admitting the keys it lost, and
//! acknowledges the epoch ([`AckHandle`]) once no reconcile of a lost key is
//! in flight. When an epoch settles, it queues the keys that moved in (from
//! the controller's cache), the parked requests and the remembered foreign
//! ones that are now ours, then reports the members that left since the
//! epoch it last saw settled (filter mode's time to reassign is measured
//! to that moment).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::membership::{AckHandle, Membership};
use super::ring::Ring;
use super::view::RingView;
use crate::request::Request;

/// What a gate admits: a request whose `Display` is its shard key on the
/// ring ([`Request`]: `namespace/name`; a fleet's
/// [`ClusterRequest`](crate::request::ClusterRequest): `cluster/namespace/name`).
pub(super) trait GateKey:
    Clone + Eq + Hash + fmt::Display + fmt::Debug + Send + Sync + 'static
{
}

impl<Q: Clone + Eq + Hash + fmt::Display + fmt::Debug + Send + Sync + 'static> GateKey for Q {}

/// What a worker may do with a request; see the [module documentation](self).
#[derive(Debug)]
pub(super) enum Admission<Q: GateKey = Request> {
    /// Reconcile it; keep the guard until the reconcile ends.
    Reconcile(InFlight<Q>),
    /// Another replica owns it: drop it.
    NotMine,
    /// Ours, after the handover: parked, queued again when the epoch settles.
    Wait,
    /// This replica lost its shard Lease: reconcile nothing.
    Fenced,
}

/// Counters of one gate (for metrics and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct GateStats {
    /// The epoch the gate acts on.
    pub acting_epoch: u64,
    /// The epoch it last saw settled.
    pub settled_epoch: u64,
    /// Requests dropped because another replica owns them.
    pub dropped: u64,
    /// Requests parked until a handover finished.
    pub parked: u64,
    /// Keys queued because they moved in.
    pub moved_in: u64,
    /// Epochs acknowledged.
    pub acknowledged: u64,
    /// Reconciles in flight now.
    pub in_flight: usize,
}

type Requeue<Q> = Box<dyn Fn(Vec<Q>) + Send + Sync>;
type Keys<Q> = Box<dyn Fn() -> Vec<Q> + Send + Sync>;
type Departed = Box<dyn Fn(&[String]) + Send + Sync>;

struct State<Q> {
    acting: RingView,
    settled: Option<(u64, Ring)>,
    in_flight: HashMap<Q, usize>,
    parked: HashSet<Q>,
    foreign: HashSet<Q>,
    stats: GateStats,
}

struct Inner<Q> {
    identity: String,
    state: Mutex<State<Q>>,
    ack: AckHandle,
    fence: CancellationToken,
    requeue: Mutex<Option<Requeue<Q>>>,
    keys: Mutex<Option<Keys<Q>>>,
    departed: Mutex<Option<Departed>>,
}

/// The admission gate of one sharded controller; cheap to clone. A sharded
/// controller asks it before each reconcile (`begin`): `Reconcile` with a
/// guard to hold while reconciling, or `NotMine`, `Wait` or `Fenced`. Not
/// public: `.sharded(&membership)` on the controller builder installs it.
/// `Q` is what the controller's queue holds.
pub(super) struct ShardGate<Q: GateKey = Request> {
    inner: Arc<Inner<Q>>,
}

impl<Q: GateKey> Clone for ShardGate<Q> {
    fn clone(&self) -> Self {
        ShardGate {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<Q: GateKey> std::fmt::Debug for ShardGate<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardGate")
            .field("identity", &self.inner.identity)
            .field("stats", &self.stats())
            .finish()
    }
}

/// A reconcile admitted by a [`ShardGate`]; dropping it ends the reconcile
/// for the handover rule.
#[derive(Debug)]
pub(super) struct InFlight<Q: GateKey = Request> {
    gate: ShardGate<Q>,
    req: Q,
}

impl<Q: GateKey> Drop for InFlight<Q> {
    fn drop(&mut self) {
        let mut state = self.gate.inner.state.lock();
        if let Some(n) = state.in_flight.get_mut(&self.req) {
            *n -= 1;
            if *n == 0 {
                state.in_flight.remove(&self.req);
            }
        }
        self.gate.acknowledge_if_drained(&mut state);
    }
}

impl<Q: GateKey> ShardGate<Q> {
    /// A gate for this replica's membership.
    pub(super) fn new(membership: &Membership) -> ShardGate<Q> {
        ShardGate::with_parts(
            membership.identity(),
            membership.ack_handle(),
            membership.fence(),
        )
    }

    /// A gate from its parts: this replica's identity, its acknowledgment
    /// slot and its fence (for tests and custom memberships).
    pub(super) fn with_parts(
        identity: impl Into<String>,
        ack: AckHandle,
        fence: CancellationToken,
    ) -> ShardGate<Q> {
        ShardGate {
            inner: Arc::new(Inner {
                identity: identity.into(),
                state: Mutex::new(State {
                    acting: RingView::default(),
                    settled: None,
                    in_flight: HashMap::new(),
                    parked: HashSet::new(),
                    foreign: HashSet::new(),
                    stats: GateStats::default(),
                }),
                ack,
                fence,
                requeue: Mutex::new(None),
                keys: Mutex::new(None),
                departed: Mutex::new(None),
            }),
        }
    }

    /// Where requests go when they move in or are unparked (the
    /// controller's workqueue).
    pub(super) fn set_requeue(&self, requeue: impl Fn(Vec<Q>) + Send + Sync + 'static) {
        *self.inner.requeue.lock() = Some(Box::new(requeue));
    }

    /// Where the keys of the controller's objects come from (its primary
    /// cache), to find the keys that moved in.
    pub(super) fn set_keys(&self, keys: impl Fn() -> Vec<Q> + Send + Sync + 'static) {
        *self.inner.keys.lock() = Some(Box::new(keys));
    }

    /// Called, right after the moved-in keys were queued, with the members
    /// of the epoch this gate last saw settled that are no members of the
    /// epoch that settled now (each member once per gate): from then on
    /// the keys they held that are ours are admitted and queued here.
    pub(super) fn set_departed(&self, departed: impl Fn(&[String]) + Send + Sync + 'static) {
        *self.inner.departed.lock() = Some(Box::new(departed));
    }

    /// Fires when the replica is fenced: abort what is in flight.
    pub(super) fn fence(&self) -> &CancellationToken {
        &self.inner.fence
    }

    /// The counters now.
    pub(super) fn stats(&self) -> GateStats {
        let state = self.inner.state.lock();
        let mut stats = state.stats.clone();
        stats.in_flight = state.in_flight.values().sum();
        stats
    }

    /// The epoch this gate has acknowledged.
    #[cfg(test)]
    pub(crate) fn acknowledged(&self) -> u64 {
        self.inner.ack.acknowledged()
    }

    /// Whether this shard is serving: a member of a settled epoch, not
    /// fenced.
    pub(super) fn is_ready(&self) -> bool {
        let state = self.inner.state.lock();
        state.acting.settled()
            && state.acting.ring.contains(&self.inner.identity)
            && !self.inner.fence.is_cancelled()
    }

    /// Follows the replica's view until the sender is dropped.
    pub(super) async fn follow(&self, mut views: watch::Receiver<RingView>) {
        loop {
            let view = views.borrow_and_update().clone();
            self.observe(view);
            if views.changed().await.is_err() {
                return;
            }
        }
    }

    /// Adopts `view` (an older epoch than the acting one only updates the
    /// acknowledgments).
    pub(super) fn observe(&self, view: RingView) {
        let mut state = self.inner.state.lock();
        if view.epoch >= state.acting.epoch {
            state.acting = view;
        } else {
            state.acting.acks = view.acks;
        }
        state.stats.acting_epoch = state.acting.epoch;
        self.acknowledge_if_drained(&mut state);
        let epoch = state.acting.epoch;
        if !state.acting.settled() || state.settled.as_ref().is_some_and(|(e, _)| *e == epoch) {
            return;
        }
        // The epoch settled: queue what is ours now and was not before.
        let me = self.inner.identity.as_str();
        let previous = state.settled.take().map(|(_, ring)| ring);
        let ring = state.acting.ring.clone();
        let departed: Vec<String> = previous
            .as_ref()
            .map(|p| {
                p.members()
                    .iter()
                    .filter(|m| !ring.contains(m))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut queue: HashSet<Q> = state.parked.drain().collect();
        let foreign: Vec<Q> = state.foreign.drain().collect();
        let known = self
            .inner
            .keys
            .lock()
            .as_ref()
            .map(|k| k())
            .unwrap_or_default();
        let moved_in = known
            .into_iter()
            .filter(|r| {
                let key = r.to_string();
                ring.owns(me, &key) && !previous.as_ref().is_some_and(|p| p.owns(me, &key))
            })
            .collect::<Vec<_>>();
        state.stats.moved_in += moved_in.len() as u64;
        queue.extend(moved_in);
        // A request dropped while another replica owned its key, in an
        // epoch that may never have settled here (so `previous` may give
        // the key to us as well): its change may not have been reconciled.
        queue.extend(foreign);
        queue.retain(|r| ring.owns(me, &r.to_string()));
        state.settled = Some((epoch, ring));
        state.stats.settled_epoch = epoch;
        drop(state);
        if !queue.is_empty()
            && let Some(requeue) = self.inner.requeue.lock().as_ref()
        {
            requeue(queue.into_iter().collect());
        }
        if !departed.is_empty()
            && let Some(report) = self.inner.departed.lock().as_ref()
        {
            report(&departed);
        }
    }

    /// Decides whether `req` may be reconciled now; see [`Admission`].
    pub(super) fn begin(&self, req: &Q) -> Admission<Q> {
        if self.inner.fence.is_cancelled() {
            return Admission::Fenced;
        }
        let me = self.inner.identity.as_str();
        let key = req.to_string();
        let mut state = self.inner.state.lock();
        if !state.acting.ring.owns(me, &key) {
            state.stats.dropped += 1;
            state.foreign.insert(req.clone());
            return Admission::NotMine;
        }
        let epoch = state.acting.epoch;
        let continuing = state
            .settled
            .as_ref()
            .is_some_and(|(e, ring)| *e + 1 == epoch && ring.owns(me, &key));
        if !(state.acting.settled() || continuing) {
            state.stats.parked += 1;
            state.parked.insert(req.clone());
            return Admission::Wait;
        }
        *state.in_flight.entry(req.clone()).or_default() += 1;
        drop(state);
        Admission::Reconcile(InFlight {
            gate: self.clone(),
            req: req.clone(),
        })
    }

    /// Acknowledges the acting epoch once no reconcile of a key it took away
    /// is in flight.
    fn acknowledge_if_drained(&self, state: &mut State<Q>) {
        let epoch = state.acting.epoch;
        if epoch == 0 || self.inner.ack.acknowledged() >= epoch {
            return;
        }
        let me = self.inner.identity.as_str();
        let drained = state
            .in_flight
            .keys()
            .all(|r| state.acting.ring.owns(me, &r.to_string()));
        if drained {
            self.inner.ack.acknowledge(epoch);
            state.stats.acknowledged += 1;
        }
    }
}

#[cfg(test)]
mod tests;
