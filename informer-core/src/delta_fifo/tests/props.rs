//! Property tests: random add/update/delete/replace/resync/pop sequences
//! against a plain model of the spec. The FIFO's consumer applies popped
//! deltas to an indexer (the known objects), as the informer does.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::store::Indexer;

/// A delta as the model sees it: kind, object version, is a tombstone.
type M = (DeltaType, u32, bool);

#[derive(Default)]
struct Model {
    queue: Vec<String>,
    items: BTreeMap<String, Vec<M>>,
    known: BTreeMap<String, u32>,
    populated: bool,
    initial: usize,
    /// Deltas accepted and deltas removed by the dedup rule.
    pushed: usize,
    deduped: usize,
}

impl Model {
    fn has_synced(&self) -> bool {
        self.populated && self.initial == 0
    }

    fn push(&mut self, key: &str, delta: M) {
        self.pushed += 1;
        let deltas = self.items.entry(key.to_owned()).or_default();
        if deltas.is_empty() {
            self.queue.push(key.to_owned());
        }
        deltas.push(delta);
        let n = deltas.len();
        if n >= 2 && deltas[n - 1].0 == DeltaType::Deleted && deltas[n - 2].0 == DeltaType::Deleted
        {
            self.deduped += 1;
            let older_is_tombstone = deltas[n - 2].2;
            deltas.remove(if older_is_tombstone { n - 2 } else { n - 1 });
        }
    }

    fn replace(&mut self, list: &[(String, u32)]) {
        let listed: HashSet<&String> = list.iter().map(|(k, _)| k).collect();
        let mut tombstones: Vec<(String, u32)> = Vec::new();
        for key in self.queue.iter().filter(|k| !listed.contains(k)) {
            tombstones.push((key.clone(), self.items[key].last().unwrap().1));
        }
        for (key, v) in &self.known {
            if !listed.contains(key) && !self.items.contains_key(key) {
                tombstones.push((key.clone(), *v));
            }
        }
        for (key, v) in list {
            self.push(key, (DeltaType::Replaced, *v, false));
        }
        for (key, v) in tombstones {
            self.push(&key, (DeltaType::Deleted, v, true));
        }
        if !self.populated {
            self.populated = true;
            self.initial = self.queue.len();
        }
    }

    fn pop(&mut self) -> Option<(String, Vec<M>, bool)> {
        if self.queue.is_empty() {
            return None;
        }
        let key = self.queue.remove(0);
        let deltas = self.items.remove(&key).unwrap();
        let initial = !self.has_synced();
        self.initial = self.initial.saturating_sub(1);
        for d in &deltas {
            if d.0 == DeltaType::Deleted {
                self.known.remove(&key);
            } else {
                self.known.insert(key.clone(), d.1);
            }
        }
        Some((key, deltas, initial))
    }
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8),
    Update(u8),
    Delete(u8),
    Replace(Vec<u8>),
    Resync,
    Pop,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..6u8).prop_map(Op::Add),
        3 => (0..6u8).prop_map(Op::Update),
        3 => (0..6u8).prop_map(Op::Delete),
        2 => proptest::collection::vec(0..6u8, 0..6).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        6 => Just(Op::Pop),
    ]
}

fn obj(name: u8, version: u32) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("o{name}")),
            namespace: Some("ns".into()),
            resource_version: Some(version.to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn key(name: u8) -> String {
    format!("ns/o{name}")
}

fn version(d: &Delta<ConfigMap>) -> u32 {
    d.object
        .object()
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

proptest! {
    #[test]
    fn fifo_follows_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let indexer: Indexer<ConfigMap> = Indexer::new();
        let fifo = DeltaFifo::new(Some(Arc::new(indexer.clone())));
        let mut model = Model::default();
        let mut popped = 0;
        for (step, op) in ops.into_iter().enumerate() {
            // Each operation carries a fresh version so deltas are told apart.
            let v = u32::try_from(step).unwrap() + 1;
            match op {
                Op::Add(n) => { fifo.add(obj(n, v)); model.populated = true; model.push(&key(n), (DeltaType::Added, v, false)); }
                Op::Update(n) => { fifo.update(obj(n, v)); model.populated = true; model.push(&key(n), (DeltaType::Updated, v, false)); }
                Op::Delete(n) => {
                    fifo.delete(obj(n, v));
                    model.populated = true;
                    if model.items.contains_key(&key(n)) || model.known.contains_key(&key(n)) {
                        model.push(&key(n), (DeltaType::Deleted, v, false));
                    }
                }
                Op::Replace(names) => {
                    fifo.replace(names.iter().map(|n| obj(*n, v)).collect(), &v.to_string());
                    model.replace(&names.iter().map(|n| (key(*n), v)).collect::<Vec<_>>());
                    prop_assert_eq!(fifo.last_sync_resource_version(), Some(v.to_string()));
                }
                Op::Resync => {
                    fifo.resync();
                    let syncs: Vec<(String, u32)> = model.known.iter().filter(|(k, _)| !model.items.contains_key(*k)).map(|(k, v)| (k.clone(), *v)).collect();
                    for (k, v) in syncs {
                        model.push(&k, (DeltaType::Sync, v, false));
                    }
                }
                Op::Pop => {
                    let got = fifo
                        .pop(|d| {
                            for delta in &d.deltas {
                                if delta.kind == DeltaType::Deleted {
                                    indexer.delete(&d.key);
                                } else {
                                    indexer.update(delta.object.object().clone()).unwrap();
                                }
                            }
                            let deltas: Vec<M> = d.deltas.iter().map(|x| (x.kind, version(x), x.object.is_tombstone())).collect();
                            (d.key.to_string(), deltas, d.is_in_initial_list)
                        })
                        .now_or_never()
                        .map(|r| r.unwrap());
                    let want = model.pop();
                    if let Some((_, deltas, _)) = &want {
                        popped += deltas.len();
                    }
                    prop_assert_eq!(got, want);
                }
            }
            let keys = fifo.list_keys();
            let unique: HashSet<&String> = keys.iter().collect();
            prop_assert_eq!(unique.len(), keys.len(), "a key is queued at most once");
            prop_assert_eq!(&keys, &model.queue, "queue order is order of first arrival");
            prop_assert_eq!(fifo.has_synced(), model.has_synced());
            let queued: usize = model.items.values().map(Vec::len).sum();
            prop_assert_eq!(popped + queued, model.pushed - model.deduped, "no delta lost except by dedup");
            let mut known = indexer.list_keys();
            known.sort();
            prop_assert_eq!(known, model.known.keys().cloned().collect::<Vec<_>>());
        }
        // Closing drains everything still queued, exactly as the model has it.
        fifo.close();
        while let Some(want) = model.pop() {
            let got = fifo.pop(|d| {
                let deltas: Vec<M> = d.deltas.iter().map(|x| (x.kind, version(x), x.object.is_tombstone())).collect();
                (d.key.to_string(), deltas, d.is_in_initial_list)
            });
            prop_assert_eq!(got.now_or_never(), Some(Ok(want)));
        }
        prop_assert_eq!(fifo.pop(|_| ()).now_or_never(), Some(Err(FifoClosed)));
    }
}
