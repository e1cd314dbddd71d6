//! `is_empty`, as the DeltaFIFO's relist asks it: the Indexer's own answer
//! (inherent and through [`KnownObjects`]) and the trait's default for
//! other stores, which falls back on the key list; and the drain a
//! `replace` that raced with `add_indexers` starts over from.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;

use super::*;

fn cm(name: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    })
}

#[test]
fn an_indexer_is_empty_until_an_object_is_stored_and_again_once_deleted() {
    let store: Indexer<ConfigMap> = Indexer::new();
    let known: &dyn KnownObjects<ConfigMap> = &store;
    assert!(store.is_empty() && known.is_empty());
    store.add(cm("a")).unwrap();
    assert!(!store.is_empty() && !known.is_empty());
    store.delete("default/a");
    assert!(store.is_empty() && known.is_empty());
}

/// A store that only lists keys, as a user's own `KnownObjects` might.
struct Keys(Vec<String>);

impl KnownObjects<ConfigMap> for Keys {
    fn list_keys(&self) -> Vec<String> {
        self.0.clone()
    }
    fn get_by_key(&self, _key: &str) -> Option<Arc<ConfigMap>> {
        None
    }
}

#[test]
fn the_default_is_empty_asks_the_key_list() {
    assert!(Keys(Vec::new()).is_empty());
    assert!(!Keys(vec!["default/a".into()]).is_empty());
}

/// `replace` rebuilds its fresh state from scratch when indexes were added
/// while it computed index values (a race no single thread can stage);
/// the drain it takes the objects out with must give back every one and
/// leave no index entry behind.
#[test]
fn draining_the_state_gives_back_every_object_and_clears_the_indexes() {
    let store: Indexer<ConfigMap> = Indexer::new();
    store.add(cm("a")).unwrap();
    store.add(cm("b")).unwrap();
    let mut state = store.state.write();
    let mut keys: Vec<String> = state
        .drain_objects()
        .into_iter()
        .map(|(k, _)| k.to_string())
        .collect();
    keys.sort();
    assert_eq!(keys, ["default/a", "default/b"]);
    assert_eq!(state.len(), 0);
    drop(state);
    assert!(
        store
            .index_keys(NAMESPACE_INDEX, "default")
            .unwrap()
            .is_empty()
    );
}
