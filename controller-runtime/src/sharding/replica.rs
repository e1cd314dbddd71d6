//! What one replica knows of its ring and shares between its membership
//! (the shard Lease, the view) and its sharder (the epochs): the settings,
//! the Lease API, the published view, and when each shard Lease was seen to
//! change. Both sides read and update it; neither knows the other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::coordination::v1::Lease;
use kube_client::Api;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::ShardingConfig;
use super::ring::Ring;
use super::view::{Observations, RingView, acked_epoch, is_ring_state, is_shard, ring_state};

/// The state of one replica in one ring.
pub(super) struct Replica {
    pub(super) config: ShardingConfig,
    pub(super) leases: Api<Lease>,
    pub(super) client: kube_client::Client,
    pub(super) view: watch::Sender<RingView>,
    pub(super) acks: Mutex<Vec<Weak<AtomicU64>>>,
    pub(super) ack_changed: Arc<Notify>,
    pub(super) fence: CancellationToken,
    pub(super) observations: Mutex<Observations>,
    pub(super) sharder: AtomicBool,
    pub(super) sharder_watch: watch::Sender<bool>,
    pub(super) installed: AtomicBool,
    pub(super) label_controller: AtomicBool,
    pub(super) renewals: AtomicU64,
}

impl Replica {
    pub(super) fn new(client: kube_client::Client, config: ShardingConfig) -> Replica {
        let (view, _) = watch::channel(RingView::default());
        Replica {
            leases: Api::namespaced(client.clone(), &config.namespace),
            client,
            config,
            view,
            acks: Mutex::new(Vec::new()),
            ack_changed: Arc::new(Notify::new()),
            fence: CancellationToken::new(),
            observations: Mutex::new(Observations::default()),
            sharder: AtomicBool::new(false),
            sharder_watch: watch::channel(false).0,
            installed: AtomicBool::new(false),
            label_controller: AtomicBool::new(false),
            renewals: AtomicU64::new(0),
        }
    }

    /// Reads the ring's Leases from the cache into the view and the
    /// observations.
    pub(super) fn refresh_view(&self, informer: &SharedIndexInformer<Lease>) {
        let now = Instant::now();
        let leases = informer.indexer().list();
        let mut names = BTreeSet::new();
        let mut acks = BTreeMap::new();
        let mut state: Option<(u64, Vec<String>)> = None;
        {
            let mut obs = self.observations.lock();
            for lease in &leases {
                let Some(name) = lease.metadata.name.clone() else {
                    continue;
                };
                if is_ring_state(lease) && name == self.config.ring_state_name() {
                    state = Some(ring_state(lease));
                } else if is_shard(lease) {
                    obs.observe(lease, now);
                    acks.insert(name.clone(), acked_epoch(lease));
                    names.insert(name);
                }
            }
            obs.retain(&names, now);
        }
        let vnodes = self.config.virtual_nodes;
        self.view.send_if_modified(|view| {
            let mut next = view.clone();
            next.acks = acks;
            if let Some((epoch, members)) = state
                && epoch > view.epoch
            {
                next.epoch = epoch;
                next.ring = Ring::with_virtual_nodes(members, vnodes);
            }
            let changed = next != *view;
            *view = next;
            changed
        });
    }

    pub(super) fn set_sharder(&self, leading: bool) {
        self.sharder.store(leading, Ordering::Release);
        self.sharder_watch.send_if_modified(|s| {
            let changed = *s != leading;
            *s = leading;
            changed
        });
    }
}
