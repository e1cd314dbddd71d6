//! One page of a paginated LIST, read from the snapshot its continue token
//! names, at a cost proportional to the page rather than to the collection.
//!
//! A page needs two things beyond its own objects: whether more follow, and
//! (for lists without selectors) how many, for `remainingItemCount`. Finding
//! "more" stops at the first object past the page. The count is remembered
//! per unfinished list (resource, revision, namespace, last key): the next
//! page of the same snapshot subtracts its own length instead of walking the
//! rest of the collection again. Only a list's first page (or a page whose
//! count was forgotten) walks the keys after it, as etcd's range count does.

use super::{ObjKey, StorageError, Store, StoredObject};
use std::collections::VecDeque;
use std::sync::Arc;

/// How many unfinished lists' counts are remembered (oldest forgotten first).
const REMEMBERED: usize = 64;

/// What one remembered count is about: the objects of `res` in `ns` after
/// `after`, in the snapshot at `rev`.
#[derive(Debug, PartialEq, Eq)]
struct CountKey {
    res: String,
    rev: u64,
    ns: Option<String>,
    after: ObjKey,
}

/// Remaining-object counts of unfinished paginated lists, newest last.
#[derive(Debug, Default)]
pub(super) struct PageCounts(VecDeque<(CountKey, usize)>);

impl PageCounts {
    fn get(&self, key: &CountKey) -> Option<usize> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, n)| *n)
    }

    fn put(&mut self, key: CountKey, remaining: usize) {
        if self.get(&key).is_some() {
            return;
        }
        if self.0.len() >= REMEMBERED {
            self.0.pop_front();
        }
        self.0.push_back((key, remaining));
    }
}

/// Which page to read.
#[derive(Debug, Clone, Copy)]
pub struct PageRequest<'a> {
    /// Storage key of the resource.
    pub res: &'a str,
    /// The snapshot's revision (None: now).
    pub at: Option<u64>,
    /// Only this namespace.
    pub ns: Option<&'a str>,
    /// Start after this key (from the continue token).
    pub after: Option<&'a ObjKey>,
    /// Most objects in the page; 0 for all.
    pub limit: usize,
    /// Count the objects after the page. Only for lists whose filter keeps
    /// every object of the namespace (no selectors): the count is of keys.
    pub count_remaining: bool,
}

/// One page read by [`Store::list_page`].
#[derive(Debug)]
pub struct Page {
    /// The snapshot's revision.
    pub rev: u64,
    /// The matching objects, in key order.
    pub items: Vec<Arc<StoredObject>>,
    /// The key of the last object in `items`.
    pub last: Option<ObjKey>,
    /// Whether objects follow the page.
    pub more: bool,
    /// How many objects follow the page (when counted, else 0).
    pub remaining: usize,
}

