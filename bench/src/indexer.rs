//! Scenario 5, indexer: 100,000 ConfigMaps in memory with three indexes
//! (namespace, label `app`, label `round`). Measured: updates per second
//! (every object gets a new `round`, so one index value moves each time),
//! `by_index` lookups per second on `app` (10 objects per value) and
//! `get_by_key` lookups per second. kube-runtime's store has no indexes; its
//! updates (`Writer::apply_watcher_event`) and `get` are shown for
//! reference, and one `HashMap` insert / lookup is the floor.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use informer_core::key::object_key;
use informer_core::store::{IndexFn, Indexer};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_core::ObjectMeta;
use kube_runtime::reflector::{ObjectRef, store::Writer};
use kube_runtime::watcher;

use crate::record::{FLOOR, KUBE, Metric, OURS, Records};
use crate::{BenchError, Plan};

const NAMESPACES: usize = 10;
const PER_APP: usize = 10;

fn object(i: usize, apps: usize, round: u32) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:06}")),
            namespace: Some(format!("ns-{}", i % NAMESPACES)),
            labels: Some(BTreeMap::from([
                ("app".to_string(), format!("app-{}", i % apps)),
                ("round".to_string(), round.to_string()),
            ])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("index".to_string(), i.to_string())])),
        ..ConfigMap::default()
    })
}

fn label_index(label: &'static str) -> IndexFn<ConfigMap> {
    Arc::new(move |cm: &ConfigMap| {
        Ok(cm
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .map(|v| vec![v.clone()])
            .unwrap_or_default())
    })
}

/// Runs the scenario.
pub fn run(plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    let n = plan.indexer_objects;
    let apps = (n / PER_APP).max(1);
    let case = format!("{n} objects, 3 indexes");
    let m = |metric, unit| Metric {
        scenario: "indexer",
        case: &case,
        metric,
        unit,
        higher_is_better: true,
    };
    let (updates, by_index, get) = (
        m("updates/s", "ops/s"),
        m("by_index lookups/s (10 objects each)", "lookups/s"),
        m("get by key/s", "lookups/s"),
    );
    for run in 0..plan.runs {
        let round = run as u32 + 1;
        let fresh: Vec<Arc<ConfigMap>> = (0..n).map(|i| object(i, apps, 0)).collect();
        let next: Vec<Arc<ConfigMap>> = (0..n).map(|i| object(i, apps, round)).collect();
        let keys: Vec<String> = fresh.iter().map(|o| object_key(o.as_ref())).collect();
        let lookups: Vec<String> = (0..n)
            .map(|i| format!("app-{}", (i * 7919) % apps))
            .collect();

        // informer-rs Indexer.
        let indexer = Indexer::new();
        indexer
            .add_indexers([
                ("app".to_string(), label_index("app")),
                ("round".to_string(), label_index("round")),
            ])
            .map_err(BenchError::msg)?;
        for o in &fresh {
            indexer.add(Arc::clone(o)).map_err(BenchError::msg)?;
        }
        let t = Instant::now();
        for o in &next {
            indexer.update(Arc::clone(o)).map_err(BenchError::msg)?;
        }
        out.push(&updates, OURS, n as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for v in &lookups {
            black_box(indexer.by_index("app", v).map_err(BenchError::msg)?);
        }
        out.push(&by_index, OURS, n as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for k in &keys {
            black_box(indexer.get_by_key(k));
        }
        out.push(&get, OURS, n as f64 / t.elapsed().as_secs_f64());
        drop(indexer);

        // kube-runtime store (no indexes).
        let mut writer: Writer<ConfigMap> = Writer::default();
        for o in &fresh {
            writer.apply_watcher_event(&watcher::Event::Apply((**o).clone()));
        }
        let applies: Vec<_> = next
            .iter()
            .map(|o| watcher::Event::Apply((**o).clone()))
            .collect();
        let t = Instant::now();
        for e in &applies {
            writer.apply_watcher_event(e);
        }
        out.push(&updates, KUBE, n as f64 / t.elapsed().as_secs_f64());
        let store = writer.as_reader();
        let refs: Vec<ObjectRef<ConfigMap>> = fresh
            .iter()
            .map(|o| ObjectRef::from_obj(o.as_ref()))
            .collect();
        let t = Instant::now();
        for r in &refs {
            black_box(store.get(r));
        }
        out.push(&get, KUBE, n as f64 / t.elapsed().as_secs_f64());
        drop((writer, store, applies));

        // Floor: one HashMap insert / lookup per operation.
        let mut map: HashMap<String, Arc<ConfigMap>> =
            keys.iter().cloned().zip(fresh.iter().cloned()).collect();
        let t = Instant::now();
        for (k, o) in keys.iter().zip(&next) {
            if let Some(slot) = map.get_mut(k) {
                *slot = Arc::clone(o);
            }
        }
        out.push(&updates, FLOOR, n as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for k in &keys {
            black_box(map.get(k).cloned());
        }
        let floor_get = n as f64 / t.elapsed().as_secs_f64();
        out.push(&get, FLOOR, floor_get);
        out.push(&by_index, FLOOR, floor_get);
    }
    eprintln!("indexer {case} done");
    Ok(())
}
