//! The invariants of the sharded scenario (see [`sharded`](super::sharded)),
//! checked again and again after the last fault until they hold or the
//! run gives up.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::ListParams;
use tokio::time::Instant;

use controller_runtime::sharding::config::ShardMode;

use super::sharded::{Deleted, Fleet, RING};
use crate::sharding_fleet::{GONE, NS, last_seen, owners};

/// The invariants after the faults; `Err` says which does not hold (yet).
/// `names`: the objects that exist; `still`: when the ring stood still and
/// the last change was written; from then on only owners may reconcile.
pub(super) async fn check(
    fleet: &Fleet<'_>,
    names: &[String],
    still: Option<Instant>,
) -> Result<(), String> {
    let live: Vec<&str> = fleet.replicas.iter().map(|r| r.id.as_str()).collect();
    let mut sorted = live.clone();
    sorted.sort_unstable();
    let views: Vec<_> = fleet.replicas.iter().map(|r| r.membership.view()).collect();
    let epoch = views.first().map(|v| v.epoch()).unwrap_or_default();
    for (r, v) in fleet.replicas.iter().zip(&views) {
        if v.epoch() != epoch || !v.settled() || v.members() != sorted {
            let states: Vec<String> = fleet
                .replicas
                .iter()
                .map(|r| {
                    format!(
                        "{}: renewals {}, fenced {}, sharder {}, acks {:?}",
                        r.id,
                        r.membership.renewals(),
                        r.membership.fence().is_cancelled(),
                        r.membership.is_sharder(),
                        r.membership.view().acks()
                    )
                })
                .collect();
            return Err(format!(
                "{} sees epoch {} (settled {}) with {:?}; live replicas {sorted:?}, epoch {epoch}; {states:?}",
                r.id,
                v.epoch(),
                v.settled(),
                v.members()
            ));
        }
    }
    let last = last_seen(&fleet.timeline);
    let want = if still.is_some() { "still" } else { "final" };
    for name in names {
        let key = format!("{NS}/{name}");
        match last.get(&key) {
            Some((_, seen)) if seen == want => {}
            other => return Err(format!("{key}: last reconcile {other:?}, want {want}")),
        }
    }
    deletes_observed(fleet, names)?;
    if let Some(since) = still {
        let expected = owners(&sorted, names);
        for span in fleet.timeline.spans.lock().iter() {
            if span.start >= since && expected.get(&span.key) != Some(&span.replica) {
                return Err(format!(
                    "{} reconciled by {} after the ring stood still; its owner is {:?}",
                    span.key,
                    span.replica,
                    expected.get(&span.key)
                ));
            }
        }
    }
    let listed = Api::<ConfigMap>::namespaced(fleet.env.client(), NS)
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list: {e}"))?
        .items;
    let mut listed_names: Vec<String> = listed
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    listed_names.sort_unstable();
    if listed_names != names {
        return Err(format!("LIST has {listed_names:?}, the run made {names:?}"));
    }
    let versions = |items: &mut dyn Iterator<Item = &ConfigMap>| -> BTreeMap<String, String> {
        items
            .map(|c| {
                (
                    c.metadata.name.clone().unwrap_or_default(),
                    c.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect()
    };
    let shard_label = format!("sharding.informer-rs.io/{RING}");
    let drain_label = format!("drain.sharding.informer-rs.io/{RING}");
    let label_of = |c: &ConfigMap, label: &str| {
        c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .cloned()
    };
    if fleet.mode == ShardMode::Label {
        // Every object, created ones included, carries exactly its
        // owner's shard label.
        let expected = owners(&sorted, &listed_names);
        for c in &listed {
            let name = c.metadata.name.clone().unwrap_or_default();
            let want = expected.get(&format!("{NS}/{name}"));
            let (shard, drain) = (label_of(c, &shard_label), label_of(c, &drain_label));
            if shard.as_ref() != want || drain.is_some() {
                return Err(format!(
                    "{name} is labelled {shard:?} (drain {drain:?}); its owner is {want:?}"
                ));
            }
        }
    }
    let mut shares = BTreeMap::new();
    for r in &fleet.replicas {
        let mut share = listed.iter().filter(|c| {
            fleet.mode == ShardMode::Filter || label_of(c, &shard_label).as_deref() == Some(&r.id)
        });
        let server = versions(&mut share);
        let informer = r.mgr.cache().informer::<ConfigMap>();
        let cached = versions(
            &mut informer
                .list()
                .iter()
                .map(AsRef::as_ref)
                .filter(|c: &&ConfigMap| c.metadata.namespace.as_deref() == Some(NS)),
        );
        if cached != server {
            return Err(format!("{}'s cache {cached:?} != LIST {server:?}", r.id));
        }
        shares.insert(r.id.clone(), server.len());
    }
    views_claim_only_live_objects(fleet, names.len(), &shares)
}

/// For each name deleted and not created again: no reconcile that started
/// after the delete returned saw anything but the object gone, and unless
/// the run could have kept the deletion from its owner, the owner has a
/// reconcile that ended after the delete was sent and read the object gone
/// (see the scenario's documentation for when that is required).
fn deletes_observed(fleet: &Fleet<'_>, names: &[String]) -> Result<(), String> {
    let mut last_delete: BTreeMap<&str, &Deleted> = BTreeMap::new();
    for d in &fleet.deletes {
        last_delete.insert(&d.name, d);
    }
    let spans = fleet.timeline.spans.lock();
    for (name, d) in last_delete {
        if names.iter().any(|n| n == name) {
            continue;
        }
        let key = format!("{NS}/{name}");
        let after: Vec<_> = spans
            .iter()
            .filter(|s| s.key == key && s.start >= d.at && s.seen.is_some())
            .collect();
        if let Some(s) = after.iter().find(|s| s.seen.as_deref() != Some(GONE)) {
            return Err(format!(
                "{key} deleted, then {} read {:?}",
                s.replica, s.seen
            ));
        }
        let ended_after = |id: &str| fleet.ended.iter().any(|(e, at)| e == id && *at >= d.at);
        let observer = match fleet.mode {
            // Every replica running then saw the delete event; with a
            // settled ring of exactly them the owner was among them, and
            // with none of them gone and none started since, the key
            // stayed with replicas that saw the deletion.
            ShardMode::Filter => {
                let same = {
                    let mut now: Vec<&String> = fleet.replicas.iter().map(|r| &r.id).collect();
                    let mut then: Vec<&String> = d.running.iter().collect();
                    now.sort_unstable();
                    then.sort_unstable();
                    now == then
                };
                if !d.settled || !same || d.running.iter().any(|r| ended_after(r)) {
                    continue;
                }
                None
            }
            // The shard whose label the deleted version carried, unless it
            // was draining (between shards), that shard stopped, or it had
            // not reconciled this object yet (its cache's events may lag
            // behind the deletion).
            ShardMode::Label => match &d.shard {
                Some(x)
                    if !d.draining
                        && d.running.contains(x)
                        && !ended_after(x)
                        && spans.iter().any(|s| {
                            s.key == key
                                && &s.replica == x
                                && s.start >= d.born
                                && s.end.is_some_and(|end| end <= d.issued)
                        }) =>
                {
                    Some(x)
                }
                _ => continue,
            },
        };
        let seen = spans.iter().any(|s| {
            s.key == key
                && s.seen.as_deref() == Some(GONE)
                && s.end.is_some_and(|end| end >= d.issued)
                && observer.is_none_or(|o| &s.replica == o)
        });
        if !seen {
            let by: Vec<_> = spans
                .iter()
                .filter(|s| s.key == key)
                .map(|s| (s.replica.as_str(), s.start >= d.at, s.seen.as_deref()))
                .collect();
            return Err(format!(
                "{key} was deleted ({d:?}) and no reconcile by {} saw it gone; \
                 its reconciles (replica, after the delete, seen): {by:?}",
                observer.map_or("its owner", String::as_str)
            ));
        }
    }
    Ok(())
}

/// What the replicas' views say they hold: the owned-objects gauges of the
/// live replicas add up to the live objects (so none counts a deleted
/// object), and in label mode the sharder's per-shard counts (when a live
/// replica is the sharder at that moment) equal each shard's share of a
/// fresh LIST.
fn views_claim_only_live_objects(
    fleet: &Fleet<'_>,
    objects: usize,
    shares: &BTreeMap<String, usize>,
) -> Result<(), String> {
    let mut owned = 0;
    let mut per_shard: Option<BTreeMap<String, usize>> = None;
    for r in &fleet.replicas {
        let text = r
            .mgr
            .metrics()
            .encode()
            .map_err(|e| format!("{}: metrics: {e}", r.id))?;
        owned += samples(&text, "sharding_owned_objects")
            .iter()
            .map(|(_, v)| v)
            .sum::<usize>();
        if fleet.mode == ShardMode::Label && r.membership.is_sharder() {
            per_shard = Some(samples(&text, "sharding_objects").into_iter().collect());
        }
    }
    if owned != objects {
        return Err(format!(
            "the replicas' sharding_owned_objects add up to {owned}; {objects} objects exist"
        ));
    }
    // Under heavy machine load the sharder Lease can be between holders
    // for a while; the labels checked above show the sharder did its work.
    if let Some(per_shard) = per_shard {
        let want: BTreeMap<String, usize> = shares
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r.clone(), *n))
            .collect();
        let got: BTreeMap<String, usize> = per_shard.into_iter().filter(|(_, n)| *n > 0).collect();
        if got != want {
            return Err(format!(
                "the sharder counts {got:?} objects per shard; LIST has {want:?}"
            ));
        }
    }
    Ok(())
}

/// The samples of metric `family` in `text`: the `shard` label's value (or
/// "") and the value.
fn samples(text: &str, family: &str) -> Vec<(String, usize)> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once(' ')?;
            let shard = labels
                .split_once("shard=\"")
                .and_then(|(_, rest)| rest.split_once('"'))
                .map_or("", |(s, _)| s);
            let value: f64 = value.parse().ok()?;
            // Gauges of object counts: small non-negative integers.
            Some((shard.to_string(), value.max(0.0) as usize))
        })
        .collect()
}
