//! Sharding metrics, registered in the manager's registry for each sharded
//! controller (label `controller`), read from the gates and the sharder's
//! counters when scraped:
//!
//! | metric | kind | mode | meaning |
//! |---|---|---|---|
//! | `sharding_owned_objects` | gauge | both | objects of the sharded kind this replica owns now |
//! | `sharding_epoch` | gauge | both | the ring epoch this replica acts on |
//! | `sharding_requests_dropped_total` | counter | both | requests not reconciled: another shard's |
//! | `sharding_requests_parked_total` | counter | filter | requests held until a handover settled |
//! | `sharding_keys_moved_in_total` | counter | filter | keys queued because they moved to this replica |
//! | `sharding_epochs_acknowledged_total` | counter | filter | epochs this controller acknowledged |
//! | `sharding_drains_acknowledged_total` | counter | label | objects this replica let go of |
//! | `sharding_objects` | gauge, `shard` | label, sharder | objects per shard label at the sharder's last look |
//! | `sharding_moves_total` | counter | label, sharder | objects relabelled to a new shard |
//! | `sharding_drains_total` | counter | label, sharder | drains asked for |
//! | `sharding_assigned_total` | counter | label, sharder | new objects labelled |
//! | `sharding_reassign_seconds` | histogram, `mode` | both | time to reassign a stopped shard's objects, from its Lease expiry; see below |
//!
//! # Time to reassign
//!
//! `sharding_reassign_seconds` is one family for both modes, told apart by
//! its `mode` label (`filter` or `label`), because it answers one question
//! in both: how long after a shard stopped counting were its objects
//! reconcilable elsewhere. Where it is measured follows from where that
//! moment happens:
//!
//! - **filter** (every replica): from the stopped member's Lease expiry to
//!   the moment this replica's gate saw the first epoch without it settled
//!   and queued the keys that moved in. From then on the keys the member
//!   held that are this replica's are admitted here (the queued ones
//!   reconcile as the workqueue reaches them). One observation per stopped
//!   member and sharded controller on each replica that saw it in an
//!   epoch it settled, whether or not any key moved to it: a scrape of N-1
//!   survivors shows N-1 observations for one death. Acknowledging the
//!   new epoch is not the moment: a replica acknowledges before the others
//!   have, and only the settled epoch lets it reconcile what it gained.
//! - **label** (the sharder only): from the stopped shard's Lease expiry to
//!   the sharder's look that relabelled its last object (the new shards'
//!   caches receive each object as it is relabelled). One observation per
//!   stopped shard.
//!
//! The expiry is the ring's own ([`Observations::expired_at`]): the local
//! time this replica saw the Lease's last change plus its
//! `leaseDurationSeconds`, never the writer's `renewTime` against this
//! replica's clock (so clock skew cannot make it negative, and it is the
//! instant from which the sharder may drop the member). For a Lease deleted
//! before it expired (a graceful stop) it is the time the deletion was
//! seen. A value is clamped at 0 (this replica may have seen the last
//! renewal later than the sharder did).
//!
//! [`Observations::expired_at`]: super::view::Observations::expired_at

use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, IntGaugeVec, Opts};
use tokio::time::Instant;

use super::assignment::GateStats;
use super::label_gate::LabelGate;
use super::labeller::LabelCounters;
use super::membership::Membership;
use super::ring::Ring;
use crate::manager::Manager;

/// Where a controller's figures come from.
pub(super) enum Source {
    Ring {
        /// The gate's counters (of a gate over any kind of request).
        stats: Box<dyn Fn() -> GateStats + Send + Sync>,
        owned: Box<dyn Fn(&Ring) -> usize + Send + Sync>,
        reassign: ReassignTimes,
    },
    Label {
        gate: Arc<LabelGate>,
        counters: Arc<LabelCounters>,
        owned: Box<dyn Fn() -> usize + Send + Sync>,
    },
}

/// Filter mode's times to reassign, recorded by the gate's departures
/// and observed at the next scrape.
#[derive(Clone, Default)]
pub(super) struct ReassignTimes(Arc<Mutex<Vec<f64>>>);

impl ReassignTimes {
    /// Records, for each member in `gone`, the seconds from its Lease
    /// expiry (by `membership`'s observations) to now. A member whose
    /// Lease this replica never saw is skipped.
    pub(super) fn record(&self, membership: &Membership, gone: &[String]) {
        let now = Instant::now();
        for member in gone {
            match membership.expired_at(member) {
                Some(expired) => self
                    .0
                    .lock()
                    .push(now.saturating_duration_since(expired).as_secs_f64()),
                None => tracing::debug!(%member, "no expiry known; time to reassign not observed"),
            }
        }
    }

    fn drain(&self) -> Vec<f64> {
        std::mem::take(&mut *self.0.lock())
    }
}

struct Families {
    owned: IntGauge,
    epoch: IntGauge,
    dropped: IntCounter,
    parked: IntCounter,
    moved_in: IntCounter,
    acknowledged: IntCounter,
    released: IntCounter,
    per_shard: IntGaugeVec,
    moves: IntCounter,
    drains: IntCounter,
    assigned: IntCounter,
    reassign: Histogram,
}

/// The collector of one sharded controller.
pub(super) struct ShardMetrics {
    membership: Membership,
    source: Source,
    families: Families,
}

fn opts(name: &str, help: &str, controller: &str) -> Opts {
    Opts::new(name, help).const_label("controller", controller)
}

