//! Reading a resource as it was at a revision: the current objects merged
//! with the prior versions that history holds for keys written since, in key
//! order, without copying the objects. Paginated LISTs and exact-revision
//! reads use it; it stops working (410) once the revision leaves the window.

use super::{EventType, ObjKey, StorageError, Store, StoredObject};
use std::collections::BTreeMap;
use std::sync::Arc;

impl Store {
    /// Visit the objects of `res` in key order as they were at revision `at`
    /// (None: now), optionally only in namespace `ns` and only after key
    /// `after`, under the storage lock and without copying them. `visit`
    /// returns false to stop. Answers the revision read.
    pub fn scan(
        &self,
        res: &str,
        at: Option<u64>,
        ns: Option<&str>,
        after: Option<&ObjKey>,
        mut visit: impl FnMut(&ObjKey, &Arc<StoredObject>) -> bool,
    ) -> Result<u64, StorageError> {
        use std::ops::Bound;
        let st = self.state.lock();
        let rev = at.unwrap_or(st.rev);
        if rev < st.compacted {
            return Err(StorageError::Expired {
                requested: rev,
                oldest: st.compacted,
            });
        }
        if rev > st.rev {
            return Err(StorageError::TooLarge {
                requested: rev,
                current: st.rev,
            });
        }
        // State at `rev` of keys written since: the oldest later event's prev.
        let mut past: BTreeMap<&ObjKey, Option<&Arc<StoredObject>>> = BTreeMap::new();
        for ev in st.history.iter().rev().take_while(|e| e.rev > rev) {
            if &*ev.resource == res {
                let before = match ev.kind {
                    EventType::Added => None,
                    _ => ev.prev.as_ref(),
                };
                past.insert(&ev.key, before);
            }
        }
        let start = match (after, ns) {
            (Some(a), _) => (a.clone(), true),
            (None, Some(n)) => ((n.to_string(), String::new()), false),
            (None, None) => ((String::new(), String::new()), false),
        };
        let lower = if start.1 {
            Bound::Excluded(&start.0)
        } else {
            Bound::Included(&start.0)
        };
        let in_ns = |k: &ObjKey| ns.is_none_or(|n| k.0 == n);
        let empty = BTreeMap::new();
        let current = st.tables.get(res).map_or(&empty, |t| &t.objects);
        let mut cur = current
            .range::<ObjKey, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| in_ns(k))
            .peekable();
        let mut old = past
            .range::<&ObjKey, _>((lower.map(|k| k), Bound::Unbounded))
            .take_while(|(k, _)| in_ns(k))
            .peekable();
        loop {
            let next = match (cur.peek(), old.peek()) {
                (None, None) => break,
                (Some((ck, _)), Some((ok, _))) if *ck == **ok => {
                    cur.next();
                    old.next().map(|(k, v)| (*k, *v))
                }
                (Some((ck, _)), Some((ok, _))) if **ok < *ck => old.next().map(|(k, v)| (*k, *v)),
                (Some(_), _) => cur.next().map(|(k, v)| (k, Some(v))),
                (None, Some(_)) => old.next().map(|(k, v)| (*k, *v)),
            };
            if let Some((k, Some(obj))) = next
                && !visit(k, obj)
            {
                break;
            }
        }
        Ok(rev)
    }

    /// The objects of `res` exactly as they were at revision `rev`.
    #[cfg(test)]
    pub fn snapshot(
        &self,
        res: &str,
        rev: u64,
    ) -> Result<BTreeMap<ObjKey, Arc<StoredObject>>, StorageError> {
        let mut out = BTreeMap::new();
        self.scan(res, Some(rev), None, None, |k, o| {
            out.insert(k.clone(), o.clone());
            true
        })?;
        Ok(out)
    }
}
