//! A replace that arrives page by page (`replace_begin`, `replace_page`,
//! `replace_finish`): the same deltas as one `replace`, with each page
//! queued (and poppable) before the list is complete.

use super::*;

/// Pops every queued item into the indexer, as the informer does.
fn drain_into(fifo: &DeltaFifo<ConfigMap>, indexer: &Indexer<ConfigMap>) -> Vec<String> {
    let mut keys = Vec::new();
    while !fifo.is_empty() {
        let d = pop_now(fifo);
        for delta in &d.deltas {
            if delta.kind == DeltaType::Deleted {
                indexer.delete(&d.key);
            } else {
                indexer
                    .update(delta.object.object().clone())
                    .expect("update");
            }
        }
        keys.push(d.key.to_string());
    }
    keys
}

#[test]
fn pages_are_poppable_before_the_list_ends_and_sync_waits_for_the_finish() {
    let (fifo, indexer) = with_known();
    fifo.replace_begin();
    fifo.replace_page(vec![cm("a", "1"), cm("b", "1")]);
    assert_eq!(fifo.list_keys(), ["ns/a", "ns/b"]);
    let first = pop_now(&fifo);
    assert!(first.is_in_initial_list);
    assert!(!fifo.has_synced(), "synced before the list ended");
    indexer
        .update(first.deltas[0].object.object().clone())
        .unwrap();
    fifo.replace_page(vec![cm("c", "1")]);
    fifo.replace_finish("1");
    // Nothing known was missing from the list: no tombstone for "a".
    assert_eq!(fifo.list_keys(), ["ns/b", "ns/c"]);
    assert!(!fifo.has_synced());
    drain_into(&fifo, &indexer);
    assert!(fifo.has_synced());
    assert_eq!(fifo.last_sync_resource_version().as_deref(), Some("1"));
}

#[test]
fn a_relist_by_pages_tombstones_what_no_page_listed_even_after_pops() {
    let (fifo, indexer) = with_known();
    fifo.replace(vec![cm("a", "1"), cm("b", "1"), cm("c", "1")], "1");
    drain_into(&fifo, &indexer);
    // Relist: "b" is gone; "a" comes back on the first page and is applied
    // (popped into the indexer) before the second page arrives.
    fifo.replace_begin();
    fifo.replace_page(vec![cm("a", "2")]);
    assert_eq!(drain_into(&fifo, &indexer), ["ns/a"]);
    fifo.replace_page(vec![cm("c", "2")]);
    fifo.replace_finish("2");
    let c = pop_now(&fifo);
    assert_eq!(summary(&c), [s(DeltaType::Replaced, "2", false)]);
    let b = pop_now(&fifo);
    assert_eq!(&*b.key, "ns/b");
    assert_eq!(summary(&b), [s(DeltaType::Deleted, "1", true)]);
    assert!(fifo.is_empty());
}

#[test]
fn beginning_again_forgets_the_keys_of_a_list_that_broke_off() {
    let (fifo, indexer) = with_known();
    fifo.replace(vec![cm("a", "1"), cm("b", "1")], "1");
    drain_into(&fifo, &indexer);
    fifo.replace_begin();
    fifo.replace_page(vec![cm("a", "2"), cm("b", "2")]);
    drain_into(&fifo, &indexer);
    // The list starts over and this time only "a" is listed: "b" must get
    // its tombstone although the broken-off attempt had listed it.
    fifo.replace_begin();
    fifo.replace_page(vec![cm("a", "3")]);
    fifo.replace_finish("3");
    let keys: Vec<(String, Vec<Summary>)> = std::iter::from_fn(|| {
        (!fifo.is_empty()).then(|| {
            let d = pop_now(&fifo);
            (d.key.to_string(), summary(&d))
        })
    })
    .collect();
    assert_eq!(
        keys,
        [
            ("ns/a".to_owned(), vec![s(DeltaType::Replaced, "3", false)]),
            ("ns/b".to_owned(), vec![s(DeltaType::Deleted, "2", true)]),
        ]
    );
}