impl Families {
    fn new(controller: &str, mode: &str) -> prometheus::Result<Families> {
        let c = |name: &str, help: &str| IntCounter::with_opts(opts(name, help, controller));
        let g = |name: &str, help: &str| IntGauge::with_opts(opts(name, help, controller));
        Ok(Families {
            owned: g(
                "sharding_owned_objects",
                "Objects of the sharded kind this replica owns now.",
            )?,
            epoch: g("sharding_epoch", "The ring epoch this replica acts on.")?,
            dropped: c(
                "sharding_requests_dropped_total",
                "Requests not reconciled because another shard owns them.",
            )?,
            parked: c(
                "sharding_requests_parked_total",
                "Requests held until a handover settled (filter mode).",
            )?,
            moved_in: c(
                "sharding_keys_moved_in_total",
                "Keys queued because they moved to this replica (filter mode).",
            )?,
            acknowledged: c(
                "sharding_epochs_acknowledged_total",
                "Ring epochs this controller acknowledged (filter mode).",
            )?,
            released: c(
                "sharding_drains_acknowledged_total",
                "Objects this replica let go of after a drain (label mode).",
            )?,
            per_shard: IntGaugeVec::new(
                opts(
                    "sharding_objects",
                    "Objects per shard label at the sharder's last look (label mode, sharder only).",
                    controller,
                ),
                &["shard"],
            )?,
            moves: c(
                "sharding_moves_total",
                "Objects the sharder relabelled to a new shard (label mode).",
            )?,
            drains: c(
                "sharding_drains_total",
                "Drains the sharder asked for (label mode).",
            )?,
            assigned: c(
                "sharding_assigned_total",
                "New objects the sharder labelled (label mode).",
            )?,
            reassign: Histogram::with_opts(
                HistogramOpts::new(
                    "sharding_reassign_seconds",
                    "From a stopped shard's Lease expiry until its objects can be reconciled \
                     elsewhere: queued on this replica (mode filter, every replica) or all \
                     relabelled (mode label, sharder only).",
                )
                .const_label("controller", controller)
                .const_label("mode", mode)
                .buckets(vec![
                    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
                ]),
            )?,
        })
    }

    fn collectors(&self) -> [&dyn Collector; 12] {
        [
            &self.owned,
            &self.epoch,
            &self.dropped,
            &self.parked,
            &self.moved_in,
            &self.acknowledged,
            &self.released,
            &self.per_shard,
            &self.moves,
            &self.drains,
            &self.assigned,
            &self.reassign,
        ]
    }
}

/// Raises `counter` to `value` (counters only grow).
fn catch_up(counter: &IntCounter, value: u64) {
    let now = counter.get();
    if value > now {
        counter.inc_by(value - now);
    }
}

fn gauge(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl ShardMetrics {
    /// Registers the metrics of `controller` in `mgr`'s registry (a
    /// failure is logged: metrics never stop a controller).
    pub(super) fn register(
        mgr: &Manager,
        controller: &str,
        membership: &Membership,
        source: Source,
    ) {
        let mode = match &source {
            Source::Ring { .. } => "filter",
            Source::Label { .. } => "label",
        };
        let families = match Families::new(controller, mode) {
            Ok(f) => f,
            Err(error) => {
                tracing::warn!(%error, controller, "sharding metrics not created");
                return;
            }
        };
        let collector = ShardMetrics {
            membership: membership.clone(),
            source,
            families,
        };
        if let Err(error) = mgr.metrics().register(Box::new(collector)) {
            tracing::warn!(%error, controller, "sharding metrics not registered");
        }
    }

    fn update(&self) {
        let f = &self.families;
        let view = self.membership.view();
        f.epoch.set(i64::try_from(view.epoch).unwrap_or(i64::MAX));
        match &self.source {
            Source::Ring {
                stats,
                owned,
                reassign,
            } => {
                let stats = stats();
                f.owned.set(gauge(owned(&view.ring)));
                catch_up(&f.dropped, stats.dropped);
                catch_up(&f.parked, stats.parked);
                catch_up(&f.moved_in, stats.moved_in);
                catch_up(&f.acknowledged, stats.acknowledged);
                for seconds in reassign.drain() {
                    f.reassign.observe(seconds);
                }
            }
            Source::Label {
                gate,
                counters,
                owned,
            } => {
                let stats = gate.stats();
                f.owned.set(gauge(owned()));
                catch_up(&f.dropped, stats.dropped);
                catch_up(&f.released, stats.released);
                catch_up(&f.moves, counters.moves.load(Ordering::Relaxed));
                catch_up(&f.drains, counters.drains.load(Ordering::Relaxed));
                catch_up(&f.assigned, counters.assigned.load(Ordering::Relaxed));
                f.per_shard.reset();
                if self.membership.is_sharder() {
                    for (shard, n) in counters.per_shard.lock().iter() {
                        f.per_shard
                            .with_label_values(&[shard.as_str()])
                            .set(i64::try_from(*n).unwrap_or(i64::MAX));
                    }
                }
                for seconds in counters.reassign_seconds.lock().drain(..) {
                    f.reassign.observe(seconds);
                }
            }
        }
    }
}

impl Collector for ShardMetrics {
    fn desc(&self) -> Vec<&Desc> {
        self.families
            .collectors()
            .into_iter()
            .flat_map(|c| c.desc())
            .collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.update();
        self.families
            .collectors()
            .into_iter()
            .flat_map(|c| c.collect())
            .collect()
    }
}
