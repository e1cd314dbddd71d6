use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("ns-{}/object-{i}", i % 7)).collect()
}

fn members(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("replica-{i}")).collect()
}

#[test]
fn the_hash_is_pinned_across_releases() {
    // XXH3-64 of these inputs per the xxHash specification: a hash change
    // would reassign every object of every running deployment.
    assert_eq!(stable_hash(""), 0x2d06_8005_38d3_94c2);
    // Pinned from a first run: the owners any deployment computes today
    // must be the ones it computes after an upgrade.
    assert_eq!(stable_hash("default/web"), 0xcdf5_453c_6b8e_2813);
    let ring = Ring::new(["a", "b", "c"]);
    let owners: Vec<&str> = (0..8)
        .map(|i| ring.owner(&format!("k{i}")).unwrap_or_default())
        .collect();
    assert_eq!(owners, ["b", "c", "a", "a", "c", "b", "c", "c"]);
    assert_eq!(ring.owner("default/web"), Some("b"));
}

#[test]
fn an_empty_ring_owns_nothing() {
    let ring = Ring::default();
    assert!(ring.is_empty());
    assert_eq!(ring.owner("default/web"), None);
    assert!(!ring.owns("a", "default/web"));
}

#[test]
fn shares_are_close_to_one_nth() {
    let ring = Ring::new(members(4));
    let ks = keys(20_000);
    for m in ring.members() {
        let share = ks.iter().filter(|k| ring.owns(m, k)).count() as f64 / ks.len() as f64;
        assert!(
            (0.15..0.35).contains(&share),
            "{m} owns {share:.3} of the keys, expected about 0.25"
        );
    }
}

#[test]
fn object_key_of_a_cluster_scoped_owner_has_no_namespace() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    let meta = ObjectMeta {
        namespace: Some("default".into()),
        name: Some("child".into()),
        owner_references: Some(vec![
            OwnerReference {
                name: "not-the-controller".into(),
                ..Default::default()
            },
            OwnerReference {
                name: "node-1".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    assert_eq!(object_key(&meta, false), "node-1");
    assert_eq!(object_key(&meta, true), "default/node-1");
    let cluster = ObjectMeta {
        name: Some("node-2".into()),
        namespace: Some(String::new()),
        ..Default::default()
    };
    assert_eq!(object_key(&cluster, true), "node-2");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every key has exactly one owner, a member; the owner does not
    /// depend on the order the members were given in.
    #[test]
    fn every_key_has_one_owner_and_order_does_not_matter(
        n in 1usize..8,
        rotate in 0usize..8,
        key_seed in 0u32..1000,
    ) {
        let ms = members(n);
        let mut shuffled = ms.clone();
        shuffled.rotate_left(rotate % n);
        shuffled.reverse();
        let a = Ring::new(ms.clone());
        let b = Ring::new(shuffled);
        for i in 0..200 {
            let key = format!("ns/{key_seed}-{i}");
            let owner = a.owner(&key);
            prop_assert!(owner.is_some());
            let owner = owner.unwrap_or_default();
            prop_assert!(ms.iter().any(|m| m == owner));
            prop_assert_eq!(ms.iter().filter(|m| a.owns(m, &key)).count(), 1);
            prop_assert_eq!(b.owner(&key), Some(owner));
        }
    }

    /// Adding a member moves about 1/(N+1) of the keys, every one of them
    /// to the new member.
    #[test]
    fn adding_a_member_moves_about_one_nth_to_it(n in 1usize..8) {
        let before = Ring::new(members(n));
        let mut grown = members(n);
        grown.push("newcomer".into());
        let after = Ring::new(grown);
        let ks = keys(4_000);
        let mut moved = 0usize;
        for k in &ks {
            let (old, new) = (before.owner(k), after.owner(k));
            if old != new {
                moved += 1;
                prop_assert_eq!(new, Some("newcomer"));
            }
        }
        let expected = ks.len() as f64 / (n as f64 + 1.0);
        let moved = moved as f64;
        prop_assert!(
            moved > 0.6 * expected && moved < 1.45 * expected,
            "moved {} of {} keys, expected about {:.0}", moved, ks.len(), expected
        );
    }

    /// Removing a member moves its keys and only its keys.
    #[test]
    fn removing_a_member_moves_only_its_keys(n in 2usize..8, gone in 0usize..8) {
        let ms = members(n);
        let gone = ms[gone % n].clone();
        let before = Ring::new(ms.clone());
        let after = Ring::new(ms.iter().filter(|m| **m != gone).cloned());
        let mut moved = 0usize;
        let ks = keys(4_000);
        for k in &ks {
            let (old, new) = (before.owner(k), after.owner(k));
            if old == Some(gone.as_str()) {
                moved += 1;
                prop_assert_ne!(new, Some(gone.as_str()));
            } else {
                prop_assert_eq!(old, new);
            }
        }
        let expected = ks.len() as f64 / n as f64;
        prop_assert!(moved as f64 > 0.6 * expected && (moved as f64) < 1.45 * expected);
    }

    /// Owners are a function of the member set alone: building the ring
    /// twice, or from a set with duplicates, gives the same owners.
    #[test]
    fn deterministic(ms in proptest::collection::btree_set("[a-z]{1,6}", 1..6)) {
        let ms: BTreeSet<String> = ms;
        let once = Ring::new(ms.iter().cloned());
        let twice = Ring::new(ms.iter().chain(ms.iter()).cloned());
        prop_assert_eq!(&once, &twice);
        for k in keys(100) {
            prop_assert_eq!(once.owner(&k), twice.owner(&k));
        }
    }
}
