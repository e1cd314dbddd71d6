//! Indexes that garbage collection needs: where the object with a given
//! `metadata.uid` lives, and which objects name a given uid in their
//! `metadata.ownerReferences` (its dependents). Kept by storage on every
//! write so cascading deletion never scans all objects.

use crate::storage::ObjKey;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// A resource storage key and an object key.
pub type Location = (String, ObjKey);

/// The uid and owner indexes (see the module docs).
#[derive(Debug, Default)]
pub struct OwnerIndex {
    by_uid: HashMap<String, Location>,
    dependents: HashMap<String, BTreeSet<Location>>,
}

fn uid(v: &Value) -> Option<&str> {
    v["metadata"]["uid"].as_str().filter(|u| !u.is_empty())
}

/// The owner uids an object names.
pub fn owner_uids(v: &Value) -> Vec<String> {
    v["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r["uid"].as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl OwnerIndex {
    /// Record an object stored at `res`/`key`.
    pub fn add(&mut self, res: &str, key: &ObjKey, v: &Value) {
        let loc = (res.to_string(), key.clone());
        if let Some(u) = uid(v) {
            self.by_uid.insert(u.to_string(), loc.clone());
        }
        for owner in owner_uids(v) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(loc.clone());
        }
    }

    /// Forget an object version.
    pub fn remove(&mut self, res: &str, key: &ObjKey, v: &Value) {
        let loc = (res.to_string(), key.clone());
        if let Some(u) = uid(v)
            && self.by_uid.get(u) == Some(&loc)
        {
            self.by_uid.remove(u);
        }
        for owner in owner_uids(v) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&loc);
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    /// Where the object with `uid` is stored.
    pub fn locate(&self, uid: &str) -> Option<Location> {
        self.by_uid.get(uid).cloned()
    }

    /// Objects naming `uid` as an owner.
    pub fn dependents(&self, uid: &str) -> Vec<Location> {
        self.dependents
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tracks_uids_and_dependents() {
        let mut ix = OwnerIndex::default();
        let owner = json!({"metadata": {"uid": "o1"}});
        let child = json!({"metadata": {"uid": "c1", "ownerReferences": [{"uid": "o1"}]}});
        let k = ("ns".to_string(), "child".to_string());
        ix.add("/owners", &("ns".into(), "owner".into()), &owner);
        ix.add("/children", &k, &child);
        assert_eq!(
            ix.dependents("o1"),
            vec![("/children".to_string(), k.clone())]
        );
        assert_eq!(ix.locate("c1"), Some(("/children".to_string(), k.clone())));
        ix.remove("/children", &k, &child);
        assert!(ix.dependents("o1").is_empty());
        assert!(ix.locate("c1").is_none());
    }
}
