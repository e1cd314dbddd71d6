//! What a replica knows of its ring: the current epoch and its members (from
//! the ring-state Lease), each member's acknowledged epoch (from its shard
//! Lease), and when each shard Lease was last seen to change, by this
//! replica's clock.
//!
//! Everything here is computed from Lease objects; nothing here talks to the
//! API server. The expiry rule is leader election's: a Lease expires
//! `leaseDurationSeconds` after this replica *saw* it change (the local time
//! when its change arrived), never by comparing the writer's clock with ours.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

use super::ring::Ring;

/// Label on every Lease of a ring; its value is the ring's name.
pub(crate) const RING_LABEL: &str = "sharding.informer-rs.io/ring";
/// Label telling a shard Lease (`shard`) from the ring's state (`ring`).
pub(crate) const ROLE_LABEL: &str = "sharding.informer-rs.io/role";
/// [`ROLE_LABEL`] value of a replica's shard Lease.
pub(crate) const ROLE_SHARD: &str = "shard";
/// [`ROLE_LABEL`] value of the ring-state Lease.
pub(crate) const ROLE_RING: &str = "ring";
/// Annotation of a shard Lease: the newest epoch this replica has adopted
/// and drained (it reconciles nothing the epoch does not give it).
pub(crate) const ACK_ANNOTATION: &str = "sharding.informer-rs.io/acked-epoch";
/// Annotation of the ring-state Lease: the epoch, incremented by the
/// sharder whenever the members change.
pub(crate) const EPOCH_ANNOTATION: &str = "sharding.informer-rs.io/epoch";
/// Annotation of the ring-state Lease: the members, comma-separated.
pub(crate) const MEMBERS_ANNOTATION: &str = "sharding.informer-rs.io/members";

/// One replica's view of the ring at a moment: the epoch, its members, and
/// who has acknowledged what ([`Membership::view`](super::membership::Membership::view)).
///
/// ```
/// use controller_runtime::sharding::membership::RingView;
/// let view = RingView::default(); // before the first ring state is read
/// assert_eq!(view.epoch(), 0);
/// assert!(view.members().is_empty());
/// assert!(!view.settled());
/// assert_eq!(view.owner("default/web"), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RingView {
    /// The ring-state epoch (0: no ring state yet, nobody owns anything).
    pub(crate) epoch: u64,
    /// The members of this epoch.
    pub(crate) ring: Ring,
    /// The epoch each replica has acknowledged, from the shard Leases.
    pub(crate) acks: BTreeMap<String, u64>,
}

impl RingView {
    /// The ring-state epoch (0: no ring state read yet, nobody owns
    /// anything).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The members of this epoch (replica identities), sorted.
    pub fn members(&self) -> &[String] {
        self.ring.members()
    }

    /// The epoch each replica has acknowledged, by identity.
    pub fn acks(&self) -> &BTreeMap<String, u64> {
        &self.acks
    }

    /// The member this epoch gives `shard_key` to (the key is an object's
    /// `namespace/name`, or its controller owner's).
    pub fn owner(&self, shard_key: &str) -> Option<&str> {
        self.ring.owner(shard_key)
    }

    /// Whether every member of this epoch has acknowledged it (or a later
    /// one): then no replica reconciles by an older epoch any more.
    pub fn settled(&self) -> bool {
        self.epoch > 0
            && self
                .ring
                .members()
                .iter()
                .all(|m| self.acks.get(m).is_some_and(|a| *a >= self.epoch))
    }
}

/// The epoch and members a ring-state Lease records (epoch 0 and no member
/// when the annotations are missing or unreadable).
pub(crate) fn ring_state(lease: &Lease) -> (u64, Vec<String>) {
    let annotations = lease.metadata.annotations.as_ref();
    let epoch = annotations
        .and_then(|a| a.get(EPOCH_ANNOTATION))
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    let members = annotations
        .and_then(|a| a.get(MEMBERS_ANNOTATION))
        .map(|m| {
            m.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    (epoch, members)
}

/// The epoch a shard Lease acknowledges (0 when none).
pub(crate) fn acked_epoch(lease: &Lease) -> u64 {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ACK_ANNOTATION))
        .and_then(|e| e.parse().ok())
        .unwrap_or(0)
}

fn role(lease: &Lease) -> Option<&str> {
    lease
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ROLE_LABEL))
        .map(String::as_str)
}

/// Whether `lease` is a shard Lease.
pub(crate) fn is_shard(lease: &Lease) -> bool {
    role(lease) == Some(ROLE_SHARD)
}

/// Whether `lease` is a ring-state Lease.
pub(crate) fn is_ring_state(lease: &Lease) -> bool {
    role(lease) == Some(ROLE_RING)
}

/// The part of a shard Lease whose change proves its holder alive.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pulse {
    holder: Option<String>,
    renew: Option<MicroTime>,
    duration_secs: Option<i32>,
}

