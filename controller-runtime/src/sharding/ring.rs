//! The consistent hash ring: which member (shard) owns which key.
//!
//! Each member is placed on a 64-bit circle at [`Ring::DEFAULT_VIRTUAL_NODES`]
//! points (virtual nodes); a key belongs to the member of the first point at
//! or after the key's own hash, wrapping around. Adding a member takes over
//! only the arcs in front of its new points, about `1/(N+1)` of the keys, all
//! of them to the new member; removing one hands only its own keys to the
//! others. Virtual nodes spread each member's share over many small arcs, so
//! shares stay close to `1/N`.
//!
//! Every replica computes owners on its own, so the hash must give the same
//! value in every process, on every platform and in every release: it is
//! XXH3 (64-bit, seed 0) from `xxhash-rust`, whose output is fixed by the
//! xxHash specification. std's `RandomState` (seeded per process) and
//! `DefaultHasher` (whose algorithm may change between Rust releases) would
//! make two replicas disagree. A test pins known hash values.
//!
//! The key of an object is `namespace/name` (or `name` when cluster-scoped):
//! [`object_key`] uses its controller owner's instead when it has one, so
//! that an owner and everything it owns land on one shard, the same shard
//! that reconciles the owner's requests.
//!
//! This module is pure data: it sits at the bottom of the sharding layer and
//! knows nothing of leases, informers or queues.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use xxhash_rust::xxh3::xxh3_64;

/// The stable 64-bit hash of a key or a virtual node's label (XXH3, seed 0).
pub(crate) fn stable_hash(s: &str) -> u64 {
    xxh3_64(s.as_bytes())
}

/// The shard key of an object: its controller owner's `namespace/name` when
/// it has a controller owner reference, its own otherwise (`name` alone when
/// cluster-scoped). `owner_namespaced` says whether the owners' kind is
/// namespaced (a namespaced owner lives in its dependent's namespace; a
/// cluster-scoped owner has none).
pub(crate) fn object_key(meta: &ObjectMeta, owner_namespaced: bool) -> String {
    let namespace = meta.namespace.as_deref().filter(|ns| !ns.is_empty());
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    match owner {
        Some(owner) => match namespace.filter(|_| owner_namespaced) {
            Some(ns) => format!("{ns}/{}", owner.name),
            None => owner.name.clone(),
        },
        None => {
            let name = meta.name.as_deref().unwrap_or_default();
            match namespace {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_string(),
            }
        }
    }
}

/// A consistent hash ring over a set of members; see the [module
/// documentation](self). Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    /// Sorted member names, deduplicated.
    members: Arc<[String]>,
    /// `(point, index into members)`, sorted by point then member.
    points: Arc<[(u64, u32)]>,
}

impl Default for Ring {
    fn default() -> Self {
        Ring::new(std::iter::empty::<String>())
    }
}

impl Ring {
    /// Virtual nodes per member unless another count is given.
    pub const DEFAULT_VIRTUAL_NODES: u32 = 128;

    /// A ring of `members` with [`Ring::DEFAULT_VIRTUAL_NODES`] each. Order
    /// and duplicates do not matter.
    pub fn new<S: Into<String>>(members: impl IntoIterator<Item = S>) -> Ring {
        Ring::with_virtual_nodes(members, Ring::DEFAULT_VIRTUAL_NODES)
    }

    /// A ring of `members` with `virtual_nodes` points each (at least one).
    pub fn with_virtual_nodes<S: Into<String>>(
        members: impl IntoIterator<Item = S>,
        virtual_nodes: u32,
    ) -> Ring {
        let mut names: Vec<String> = members.into_iter().map(Into::into).collect();
        names.sort();
        names.dedup();
        let vnodes = virtual_nodes.max(1);
        let mut points = Vec::with_capacity(names.len() * vnodes as usize);
        for (index, name) in names.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            for v in 0..vnodes {
                // A NUL cannot appear in a Lease name, so "name\0v" labels
                // never collide across members.
                points.push((stable_hash(&format!("{name}\0{v}")), index));
            }
        }
        // Two members on one point (a 64-bit collision): the smaller name
        // comes first and wins, the same everywhere.
        points.sort_unstable();
        Ring {
            members: names.into(),
            points: points.into(),
        }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// Whether `member` is on the ring.
    pub fn contains(&self, member: &str) -> bool {
        self.members
            .binary_search_by(|m| m.as_str().cmp(member))
            .is_ok()
    }

    /// Whether the ring has no member (then no key has an owner).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member that owns `key`, `None` on an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.owner_of_hash(stable_hash(key))
    }

    /// The member that owns a key whose [`stable_hash`] is `hash`.
    pub fn owner_of_hash(&self, hash: u64) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let at = self.points.partition_point(|(p, _)| *p < hash);
        let (_, index) = self.points.get(at).unwrap_or(&self.points[0]);
        self.members.get(*index as usize).map(String::as_str)
    }

    /// Whether `member` owns `key`.
    pub fn owns(&self, member: &str, key: &str) -> bool {
        self.owner(key) == Some(member)
    }
}

#[cfg(test)]
mod tests;

/// The examples that were this module's doc tests before it became
/// crate-private.
#[cfg(test)]
mod examples {
    #[test]
    fn owners_agree_whatever_the_member_order() {
        use crate::sharding::ring::Ring;
        let ring = Ring::new(["replica-a", "replica-b", "replica-c"]);
        let owner = ring.owner("default/web").unwrap();
        assert!(ring.members().iter().any(|m| m == owner));
        // Any replica computing the ring from the same members agrees.
        assert_eq!(
            Ring::new(["replica-c", "replica-a", "replica-b"]).owner("default/web"),
            Some(owner)
        );
    }

    #[test]
    fn stable_hash_is_pinned() {
        use crate::sharding::ring::stable_hash;
        assert_eq!(stable_hash(""), 0x2d06_8005_38d3_94c2);
    }

    #[test]
    fn object_key_is_the_controller_owners() {
        use crate::sharding::ring::object_key;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let mut meta = ObjectMeta {
            namespace: Some("default".into()),
            name: Some("web-abc12".into()),
            ..Default::default()
        };
        assert_eq!(object_key(&meta, true), "default/web-abc12");
        meta.owner_references = Some(vec![OwnerReference {
            name: "web".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        assert_eq!(object_key(&meta, true), "default/web");
    }

    #[test]
    fn members_are_sorted_once_each() {
        use crate::sharding::ring::Ring;
        assert_eq!(Ring::new(["b", "a", "b"]).members(), ["a", "b"]);
    }

    #[test]
    fn zero_virtual_nodes_still_give_an_owner() {
        use crate::sharding::ring::Ring;
        let ring = Ring::with_virtual_nodes(["a"], 0);
        assert_eq!(ring.owner("anything"), Some("a"));
    }

    #[test]
    fn contains_a_member() {
        use crate::sharding::ring::Ring;
        assert!(Ring::new(["a"]).contains("a"));
    }
}
