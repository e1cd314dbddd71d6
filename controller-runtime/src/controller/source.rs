//! Watches of a controller: which informer, which predicates, which handler.
//!
//! A [`Watch`] ties one kind's shared informer to the controller's
//! workqueue. It is created when the controller is built (so the informer is
//! requested from the factory before the manager starts it) and registers
//! its informer handler when the controller starts (so a replica that is not
//! leading queues nothing). Initial-list adds and resyncs are queued at low
//! priority so that real changes go first.

use std::sync::Arc;
use std::time::Duration;

use informer_core::key::ObjectOrTombstone;
use informer_core::shared_informer::{
    InformerError, ResourceEventHandler, ResourceEventHandlerRegistration, SharedIndexInformer,
};
use kube_core::Resource;
use tokio::time::Instant;

use crate::handler::EventHandler;
use crate::manager::Object;
use crate::predicate::Predicate;
use crate::reconcile::Request;
use crate::workqueue::{AddOptions, Priority, Queue};

/// A type-erased watch of one kind.
pub(crate) trait Watch: Send + Sync + 'static {
    /// `Kind (group/version)`, for logs and sync errors.
    fn describe(&self) -> String;
    /// Registers the informer handler feeding `queue`.
    fn register(&self, queue: Queue<Request>) -> Result<Registered, InformerError>;
}

/// A registered watch: remove it when the controller stops.
pub(crate) struct Registered {
    pub(crate) description: String,
    synced: Box<dyn Fn() -> bool + Send + Sync>,
    remove: Box<dyn Fn() + Send + Sync>,
}

impl Registered {
    /// Whether the informer synced and this handler got the initial list.
    pub(crate) fn has_synced(&self) -> bool {
        (self.synced)()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        (self.remove)();
    }
}

/// Waits until every watch synced, polling until `timeout`; on timeout the
/// error names the watches that had not synced.
pub(crate) async fn wait_for_sync(
    watches: &[Registered],
    timeout: Duration,
) -> Result<(), Vec<String>> {
    let deadline = Instant::now() + timeout;
    loop {
        let unsynced: Vec<String> = watches
            .iter()
            .filter(|w| !w.has_synced())
            .map(|w| w.description.clone())
            .collect();
        if unsynced.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(unsynced);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn describe_kind<K: Resource<DynamicType = ()>>() -> String {
    let (group, version, kind) = (K::group(&()), K::version(&()), K::kind(&()));
    if group.is_empty() {
        format!("{kind} ({version})")
    } else {
        format!("{kind} ({group}/{version})")
    }
}

/// A watch of kind `W`.
pub(crate) struct TypedWatch<W> {
    pub(crate) informer: SharedIndexInformer<W>,
    pub(crate) handler: Arc<dyn EventHandler<W>>,
    pub(crate) predicates: Arc<Vec<Box<dyn Predicate<W>>>>,
}

impl<W: Object> Watch for TypedWatch<W> {
    fn describe(&self) -> String {
        describe_kind::<W>()
    }

    fn register(&self, queue: Queue<Request>) -> Result<Registered, InformerError> {
        let adapter = Enqueue {
            queue,
            handler: Arc::clone(&self.handler),
            predicates: Arc::clone(&self.predicates),
        };
        let registration: Arc<ResourceEventHandlerRegistration> =
            Arc::new(self.informer.add_event_handler(adapter)?);
        let informer = self.informer.clone();
        let synced = {
            let (informer, registration) = (informer.clone(), Arc::clone(&registration));
            Box::new(move || informer.has_synced() && registration.has_synced())
        };
        let remove = Box::new(move || {
            if let Err(error) = informer.remove_event_handler(&registration) {
                tracing::debug!(%error, "removing a controller's informer handler");
            }
        });
        Ok(Registered {
            description: self.describe(),
            synced,
            remove,
        })
    }
}

/// The informer handler: predicates, then the event handler, then the queue.
struct Enqueue<W> {
    queue: Queue<Request>,
    handler: Arc<dyn EventHandler<W>>,
    predicates: Arc<Vec<Box<dyn Predicate<W>>>>,
}

impl<W: Object> Enqueue<W> {
    fn push(&self, requests: Vec<Request>, priority: Priority) {
        for req in requests {
            if priority == Priority::NORMAL {
                self.queue.add(req);
            } else {
                self.queue
                    .add_with(req, AddOptions::new().priority(priority));
            }
        }
    }
}

impl<W: Object> ResourceEventHandler<W> for Enqueue<W> {
    fn on_add(&self, obj: Arc<W>, is_in_initial_list: bool) {
        if self.predicates.iter().all(|p| p.create(&obj)) {
            self.push(
                self.handler.create(&obj),
                Priority::for_event(is_in_initial_list),
            );
        }
    }

    fn on_update(&self, old: Arc<W>, new: Arc<W>) {
        if self.predicates.iter().all(|p| p.update(&old, &new)) {
            let resync = old.meta().resource_version == new.meta().resource_version;
            self.push(self.handler.update(&old, &new), Priority::for_event(resync));
        }
    }

    fn on_delete(&self, obj: ObjectOrTombstone<W>) {
        let obj = obj.object();
        if self.predicates.iter().all(|p| p.delete(obj)) {
            self.push(self.handler.delete(obj), Priority::NORMAL);
        }
    }
}
