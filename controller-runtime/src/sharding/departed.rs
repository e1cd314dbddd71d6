//! Label mode: the shards of recently deleted objects, kept by the sharder
//! so that an object created again under the same key goes back to the
//! shard that had it.
//!
//! Without this, a key deleted while labelled for shard A and created
//! again at once while the ring gives it to B would be labelled straight
//! for B, and B could reconcile it while A still reconciles the deletion:
//! two replicas on one key. The sharder records the shard of each deleted
//! object (from its metadata cache's delete notifications); when an
//! unlabelled object shows up under a recorded key whose shard is still a
//! live member, it labels it for that shard, and the ordinary drain
//! handshake then moves it to B once A has nothing of the key in flight.
//!
//! What is kept is bounded: the newest [`CAPACITY`] deletions, each
//! dropped once its key comes back or its shard leaves the ring. Limits:
//! a sharder that took over after the deletion has no record of it, and a
//! key created again after `CAPACITY` later deletions is labelled by the
//! ring alone.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// How many deletions are remembered at most.
pub(super) const CAPACITY: usize = 4096;

/// The shards of recently deleted objects, by shard key.
#[derive(Debug, Default)]
pub(super) struct Departed {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Key -> (shard, the record's sequence number).
    shards: HashMap<String, (String, u64)>,
    /// Keys in recording order, with the sequence number recorded; an
    /// entry whose number no longer matches `shards` is stale.
    order: VecDeque<(String, u64)>,
    next: u64,
}

impl Departed {
    /// Records that the object under `key`, labelled for `shard`, was
    /// deleted.
    pub(super) fn record(&self, key: String, shard: String) {
        let mut inner = self.inner.lock();
        let seq = inner.next;
        inner.next += 1;
        inner.order.push_back((key.clone(), seq));
        inner.shards.insert(key, (shard, seq));
        while inner.shards.len() > CAPACITY {
            let Some((old, old_seq)) = inner.order.pop_front() else {
                break;
            };
            if inner.shards.get(&old).is_some_and(|(_, s)| *s == old_seq) {
                inner.shards.remove(&old);
            }
        }
        // Stale entries (keys taken or recorded again) are bounded too.
        if inner.order.len() > 2 * CAPACITY {
            let Inner { shards, order, .. } = &mut *inner;
            order.retain(|(k, s)| shards.get(k).is_some_and(|(_, cur)| cur == s));
        }
    }

    /// The shard the last deleted object under `key` had.
    pub(super) fn get(&self, key: &str) -> Option<String> {
        self.inner
            .lock()
            .shards
            .get(key)
            .map(|(shard, _)| shard.clone())
    }

    /// The shard the last deleted object under `key` had, forgetting it.
    pub(super) fn take(&self, key: &str) -> Option<String> {
        self.inner.lock().shards.remove(key).map(|(shard, _)| shard)
    }

    /// Forgets deletions whose shard is not in `members` (stopped shards
    /// reconcile nothing).
    pub(super) fn retain_members(&self, members: &[String]) {
        let mut inner = self.inner.lock();
        inner.shards.retain(|_, (shard, _)| members.contains(shard));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().shards.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_key_is_taken_once() {
        let d = Departed::default();
        d.record("ns/a".into(), "r1".into());
        assert_eq!(d.take("ns/a").as_deref(), Some("r1"));
        assert_eq!(d.take("ns/a"), None);
        assert_eq!(d.take("ns/b"), None);
    }

    #[test]
    fn the_newest_deletion_of_a_key_wins() {
        let d = Departed::default();
        d.record("ns/a".into(), "r1".into());
        d.record("ns/a".into(), "r2".into());
        assert_eq!(d.take("ns/a").as_deref(), Some("r2"));
    }

    #[test]
    fn stopped_shards_are_forgotten() {
        let d = Departed::default();
        d.record("ns/a".into(), "r1".into());
        d.record("ns/b".into(), "r2".into());
        d.retain_members(&["r2".to_string()]);
        assert_eq!(d.take("ns/a"), None);
        assert_eq!(d.take("ns/b").as_deref(), Some("r2"));
    }

    #[test]
    fn only_the_newest_deletions_are_kept() {
        let d = Departed::default();
        for i in 0..CAPACITY + 10 {
            d.record(format!("ns/{i}"), "r1".into());
        }
        assert_eq!(d.len(), CAPACITY);
        assert_eq!(d.take("ns/0"), None, "the oldest went first");
        assert_eq!(
            d.take(&format!("ns/{}", CAPACITY + 9)).as_deref(),
            Some("r1")
        );
        // Re-recording one key many times keeps the bookkeeping bounded.
        for _ in 0..4 * CAPACITY {
            d.record("ns/x".into(), "r1".into());
        }
        assert!(d.inner.lock().order.len() <= 2 * CAPACITY + 1);
        assert_eq!(d.take("ns/x").as_deref(), Some("r1"));
    }
}
