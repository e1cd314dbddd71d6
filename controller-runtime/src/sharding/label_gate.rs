//! Label mode's admission: which requests a replica's sharded controller
//! reconciles, and the acknowledgment that lets an object move away.
//!
//! The replica's cache of the sharded kind holds only the objects labelled
//! with its shard ([`informer_options`](super::config::ShardingConfig::informer_options)).
//! For a request the gate looks the object up there:
//!
//! - labelled with this shard and not draining: reconcile;
//! - labelled with this shard and draining: the sharder moves it away; the
//!   worker removes both labels (the acknowledgment), guarded by the
//!   `resourceVersion` it saw. The controller's workqueue never hands one
//!   key to two workers, so no reconcile of the object is in flight then,
//!   and none starts afterwards: the cache only moves forward, so it never
//!   shows the object undrained again unless the sharder gives it back;
//! - absent: it was deleted (reconcile, once) unless this shard let it go
//!   (dropped) or never had it (dropped: an owned object's event can reach
//!   a shard before its owner does). The shard has it once a worker began
//!   a request for it or its cache showed it labelled with this shard
//!   ([`LabelGate::saw`], from the cache's events), so an object deleted
//!   before any worker got to it is reconciled as well (unless its add
//!   event reached the gate only after the cache had dropped it again);
//! - fenced: nothing.

use std::collections::HashSet;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::labels::Labelled;
use crate::request::Request;

/// What the cache holds of a request's object.
pub(super) struct Cached {
    pub(super) labelled: Labelled,
    pub(super) resource_version: String,
}

/// What a worker does with a request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LabelAdmission {
    Reconcile,
    /// Acknowledge the drain: remove the labels, guarded by this version.
    Release(String),
    NotMine,
    Fenced,
}

pub(super) type Lookup = Box<dyn Fn(&Request) -> Option<Cached> + Send + Sync>;
pub(super) type Release = Box<
    dyn Fn(Request, String) -> BoxFuture<'static, Result<(), kube_client::Error>> + Send + Sync,
>;

/// Counters of one label gate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct LabelStats {
    pub(super) reconciled: u64,
    pub(super) released: u64,
    pub(super) dropped: u64,
}

#[derive(Default)]
struct State {
    /// Keys whose object this shard has seen in its cache.
    held: HashSet<Request>,
    /// Keys this shard let go of (and has not seen again since).
    released: HashSet<Request>,
    stats: LabelStats,
}

pub(super) struct LabelGate {
    identity: String,
    fence: CancellationToken,
    lookup: Lookup,
    release: Release,
    state: Mutex<State>,
}

impl LabelGate {
    pub(super) fn new(
        identity: String,
        fence: CancellationToken,
        lookup: Lookup,
        release: Release,
    ) -> LabelGate {
        LabelGate {
            identity,
            fence,
            lookup,
            release,
            state: Mutex::new(State::default()),
        }
    }

    pub(super) fn fence(&self) -> &CancellationToken {
        &self.fence
    }

    pub(super) fn stats(&self) -> LabelStats {
        self.state.lock().stats.clone()
    }

    pub(super) fn begin(&self, req: &Request) -> LabelAdmission {
        if self.fence.is_cancelled() {
            return LabelAdmission::Fenced;
        }
        let cached = (self.lookup)(req);
        let mut state = self.state.lock();
        match cached {
            Some(c) if c.labelled.shard.as_deref() == Some(self.identity.as_str()) => {
                state.released.remove(req);
                state.held.insert(req.clone());
                if c.labelled.draining {
                    LabelAdmission::Release(c.resource_version)
                } else {
                    state.stats.reconciled += 1;
                    LabelAdmission::Reconcile
                }
            }
            Some(_) => {
                // Not labelled for this shard: the cache is not restricted
                // to this shard's label. Never reconcile another's object.
                tracing::error!(
                    object = %req,
                    shard = %self.identity,
                    "label mode: the cache holds an object of another shard; \
                     give the controller's kinds the shard's informer options"
                );
                state.stats.dropped += 1;
                LabelAdmission::NotMine
            }
            None if state.held.remove(req) && !state.released.contains(req) => {
                state.stats.reconciled += 1;
                LabelAdmission::Reconcile
            }
            None => {
                state.stats.dropped += 1;
                LabelAdmission::NotMine
            }
        }
    }