impl Store {
    /// Reads one page of `req.res` as of `req.at`: up to `req.limit`
    /// objects for which `matches` holds, whether more follow and, with
    /// `count_remaining`, how many. Under the storage lock, copying no
    /// objects.
    pub fn list_page(
        &self,
        req: &PageRequest<'_>,
        mut matches: impl FnMut(&StoredObject) -> bool,
    ) -> Result<Page, StorageError> {
        let count_key = |rev: u64, after: &ObjKey| CountKey {
            res: req.res.to_owned(),
            rev,
            ns: req.ns.map(str::to_owned),
            after: after.clone(),
        };
        let known = match (req.count_remaining, req.at, req.after) {
            (true, Some(rev), Some(after)) => self.page_counts.lock().get(&count_key(rev, after)),
            _ => None,
        };
        let full = |n: usize| req.limit > 0 && n >= req.limit;
        let mut items: Vec<Arc<StoredObject>> = Vec::new();
        let mut last: Option<ObjKey> = None;
        let (mut more, mut remaining) = (false, 0usize);
        let rev = self.scan(req.res, req.at, req.ns, req.after, |k, obj| {
            if !full(items.len()) {
                if matches(obj) {
                    items.push(Arc::clone(obj));
                    last = Some(k.clone());
                }
                return true;
            }
            if req.count_remaining {
                more = true;
                remaining += 1;
                // With the count known, the first object past the page is enough.
                known.is_none()
            } else if matches(obj) {
                more = true;
                false
            } else {
                true
            }
        })?;
        if let (true, Some(total)) = (more, known) {
            remaining = total.saturating_sub(items.len());
        }
        if let (true, true, Some(last)) = (more, req.count_remaining, &last) {
            self.page_counts.lock().put(count_key(rev, last), remaining);
        }
        Ok(Page {
            rev,
            items,
            last,
            more,
            remaining,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store(names: usize) -> Store {
        let s = Store::new(1000, 100);
        for i in 0..names {
            let name = format!("o{i:03}");
            let o = json!({"metadata": {"name": name, "namespace": "n"}, "data": {"i": i}});
            s.txn(|t| t.put("/configmaps", ("n".into(), name.clone()), o));
        }
        s
    }

    /// Pages through everything; returns (names per page, remaining per page).
    fn pages(s: &Store, limit: usize, count: bool) -> (Vec<Vec<String>>, Vec<usize>) {
        let (mut names, mut counts) = (Vec::new(), Vec::new());
        let (mut at, mut after) = (None, None::<ObjKey>);
        loop {
            let req = PageRequest {
                res: "/configmaps",
                at,
                ns: Some("n"),
                after: after.as_ref(),
                limit,
                count_remaining: count,
            };
            let page = s.list_page(&req, |_| true).unwrap();
            names.push(
                page.items
                    .iter()
                    .map(|o| o.meta()["name"].as_str().unwrap().to_owned())
                    .collect(),
            );
            counts.push(page.remaining);
            if !page.more {
                return (names, counts);
            }
            at = Some(page.rev);
            after = page.last;
        }
    }

    #[test]
    fn pages_cover_the_snapshot_once_with_exact_remaining_counts() {
        let s = store(10);
        let (names, counts) = pages(&s, 4, true);
        assert_eq!(names.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 2]);
        assert_eq!(names[2], ["o008", "o009"]);
        assert_eq!(counts, [6, 2, 0]);
        // The later pages used the remembered count (the first walked the rest).
        assert_eq!(s.page_counts.lock().0.len(), 2);
    }

    #[test]
    fn a_forgotten_count_is_walked_again_to_the_same_answer() {
        let s = store(10);
        let first = s
            .list_page(
                &PageRequest {
                    res: "/configmaps",
                    at: None,
                    ns: Some("n"),
                    after: None,
                    limit: 3,
                    count_remaining: true,
                },
                |_| true,
            )
            .unwrap();
        s.page_counts.lock().0.clear();
        let second = s
            .list_page(
                &PageRequest {
                    res: "/configmaps",
                    at: Some(first.rev),
                    ns: Some("n"),
                    after: first.last.as_ref(),
                    limit: 3,
                    count_remaining: true,
                },
                |_| true,
            )
            .unwrap();
        assert_eq!((first.remaining, second.remaining), (7, 4));
    }

    #[test]
    fn counts_follow_the_snapshot_not_later_writes() {
        let s = store(6);
        let req = PageRequest {
            res: "/configmaps",
            at: None,
            ns: Some("n"),
            after: None,
            limit: 2,
            count_remaining: true,
        };
        let first = s.list_page(&req, |_| true).unwrap();
        assert_eq!(first.remaining, 4);
        s.txn(|t| t.remove("/configmaps", &("n".into(), "o005".into()), json!({})));
        let next = s
            .list_page(
                &PageRequest {
                    at: Some(first.rev),
                    after: first.last.as_ref(),
                    ..req
                },
                |_| true,
            )
            .unwrap();
        assert_eq!((next.items.len(), next.remaining), (2, 2));
    }

    #[test]
    fn without_counting_a_page_stops_at_the_next_match() {
        let s = store(10);
        let even = |o: &StoredObject| o.value["data"]["i"].as_u64().unwrap().is_multiple_of(2);
        let req = PageRequest {
            res: "/configmaps",
            at: None,
            ns: Some("n"),
            after: None,
            limit: 2,
            count_remaining: false,
        };
        let page = s.list_page(&req, even).unwrap();
        assert_eq!(page.items.len(), 2);
        assert!(page.more);
        assert_eq!(page.remaining, 0);
        let last = s
            .list_page(
                &PageRequest {
                    at: Some(page.rev),
                    after: Some(&("n".into(), "o007".into())),
                    ..req
                },
                even,
            )
            .unwrap();
        assert_eq!(last.items.len(), 1);
        assert!(!last.more);
        let all = s
            .list_page(&PageRequest { limit: 0, ..req }, |_| true)
            .unwrap();
        assert_eq!((all.items.len(), all.more), (10, false));
    }
}
