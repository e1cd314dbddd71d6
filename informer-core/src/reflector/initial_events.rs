//! The initial state of a streaming list (a WATCH with
//! `sendInitialEvents=true`), collected up to the initial-events-end
//! bookmark.
//!
//! A store that takes a LIST page by page (a DeltaFIFO) gets the streamed
//! objects the same way: in pages, as they arrive, so the informer applies
//! them while the rest is still coming and no whole copy of the state is
//! held beside the cache. Any other store gets one `replace` at the end.

use std::collections::HashMap;

use kube_core::Resource;

use super::ReflectorStore;
use crate::key::object_key;

/// Where the objects of the initial events go until the end bookmark.
pub(super) enum InitialEvents<K> {
    /// Kept by key, handed over in one `replace_prepared` at the end.
    Whole(HashMap<String, K>),
    /// Handed to the store in pages of `size` as they fill.
    Paged {
        page: Vec<K>,
        size: usize,
        /// Objects handed over so far, minus those deleted again.
        count: usize,
    },
}

impl<K: Resource> InitialEvents<K> {
    /// Starts collecting for `store`: by page (pages of `page_size`) when it
    /// takes a LIST that way, which begins its paged replace now.
    pub(super) fn begin<S: ReflectorStore<K> + ?Sized>(store: &S, page_size: usize) -> Self {
        if store.replaces_by_page() {
            store.replace_begin();
            Self::Paged {
                page: Vec::new(),
                size: page_size.max(1),
                count: 0,
            }
        } else {
            Self::Whole(HashMap::new())
        }
    }

    /// An ADDED or MODIFIED initial event, its object already prepared by
    /// the store.
    pub(super) fn upsert<S: ReflectorStore<K> + ?Sized>(&mut self, store: &S, obj: K) {
        match self {
            Self::Whole(objects) => {
                objects.insert(object_key(&obj), obj);
            }
            Self::Paged { page, size, count } => {
                page.push(obj);
                *count += 1;
                if page.len() >= *size {
                    store.replace_page(std::mem::take(page));
                }
            }
        }
    }

    /// A DELETED event before the end bookmark (a conforming server sends
    /// none; handled all the same). By page, the object may already be in
    /// the store: the page so far goes first, then the deletion, so the
    /// store sees the object listed and then deleted.
    pub(super) fn delete<S: ReflectorStore<K> + ?Sized>(&mut self, store: &S, obj: K) {
        match self {
            Self::Whole(objects) => {
                objects.remove(&object_key(&obj));
            }
            Self::Paged { page, count, .. } => {
                if !page.is_empty() {
                    store.replace_page(std::mem::take(page));
                }
                *count = count.saturating_sub(1);
                store.delete(obj);
            }
        }
    }

    /// The end bookmark at `resource_version`: the state is complete.
    /// Returns the number of objects it holds.
    pub(super) fn finish<S: ReflectorStore<K> + ?Sized>(
        self,
        store: &S,
        resource_version: &str,
    ) -> usize {
        match self {
            Self::Whole(objects) => {
                let items: Vec<K> = objects.into_values().collect();
                let count = items.len();
                store.replace_prepared(items, resource_version);
                count
            }
            Self::Paged { page, count, .. } => {
                if !page.is_empty() {
                    store.replace_page(page);
                }
                store.replace_finish(resource_version);
                count
            }
        }
    }
}