    /// The cache showed `req`'s object: when it still holds it labelled
    /// with this shard, the shard has it (its deletion will be reconciled).
    /// A key this shard let go of stays let go of until a worker sees it
    /// given back: this event may be older than the release.
    pub(super) fn saw(&self, req: &Request) {
        let mut state = self.state.lock();
        if state.released.contains(req) {
            return;
        }
        // Read under the lock: a worker that found the object gone and
        // forgot it cannot be followed by a stale event holding it again.
        let mine = (self.lookup)(req)
            .is_some_and(|c| c.labelled.shard.as_deref() == Some(self.identity.as_str()));
        if mine {
            state.held.insert(req.clone());
        }
    }

    /// Acknowledges the drain of `req`'s object seen at `resource_version`:
    /// removes its labels. Whatever the answer, the shard lets the object
    /// go: a conflict means it changed meanwhile, and its next version
    /// brings a new request.
    pub(super) async fn release(&self, req: &Request, resource_version: String) -> bool {
        {
            let mut state = self.state.lock();
            state.released.insert(req.clone());
            state.held.remove(req);
        }
        match (self.release)(req.clone(), resource_version).await {
            Ok(()) => {
                self.state.lock().stats.released += 1;
                true
            }
            Err(error) => {
                tracing::debug!(%error, object = %req, "label mode: acknowledging a drain");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;

    /// Objects by key: shard label, draining.
    type Objects = Arc<Mutex<HashMap<String, (Option<&'static str>, bool)>>>;

    fn gate(objects: Objects) -> LabelGate {
        let lookup_objects = Arc::clone(&objects);
        LabelGate::new(
            "a".into(),
            CancellationToken::new(),
            Box::new(move |req: &Request| {
                lookup_objects
                    .lock()
                    .get(&req.to_string())
                    .map(|(shard, draining)| Cached {
                        labelled: Labelled {
                            shard: shard.map(str::to_string),
                            draining: *draining,
                        },
                        resource_version: "1".into(),
                    })
            }),
            Box::new(move |req: Request, _| {
                let objects = Arc::clone(&objects);
                Box::pin(async move {
                    objects.lock().remove(&req.to_string());
                    Ok(())
                })
            }),
        )
    }

    #[tokio::test]
    async fn an_object_is_reconciled_while_labelled_here_and_let_go_once_drained() {
        let objects = Arc::new(Mutex::new(HashMap::new()));
        let g = gate(Arc::clone(&objects));
        let req = Request::new(Some("ns"), "o");
        // Never seen here (an owned object's event came first): dropped.
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        objects.lock().insert("ns/o".into(), (Some("a"), false));
        assert_eq!(g.begin(&req), LabelAdmission::Reconcile);
        objects.lock().insert("ns/o".into(), (Some("a"), true));
        let LabelAdmission::Release(rv) = g.begin(&req) else {
            panic!("a draining object is released");
        };
        assert!(g.release(&req, rv).await);
        // Gone from the cache after the release: not a deletion.
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        // Given back, then deleted: the deletion is reconciled once.
        objects.lock().insert("ns/o".into(), (Some("a"), false));
        assert_eq!(g.begin(&req), LabelAdmission::Reconcile);
        objects.lock().clear();
        assert_eq!(g.begin(&req), LabelAdmission::Reconcile);
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        // Another shard's object in an unrestricted cache: never reconciled.
        objects.lock().insert("ns/o".into(), (Some("b"), false));
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        g.fence().cancel();
        assert_eq!(g.begin(&req), LabelAdmission::Fenced);
        assert_eq!(g.stats().released, 1);
    }

    #[tokio::test]
    async fn an_object_deleted_before_any_worker_began_is_reconciled_once() {
        let objects = Arc::new(Mutex::new(HashMap::new()));
        let g = gate(Arc::clone(&objects));
        let req = Request::new(Some("ns"), "o");
        // Labelled here, seen in the cache, deleted before a worker began.
        objects.lock().insert("ns/o".into(), (Some("a"), false));
        g.saw(&req);
        objects.lock().clear();
        assert_eq!(g.begin(&req), LabelAdmission::Reconcile);
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        // A stale event after the object is gone holds nothing.
        g.saw(&req);
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        // Another shard's object seen here is not held.
        objects.lock().insert("ns/o".into(), (Some("b"), false));
        g.saw(&req);
        objects.lock().clear();
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
        // An event older than a release does not take the object back.
        objects.lock().insert("ns/o".into(), (Some("a"), true));
        let LabelAdmission::Release(rv) = g.begin(&req) else {
            panic!("a draining object is released");
        };
        objects.lock().insert("ns/o".into(), (Some("a"), true));
        g.release(&req, rv).await;
        objects.lock().insert("ns/o".into(), (Some("a"), true));
        g.saw(&req);
        objects.lock().clear();
        assert_eq!(g.begin(&req), LabelAdmission::NotMine);
    }
}