impl Pulse {
    fn of(lease: &Lease) -> Pulse {
        let spec = lease.spec.as_ref();
        Pulse {
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            renew: spec.and_then(|s| s.renew_time.clone()),
            duration_secs: spec.and_then(|s| s.lease_duration_seconds),
        }
    }
}

impl Pulse {
    fn duration(&self, fallback: Duration) -> Duration {
        self.duration_secs
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(u64::from(s.unsigned_abs())))
            .unwrap_or(fallback)
    }
}

/// How many Leases seen deleted [`Observations`] remembers the expiry of.
const GONE_KEPT: usize = 256;

/// When each shard Lease was last seen to change, by the local clock, and
/// when the recently deleted ones stopped counting.
#[derive(Debug, Default)]
pub(crate) struct Observations {
    seen: HashMap<String, (Pulse, Instant)>,
    gone: HashMap<String, Gone>,
}

/// A Lease seen deleted: its last pulse, when that was seen, and when its
/// deletion was seen.
#[derive(Debug)]
struct Gone {
    pulse: Pulse,
    at: Instant,
    removed: Instant,
}

impl Pulse {
    /// When a pulse seen at `at` stops counting: at once for a released
    /// Lease, else its duration later.
    fn expiry(&self, at: Instant, fallback: Duration) -> Instant {
        if self.holder.is_none() {
            at
        } else {
            at + self.duration(fallback)
        }
    }
}

