//! The sharder: the one replica (elected on the ring's sharder Lease) that
//! moves the ring from epoch to epoch.
//!
//! While it leads, it compares the ring-state Lease's members with the live
//! shard Leases and, when they differ, writes the next epoch with the live
//! set. A shard Lease is live while it is held and was seen to change within
//! its duration ([`Observations`](super::view::Observations)); before a
//! member is dropped its Lease is read afresh, so a watch that stalled
//! cannot make a live replica look dead. Every write is guarded by the
//! ring-state Lease's `resourceVersion` and numbers the epoch from the
//! freshly read one, so two sharders (a new one elected while the old one
//! has not noticed yet) can never write the same epoch twice: epochs only
//! grow, which is what the handover rule relies on (see
//! [`sharding`](super)).
//!
//! Expired shard Leases that are no members are deleted (guarded by their
//! `resourceVersion`), so restarts do not pile them up.

use std::collections::{BTreeMap, BTreeSet};

use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::api::{DeleteParams, PostParams, Preconditions};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::replica::Replica;
use super::view::{
    EPOCH_ANNOTATION, MEMBERS_ANNOTATION, RING_LABEL, ROLE_LABEL, ROLE_RING, is_ring_state,
    is_shard, ring_state,
};
use crate::leaderelection::LeaderElector;

/// Competes for the sharder Lease until `stop` fires (then releases it):
/// the task, and a receiver that reads `true` while this replica leads.
pub(super) fn elect(
    m: &Replica,
    stop: CancellationToken,
) -> (JoinHandle<()>, watch::Receiver<bool>) {
    let config = m.config.sharder_election();
    let retry = config.timing.retry_period;
    let elector = match LeaderElector::new(m.client.clone(), config) {
        Ok(e) => e,
        Err(error) => {
            // The same timing rules were checked by ShardingConfig::validate.
            tracing::error!(%error, "sharder election cannot start");
            let (_, rx) = watch::channel(false);
            return (tokio::spawn(async {}), rx);
        }
    };
    let leading = elector.subscribe();
    let task = tokio::spawn(async move {
        loop {
            let result = elector.run(stop.clone()).await;
            if stop.is_cancelled() {
                return;
            }
            if let Err(error) = result {
                tracing::warn!(%error, "sharder: lost the sharder lease; competing again");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(retry) => {}
            }
        }
    });
    (task, leading)
}

/// While this replica leads, keeps the ring state equal to the live shard
/// Leases. Never returns.
pub(super) async fn run(
    m: &Replica,
    informer: &SharedIndexInformer<Lease>,
    mut changes: watch::Receiver<u64>,
    mut leading: watch::Receiver<bool>,
) {
    let period = m.config.timing.retry_period / 2;
    loop {
        let is_leading = *leading.borrow_and_update();
        m.set_sharder(is_leading);
        if is_leading {
            tick(m, informer).await;
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { std::future::pending::<()>().await },
            r = leading.changed() => if r.is_err() { std::future::pending::<()>().await },
            () = tokio::time::sleep(period) => {}
        }
    }
}

/// One look: write the next epoch when the live set differs from the
/// members; delete long-expired shard Leases that are no members.
async fn tick(m: &Replica, informer: &SharedIndexInformer<Lease>) {
    m.refresh_view(informer);
    let cfg = &m.config;
    let state_name = cfg.ring_state_name();
    let leases = informer.indexer().list();
    let members: BTreeSet<String> = leases
        .iter()
        .find(|l| is_ring_state(l) && l.metadata.name.as_deref() == Some(state_name.as_str()))
        .map(|l| ring_state(l).1.into_iter().collect())
        .unwrap_or_default();
    let now = Instant::now();
    let shards: BTreeMap<String, Option<String>> = leases
        .iter()
        .filter(|l| is_shard(l))
        .filter_map(|l| {
            l.metadata
                .name
                .clone()
                .map(|n| (n, l.metadata.resource_version.clone()))
        })
        .collect();
    let mut live: BTreeSet<String> = {
        let obs = m.observations.lock();
        shards
            .keys()
            .filter(|n| obs.is_live(n, now, cfg.timing.lease_duration))
            .cloned()
            .collect()
    };
    // A member that looks dead is read afresh before it is dropped.
    for member in members.difference(&live.clone()) {
        match m.leases.get_opt(member).await {
            Ok(Some(lease)) => {
                let mut obs = m.observations.lock();
                let at = Instant::now();
                obs.observe(&lease, at);
                if obs.is_live(member, at, cfg.timing.lease_duration) {
                    live.insert(member.clone());
                }
            }
            Ok(None) => {}
            Err(error) => {
                // Cannot confirm: keep it for now.
                tracing::debug!(%error, %member, "sharder: cannot read a member's lease");
                live.insert(member.clone());
            }
        }
    }
    if live != members {
        write_state(m, &live).await;
    }
    // Garbage: expired shard Leases of replicas that are gone.
    for (name, rv) in &shards {
        if live.contains(name) || members.contains(name) {
            continue;
        }
        let expired_long = m
            .observations
            .lock()
            .expired_for(name, now, cfg.timing.lease_duration)
            .is_some_and(|d| d >= cfg.timing.lease_duration);
        if !expired_long {
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: rv.clone(),
                uid: None,
            }),
            ..Default::default()
        };
        if let Err(error) = m.leases.delete(name, &params).await {
            tracing::debug!(%error, lease = %name, "sharder: deleting an expired shard lease");
        }
    }
}

/// Writes epoch (fresh epoch + 1) with `live` as members, guarded by the
/// ring-state Lease's resourceVersion; creates it at epoch 1.
async fn write_state(m: &Replica, live: &BTreeSet<String>) {
    let cfg = &m.config;
    let name = cfg.ring_state_name();
    let members = live.iter().cloned().collect::<Vec<_>>().join(",");
    let fresh = match m.leases.get_opt(&name).await {
        Ok(fresh) => fresh,
        Err(error) => {
            tracing::warn!(%error, "sharder: reading the ring state");
            return;
        }
    };
    let result = match fresh {
        Some(mut lease) => {
            let (epoch, current) = ring_state(&lease);
            if current.iter().cloned().collect::<BTreeSet<_>>() == *live {
                return;
            }
            let annotations = lease.metadata.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(EPOCH_ANNOTATION.into(), (epoch + 1).to_string());
            annotations.insert(MEMBERS_ANNOTATION.into(), members.clone());
            tracing::info!(ring = %cfg.ring, epoch = epoch + 1, %members, "sharder: new epoch");
            m.leases
                .replace(&name, &PostParams::default(), &lease)
                .await
                .map(drop)
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    labels: Some(BTreeMap::from([
                        (RING_LABEL.to_string(), cfg.ring.clone()),
                        (ROLE_LABEL.to_string(), ROLE_RING.to_string()),
                    ])),
                    annotations: Some(BTreeMap::from([
                        (EPOCH_ANNOTATION.to_string(), "1".to_string()),
                        (MEMBERS_ANNOTATION.to_string(), members.clone()),
                    ])),
                    ..Default::default()
                },
                spec: Some(LeaseSpec::default()),
            };
            tracing::info!(ring = %cfg.ring, epoch = 1, %members, "sharder: first epoch");
            m.leases
                .create(&PostParams::default(), &lease)
                .await
                .map(drop)
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "sharder: writing the ring state (retried next look)");
    }
}
