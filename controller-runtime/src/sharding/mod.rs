//! Sharding: spread one controller's objects over N replicas, each object
//! reconciled by exactly one replica at a time.
//!
//! Leader election makes every replica but one a warm standby. With
//! sharding every replica works: each owns a share of the objects, decided
//! by a consistent hash ring over the live replicas, and hands a share over
//! safely when replicas come and go. It is the layer above the controller
//! (layer 6 in `lib.rs`): it builds controllers, and uses leader election's
//! Lease timing, the workqueue and informers below it.
//!
//! # Pieces
//!
//! - `ring` (private): the consistent hash ring (virtual nodes, a hash stable across
//!   processes and releases) and the shard key of an object (its own
//!   `namespace/name`, or its controller owner's).
//! - [`config`]: which ring, which identity, the Lease timings, how fast
//!   the sharder writes labels.
//! - `view` (private): a replica's view of the ring, read from Leases (the
//!   [`RingView`](membership::RingView) a membership hands out): the epoch and
//!   its members, each member's acknowledged epoch, and when each shard
//!   Lease was last seen to change.
//! - [`membership`]: the replica's shard Lease (renewed like the leader
//!   Lease; the replica fences itself when it cannot renew), the informer on
//!   the ring's Leases, and the sharder (elected on its own Lease) that
//!   writes the next epoch whenever the live shard Leases change.
//! - `assignment` (private): the admission gate of one sharded controller in filter
//!   mode: which requests it may reconcile now.
//! - `labels` (private; [`copy_shard_labels`] is public): label mode's vocabulary and the sharder's rule (assign,
//!   drain, relabel); the label gate and the sharder's relabelling loop
//!   are private.
//! - [`controller`]: `builder.sharded(&membership)` ([`controller::ShardedExt`]),
//!   which puts the reconciler behind the gate of the configured mode, runs
//!   the membership, registers the `sharding_*` metrics and a readiness
//!   check.
//! - [`fleet`]: a fleet controller's `(cluster, namespace, name)`s spread
//!   over the replicas, `fleet_builder.sharded(&membership)`
//!   ([`fleet::ShardedFleetExt`]), filter mode only.
//! - [`manifests`]: a Deployment of N replicas with the Leases' RBAC.
//!
//! # Objects in the API
//!
//! All in one namespace, labelled `sharding.informer-rs.io/ring=<ring>`:
//!
//! | Lease                      | written by      | holds                                        |
//! |----------------------------|-----------------|----------------------------------------------|
//! | `<identity>` (role=shard)  | that replica    | holder, renew time, `acked-epoch` annotation |
//! | `<ring>-sharding-ring` (role=ring) | the sharder | `epoch` and `members` annotations      |
//! | `<ring>-sharding-leader`   | leader election | who the sharder is                           |
//!
//! # The handover rule
//!
//! The invariant: an object is never reconciled by two replicas at the same
//! time, and every change is reconciled by some replica.
//!
//! Replicas see the ring through informers, each with its own delay, so two
//! replicas may at one moment compute owners from different member sets.
//! Owners are therefore computed from *epochs*, never from a replica's own
//! view of who is alive:
//!
//! 1. **Epochs only grow.** The sharder writes epoch `e + 1` with the live
//!    members, numbered from a fresh read and guarded by the ring-state
//!    Lease's `resourceVersion`; a replica never adopts an older epoch than
//!    the one it acts on.
//! 2. **Members leave only when they have stopped.** A member is dropped
//!    when its shard Lease is gone (deleted on a graceful stop, after the
//!    manager drained its controllers) or has not changed for its duration
//!    by the sharder's clock, confirmed by a fresh GET. A replica that cannot
//!    renew within the renew deadline (shorter than the duration) has fenced
//!    itself before that: its gates admit nothing and abort what is in
//!    flight.
//! 3. **The loser stops before it acknowledges.** A replica adopting epoch
//!    `e` stops admitting the keys `e` gives to others at once; when no
//!    reconcile of such a key is in flight any more (in every sharded
//!    controller of the replica), it writes `acked-epoch: e` to its shard
//!    Lease. Acknowledgments only grow.
//! 4. **The gainer waits for everyone's acknowledgment.** A replica may
//!    reconcile a key that `e` gives it once *every* member of `e` has
//!    acknowledged `e` or later (the epoch is *settled*), or, without
//!    waiting, when the key was already its own in the epoch it last saw
//!    settled and that epoch is `e - 1` (a key that stays put is not
//!    paused by a change elsewhere).
//!
//! Why two replicas cannot both run key `k`: say G runs `k` by epoch `e`
//! and X by epoch `f > e` (one epoch gives `k` to one member). If `f` is
//! settled, every member of `f` acknowledged `f` or later: if G is a member,
//! it has adopted `f` and no longer runs by `e`; if not, it was dropped and
//! so has stopped (rule 2). If X runs by continuity, the same holds for
//! the settled `f - 1`, which gives `k` to X too, so `f - 1 > e`. The
//! `assignment` tests check this against a
//! model in which replicas learn epochs and acknowledgments arbitrarily
//! late; acknowledging before the drain, or ignoring acknowledgments, turns
//! them red.
//!
//! **Every change is reconciled**: a request for a key the replica does not
//! own is dropped (its owner got the same event: every replica's informers
//! see every object in filter mode) but remembered; one for a key it owns
//! in an unsettled epoch is parked. When an epoch settles, the gate queues
//! the keys that moved in (from the controller's cache), the parked ones,
//! and the remembered ones that are now its own.
//!
//! A deletion is reconciled only by a replica whose informers saw it: one
//! that starts after an object was deleted never learns of it. So when the
//! key's owner was already dead at the deletion, or the key moves to a
//! replica started since before its owner reconciled the deletion, nobody
//! reconciles it (use a finalizer, whose removal is an update).
//!
//! **Liveness**: a member that never acknowledges (a reconcile of a lost key
//! that never ends) holds the handover of the keys that move, not the rest;
//! use a reconcile timeout. The sharder's own death delays new epochs by the
//! sharder Lease's duration.
//!
//! # Modes
//!
//! *Filter* ([`config::ShardMode::Filter`], the default): every replica
//! caches everything; the gate admits only the replica's keys by the rule
//! above. It saves reconcile work, not memory.
//!
//! *Label* ([`config::ShardMode::Label`]): the replica that is the ring's
//! sharder labels each object `sharding.informer-rs.io/<ring>=<identity>` by
//! the ring, and each replica's informers select their own label, so each
//! caches about 1/N of the objects (the sharder also keeps a metadata-only
//! cache of all of them). Ownership is the label, not the epoch: a replica
//! reconciles what its cache holds labelled with its identity. A move is a
//! handshake: the sharder sets a drain label, the old
//! shard, with nothing of the object in flight, removes both labels, then
//! the sharder labels the object (after its owned objects) for the new
//! shard. A stopped shard (no longer a member of the ring state) cannot
//! answer; its objects are relabelled directly, once the membership rules
//! above have dropped it. A new object under the name of a deleted one goes
//! first to the shard the deleted one had, while that shard lives (it may
//! still be reconciling the deletion), and moves by the same handshake; the
//! sharder remembers the newest 4,096 deletions for this, in memory (a
//! sharder that took over after a deletion does not know of it). Owned objects carry their controller owner's
//! shard. Limits: a deletion that happens while an object is between
//! shards (drained, not yet relabelled), or while it is labelled for a
//! stopped shard, is seen by no shard (use a finalizer, whose removal is
//! an update the new shard sees); objects whose
//! labels are edited by hand can be reconciled twice; one label-mode
//! controller per ring.
//!
//! ```
//! use controller_runtime::sharding::config::{ShardMode, ShardingConfig};
//! let config = ShardingConfig::new("default", "widgets").mode(ShardMode::Label);
//! assert_eq!(config.shard_label(), "sharding.informer-rs.io/widgets");
//! ```

mod assignment;
pub mod config;
pub mod controller;
mod coordinator;
mod departed;
pub mod fleet;
mod label_gate;
mod labeller;
mod labels;
pub mod manifests;
pub mod membership;
mod metrics;
mod replica;
pub(crate) mod ring;
mod view;
mod wiring;

pub use labels::copy_shard_labels;
