//! Extra informer handlers the fault suite registers: one that checks the
//! stream it sees, one that panics now and then, one that is stuck.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use informer_core::key::ObjectOrTombstone;
use informer_core::shared_informer::ResourceEventHandler;
use kube_core::Resource;
use parking_lot::Mutex;

/// `namespace/name`, the key the checks compare by.
pub fn name_of<K: Resource>(obj: &K) -> String {
    let m = obj.meta();
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default()
    )
}

pub fn rv_of<K: Resource>(obj: &K) -> String {
    obj.meta().resource_version.clone().unwrap_or_default()
}

/// Follows the cache through its notifications; records any notification
/// it cannot place (an update or delete of a key it never saw added, an
/// update whose old version is not the one it holds, a second add).
#[derive(Default)]
pub struct Mirror {
    pub view: Mutex<HashMap<String, String>>,
    pub violations: Mutex<Vec<String>>,
}

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for Mirror {
    fn on_add(&self, obj: Arc<K>, _initial: bool) {
        if let Some(prev) = self.view.lock().insert(name_of(&*obj), rv_of(&*obj)) {
            self.violations.lock().push(format!(
                "add of {} already held at rv {prev}",
                name_of(&*obj)
            ));
        }
    }
    fn on_update(&self, old: Arc<K>, new: Arc<K>) {
        let prev = self.view.lock().insert(name_of(&*new), rv_of(&*new));
        if prev.as_deref() != Some(rv_of(&*old).as_str()) {
            self.violations.lock().push(format!(
                "update of {} from rv {} while holding {prev:?}",
                name_of(&*new),
                rv_of(&*old)
            ));
        }
    }
    fn on_delete(&self, obj: ObjectOrTombstone<K>) {
        let name = name_of(obj.object().as_ref());
        if self.view.lock().remove(&name).is_none() {
            self.violations
                .lock()
                .push(format!("delete of {name} never seen added"));
        }
    }
}

/// Panics on every `every`-th notification (never when 0).
pub struct Panicky {
    pub every: usize,
    pub seen: AtomicUsize,
}

impl Panicky {
    fn tick(&self) {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if self.every > 0 && n.is_multiple_of(self.every) {
            panic!("injected handler panic {n}");
        }
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Panicky {
    fn on_add(&self, _: Arc<K>, _: bool) {
        self.tick();
    }
    fn on_update(&self, _: Arc<K>, _: Arc<K>) {
        self.tick();
    }
    fn on_delete(&self, _: ObjectOrTombstone<K>) {
        self.tick();
    }
}

/// Blocks in its first notification until released (handlers run on the
/// blocking pool, so this stalls only itself).
#[derive(Default)]
pub struct Stuck {
    pub released: AtomicBool,
    pub seen: AtomicUsize,
}

impl Stuck {
    fn wait(&self) {
        self.seen.fetch_add(1, Ordering::SeqCst);
        while !self.released.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl<K: Send + Sync + 'static> ResourceEventHandler<K> for Stuck {
    fn on_add(&self, _: Arc<K>, _: bool) {
        self.wait();
    }
    fn on_update(&self, _: Arc<K>, _: Arc<K>) {
        self.wait();
    }
    fn on_delete(&self, _: ObjectOrTombstone<K>) {
        self.wait();
    }
}