impl Observations {
    /// Records the Lease as seen at `now` (keeps the earlier time when its
    /// holder, renew time and duration did not change).
    pub(crate) fn observe(&mut self, lease: &Lease, now: Instant) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let pulse = Pulse::of(lease);
        match self.seen.get(&name) {
            Some((p, _)) if *p == pulse => {}
            _ => {
                self.gone.remove(&name);
                self.seen.insert(name, (pulse, now));
            }
        }
    }

    /// Forgets Leases not in `names` (seen deleted at `now`), remembering
    /// when each stopped counting for [`expired_at`](Self::expired_at).
    pub(crate) fn retain(&mut self, names: &BTreeSet<String>, now: Instant) {
        let gone: Vec<String> = self
            .seen
            .keys()
            .filter(|n| !names.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some((pulse, at)) = self.seen.remove(&name) {
                self.gone.insert(
                    name,
                    Gone {
                        pulse,
                        at,
                        removed: now,
                    },
                );
            }
        }
        while self.gone.len() > GONE_KEPT {
            let oldest = self
                .gone
                .iter()
                .min_by_key(|(_, g)| g.removed)
                .map(|(n, _)| n.clone());
            match oldest {
                Some(n) => self.gone.remove(&n),
                None => break,
            };
        }
    }

    /// When `name`'s Lease stopped (or stops) counting by this replica's
    /// clock: the time its last change was seen plus its duration (at once
    /// when it was released), or, for a Lease seen deleted before that, the
    /// time the deletion was seen. `None` when it was never seen (or was
    /// deleted long ago: the last 256 deletions are kept).
    pub(crate) fn expired_at(&self, name: &str, fallback: Duration) -> Option<Instant> {
        if let Some((pulse, at)) = self.seen.get(name) {
            return Some(pulse.expiry(*at, fallback));
        }
        self.gone
            .get(name)
            .map(|g| g.pulse.expiry(g.at, fallback).min(g.removed))
    }

    /// Whether `name`'s Lease is held and was seen to change within its
    /// duration (or `fallback` when it names none) before `now`.
    pub(crate) fn is_live(&self, name: &str, now: Instant, fallback: Duration) -> bool {
        self.seen.get(name).is_some_and(|(pulse, at)| {
            pulse.holder.is_some() && now < *at + pulse.duration(fallback)
        })
    }

    /// How long ago `name`'s Lease expired (released Leases count from
    /// when they were seen released); `None` while it is live or unknown.
    pub(crate) fn expired_for(
        &self,
        name: &str,
        now: Instant,
        fallback: Duration,
    ) -> Option<Duration> {
        let (pulse, at) = self.seen.get(name)?;
        now.checked_duration_since(pulse.expiry(*at, fallback))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn shard(name: &str, renew_secs: i64, ack: u64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(ROLE_LABEL.into(), ROLE_SHARD.into())])),
                annotations: Some(BTreeMap::from([(ACK_ANNOTATION.into(), ack.to_string())])),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.into()),
                lease_duration_seconds: Some(2),
                renew_time: Some(MicroTime(
                    jiff::Timestamp::from_second(renew_secs).unwrap_or_default(),
                )),
                ..Default::default()
            }),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_expires_its_duration_after_it_was_seen_to_change() {
        let mut obs = Observations::default();
        let start = Instant::now();
        obs.observe(&shard("a", 100, 0), start);
        let fallback = Duration::from_secs(15);
        assert!(obs.is_live("a", start + Duration::from_millis(1999), fallback));
        // The same renewal seen again later does not extend it.
        obs.observe(&shard("a", 100, 1), start + Duration::from_secs(1));
        assert!(!obs.is_live("a", start + Duration::from_secs(2), fallback));
        // A renewal does, from when it was seen.
        obs.observe(&shard("a", 101, 1), start + Duration::from_secs(3));
        assert!(obs.is_live("a", start + Duration::from_millis(4999), fallback));
        assert!(!obs.is_live("b", start, fallback));
        obs.retain(&BTreeSet::new(), start + Duration::from_secs(4));
        assert!(!obs.is_live("a", start + Duration::from_secs(3), fallback));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_is_the_last_change_plus_the_duration_or_the_deletion_if_earlier() {
        let mut obs = Observations::default();
        let start = Instant::now();
        let fallback = Duration::from_secs(15);
        let secs = Duration::from_secs;
        obs.observe(&shard("dies", 100, 0), start);
        obs.observe(&shard("leaves", 100, 0), start);
        obs.observe(&shard("dies", 101, 0), start + secs(1));
        assert_eq!(obs.expired_at("dies", fallback), Some(start + secs(3)));
        assert_eq!(obs.expired_at("unknown", fallback), None);
        // A released Lease stops counting when the release is seen.
        let mut released = shard("released", 100, 0);
        if let Some(spec) = released.spec.as_mut() {
            spec.holder_identity = None;
        }
        obs.observe(&released, start + secs(1));
        assert_eq!(obs.expired_at("released", fallback), Some(start + secs(1)));
        // "leaves" is deleted while live: it stopped counting then; "dies"
        // is deleted (by the sharder) after it expired: its expiry stays.
        let kept = BTreeSet::from(["dies".to_string(), "released".to_string()]);
        obs.retain(&kept, start + secs(3) / 2);
        obs.retain(&BTreeSet::new(), start + secs(10));
        assert_eq!(
            obs.expired_at("leaves", fallback),
            Some(start + secs(3) / 2)
        );
        assert_eq!(obs.expired_at("dies", fallback), Some(start + secs(3)));
        assert_eq!(obs.expired_at("released", fallback), Some(start + secs(1)));
        // A Lease of that name seen again is a new life.
        obs.observe(&shard("dies", 200, 0), start + secs(11));
        assert_eq!(obs.expired_at("dies", fallback), Some(start + secs(13)));
        // Deletions are remembered boundedly.
        for i in 0..GONE_KEPT + 10 {
            obs.observe(&shard(&format!("r{i}"), 1, 0), start + secs(12));
            obs.retain(
                &BTreeSet::new(),
                start + secs(12) + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(obs.gone.len(), GONE_KEPT);
        assert_eq!(obs.expired_at("r0", fallback), None);
    }

    #[test]
    fn ring_state_and_acks_parse_and_settle() {
        let mut state = Lease::default();
        assert_eq!(ring_state(&state), (0, vec![]));
        state.metadata.annotations = Some(BTreeMap::from([
            (EPOCH_ANNOTATION.into(), "7".into()),
            (MEMBERS_ANNOTATION.into(), "b,a,".into()),
        ]));
        let (epoch, members) = ring_state(&state);
        assert_eq!((epoch, members.clone()), (7, vec!["b".into(), "a".into()]));
        assert_eq!(acked_epoch(&shard("a", 1, 7)), 7);
        assert!(is_shard(&shard("a", 1, 7)) && !is_ring_state(&shard("a", 1, 7)));
        let mut view = RingView {
            epoch,
            ring: Ring::new(members),
            acks: BTreeMap::from([("a".into(), 7), ("b".into(), 6)]),
        };
        assert!(!view.settled());
        view.acks.insert("b".into(), 8);
        assert!(view.settled());
        assert!(!RingView::default().settled());
    }
}

/// The examples that were this module's doc tests before it became
/// crate-private.
#[cfg(test)]
mod examples {
    #[test]
    fn a_deleted_lease_stops_counting_when_seen_gone() {
        use crate::sharding::view::Observations;
        use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
        use std::collections::BTreeSet;
        use std::time::Duration;
        let mut lease = Lease::default();
        lease.metadata.name = Some("replica-a".into());
        lease.spec = Some(LeaseSpec {
            holder_identity: Some("replica-a".into()),
            lease_duration_seconds: Some(15),
            ..Default::default()
        });
        let (seen, fallback) = (tokio::time::Instant::now(), Duration::from_secs(15));
        let mut obs = Observations::default();
        obs.observe(&lease, seen);
        assert_eq!(
            obs.expired_at("replica-a", fallback),
            Some(seen + Duration::from_secs(15))
        );
        // Deleted 5 s later, before it expired: it stopped counting then.
        obs.retain(&BTreeSet::new(), seen + Duration::from_secs(5));
        assert_eq!(
            obs.expired_at("replica-a", fallback),
            Some(seen + Duration::from_secs(5))
        );
    }
}
