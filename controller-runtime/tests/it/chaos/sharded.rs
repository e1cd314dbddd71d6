//! The seeded fault suite's sharded scenario: 3 to 5 replicas of a sharded
//! ConfigMap controller on one envtest, while the seed's schedule changes
//! objects, kills replicas and starts new ones, freezes replicas' Lease
//! writes (a frozen replica fences itself and is replaced) and drops every
//! watch. After the last fault every object is changed once more, and the
//! run checks, from the recorded reconcile spans and the replicas' views:
//!
//! - no object was ever reconciled by two replicas at once;
//! - every object's last change was reconciled; once the ring stands
//!   still, one more change to every object is reconciled by its owner in
//!   the final ring and by no other replica;
//! - the live replicas agree on one settled epoch whose members are exactly
//!   the live replicas (each object has exactly one owner shard);
//! - each live replica's cache equals a fresh LIST (filter mode caches
//!   everything).
//!
//! Even seeds run in label mode: the sharder labels each object with its
//! shard and each replica caches its own label only. There the run also
//! checks that every object carries exactly its owner's shard label and no
//! drain label, and that each replica's cache equals a fresh LIST of its
//! share.
//!
//! `CHAOS_SEEDS` and `CHAOS_SEED` pick the seeds as for the main suite;
//! `CHAOS_SHARDED_PARALLEL` (default 12) how many run at once: a run mostly
//! waits for Leases to expire, so more of them share the CPU well.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::ListParams;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::env_u64;
use controller_runtime::sharding::config::ShardMode;

use crate::sharding::LEASE;
use crate::sharding_fleet::{
    NS, Replica, Timeline, check_no_overlap, last_seen, owners, start_replica_in, write_all,
};

const RING: &str = "chaos";
/// How long a run may take to converge after its last step.
const QUIESCE: Duration = Duration::from_secs(20);

/// One step of a sharded run.
#[derive(Debug, Clone)]
enum Step {
    /// Set object `name`'s value.
    Update { name: usize, value: u32 },
    /// Kill replica number `which` (modulo the live ones) and start a new one.
    KillAndRestart { which: usize },
    /// Kill replica `which` without a replacement (only while more than
    /// three run).
    Kill { which: usize },
    /// Start one more replica (only while fewer than five run).
    Start,
    /// Replica `which`'s Lease writes fail for `ms`.
    FreezeLeases { which: usize, ms: u64 },
    /// End every open watch.
    DropWatches,
    /// Let the system run.
    Pause { ms: u64 },
}

struct Schedule {
    seed: u64,
    mode: ShardMode,
    replicas: usize,
    objects: usize,
    reconcile_ms: u64,
    steps: Vec<Step>,
}

impl Schedule {
    fn from_seed(seed: u64) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5ba2_d3d0);
        let replicas = rng.random_range(3..=5);
        let objects = rng.random_range(6..=10);
        let len = rng.random_range(5..=8);
        let mut steps = Vec::new();
        for value in 1..=len {
            let which = rng.random_range(0..8);
            steps.push(match rng.random_range(0..100) {
                0..35 => Step::Update {
                    name: rng.random_range(0..objects),
                    value,
                },
                35..47 => Step::KillAndRestart { which },
                47..53 => Step::Kill { which },
                53..59 => Step::Start,
                59..71 => Step::FreezeLeases {
                    which,
                    ms: rng.random_range(200..800),
                },
                71..83 => Step::DropWatches,
                _ => Step::Pause {
                    ms: rng.random_range(20..300),
                },
            });
        }
        Schedule {
            seed,
            mode: if seed.is_multiple_of(2) {
                ShardMode::Label
            } else {
                ShardMode::Filter
            },
            replicas,
            objects,
            reconcile_ms: rng.random_range(0..15),
            steps,
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sharded seed {} ({:?} mode, {} replicas, {} objects, reconcile {} ms):",
            self.seed, self.mode, self.replicas, self.objects, self.reconcile_ms
        )?;
        for (i, step) in self.steps.iter().enumerate() {
            writeln!(f, "  {i:2}: {step:?}")?;
        }
        Ok(())
    }
}

/// What one seed measured.
#[derive(Debug, Default)]
struct Outcome {
    reconciles: usize,
    kills: usize,
    fenced: usize,
    converge: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sharded_fault_suite() {
    let first = env_u64("CHAOS_SEED", 1);
    let count = env_u64("CHAOS_SEEDS", 24);
    let parallel = usize::try_from(env_u64("CHAOS_SHARDED_PARALLEL", 12).max(1)).unwrap_or(12);
    let started = Instant::now();
    let results: Vec<(Schedule, Result<Outcome, String>)> =
        futures::stream::iter(first..first + count)
            .map(|seed| async move {
                let schedule = Schedule::from_seed(seed);
                let outcome = run_seed(&schedule).await;
                (schedule, outcome)
            })
            .buffer_unordered(parallel)
            .collect()
            .await;
    let (mut reconciles, mut kills, mut fenced, mut slowest) = (0, 0, 0, Duration::ZERO);
    let mut failures = Vec::new();
    for (schedule, result) in &results {
        match result {
            Ok(o) => {
                reconciles += o.reconciles;
                kills += o.kills;
                fenced += o.fenced;
                slowest = slowest.max(o.converge);
            }
            Err(why) => failures.push(format!("{why}\n{schedule}")),
        }
    }
    eprintln!(
        "chaos (sharded): {count} seeds from {first} in {:.1?} ({parallel} at once): {} failed; \
         {kills} replicas killed, {fenced} fenced by frozen lease writes; {reconciles} reconciles; \
         slowest convergence {slowest:.1?}",
        started.elapsed(),
        failures.len(),
    );
    assert!(
        failures.is_empty(),
        "{} of {count} sharded seeds failed; replay one with CHAOS_SEED=<seed> CHAOS_SEEDS=1\n{}",
        failures.len(),
        failures.join("\n")
    );
}

struct Fleet<'a> {
    env: &'a envtest::TestEnv,
    timeline: Arc<Timeline>,
    replicas: Vec<Replica>,
    next_id: usize,
    work: Duration,
    mode: ShardMode,
    outcome: Outcome,
}

impl Fleet<'_> {
    async fn start_one(&mut self) {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let r =
            start_replica_in(self.env, RING, &id, &self.timeline, 2, self.work, self.mode).await;
        self.replicas.push(r);
    }

    /// Replaces replicas whose manager ended (fenced) with new ones.
    async fn top_up(&mut self, want: usize) {
        let before = self.replicas.len();
        self.replicas.retain(|r| !r.run.is_finished());
        self.outcome.fenced += before - self.replicas.len();
        while self.replicas.len() < want {
            self.start_one().await;
        }
    }

    fn kill(&mut self, which: usize) {
        if self.replicas.is_empty() {
            return;
        }
        let r = self.replicas.remove(which % self.replicas.len());
        r.kill();
        self.outcome.kills += 1;
    }
}

async fn run_seed(schedule: &Schedule) -> Result<Outcome, String> {
    let env = envtest::TestEnv::start()
        .await
        .map_err(|e| format!("envtest: {e}"))?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let names: Vec<String> = (0..schedule.objects).map(|i| format!("o{i}")).collect();
    write_all(&api, &names, "0").await;
    let mut fleet = Fleet {
        env: &env,
        timeline: Arc::new(Timeline::default()),
        replicas: Vec::new(),
        next_id: 0,
        work: Duration::from_millis(schedule.reconcile_ms),
        mode: schedule.mode,
        outcome: Outcome::default(),
    };
    let mut want = schedule.replicas;
    fleet.top_up(want).await;
    for step in &schedule.steps {
        match step {
            Step::Update { name, value } => {
                write_all(&api, &names[*name..=*name], &value.to_string()).await;
            }
            Step::KillAndRestart { which } => {
                fleet.kill(*which);
                fleet.top_up(want).await;
            }
            Step::Kill { which } => {
                if want > 3 {
                    want -= 1;
                    fleet.kill(*which);
                }
            }
            Step::Start => {
                if want < 5 {
                    want += 1;
                    fleet.top_up(want).await;
                }
            }
            Step::FreezeLeases { which, ms } => {
                if !fleet.replicas.is_empty() {
                    let gate = Arc::clone(&fleet.replicas[which % fleet.replicas.len()].gate);
                    gate.freeze_lease_writes.store(true, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(*ms)).await;
                    gate.freeze_lease_writes.store(false, Ordering::SeqCst);
                }
            }
            Step::DropWatches => env.faults().drop_watches(),
            Step::Pause { ms } => tokio::time::sleep(Duration::from_millis(*ms)).await,
        }
        fleet.top_up(want).await;
    }
    // Quiescence: no more faults; a fenced replica is replaced, then every
    // object changes once more and must be reconciled (by whoever owned it
    // then: the ring may still be moving).
    fleet.top_up(want).await;
    write_all(&api, &names, "final").await;
    let quiet = Instant::now();
    let mut last_problem = String::new();
    let mut converged = loop {
        fleet.top_up(want).await;
        match check(&fleet, &names, None).await {
            Ok(()) => break true,
            Err(problem) => last_problem = problem,
        }
        if quiet.elapsed() > QUIESCE {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The ring is still now: one more change, reconciled by each object's
    // owner and by no other replica.
    let still = Instant::now();
    if converged {
        write_all(&api, &names, "still").await;
        converged = loop {
            match check(&fleet, &names, Some(still)).await {
                Ok(()) => break true,
                Err(problem) => last_problem = problem,
            }
            if quiet.elapsed() > QUIESCE {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
    }
    fleet.outcome.converge = quiet.elapsed();
    if std::env::var_os("CHAOS_VERBOSE").is_some() {
        eprintln!(
            "sharded seed {}: converged {converged} in {:?}",
            schedule.seed, fleet.outcome.converge
        );
    }
    let overlap = check_no_overlap(&fleet.timeline);
    fleet.outcome.reconciles = fleet.timeline.spans.lock().len();
    for r in fleet.replicas.drain(..) {
        r.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), r.run).await;
    }
    let outcome = std::mem::take(&mut fleet.outcome);
    drop(env);
    overlap.map_err(|e| format!("seed {}: {e}", schedule.seed))?;
    if !converged {
        return Err(format!(
            "seed {}: did not converge within {QUIESCE:?} (lease {LEASE:?}): {last_problem}",
            schedule.seed
        ));
    }
    Ok(outcome)
}

/// The invariants after the faults; `Err` says which does not hold (yet).
/// `still`: when the ring stood still and the last change was written;
/// from then on only owners may reconcile.
async fn check(fleet: &Fleet<'_>, names: &[String], still: Option<Instant>) -> Result<(), String> {
    let live: Vec<&str> = fleet.replicas.iter().map(|r| r.id.as_str()).collect();
    let mut sorted = live.clone();
    sorted.sort_unstable();
    let views: Vec<_> = fleet.replicas.iter().map(|r| r.membership.view()).collect();
    let epoch = views.first().map(|v| v.epoch).unwrap_or_default();
    for (r, v) in fleet.replicas.iter().zip(&views) {
        if v.epoch != epoch || !v.settled() || v.ring.members() != sorted {
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
                        r.membership.view().acks
                    )
                })
                .collect();
            return Err(format!(
                "{} sees epoch {} (settled {}) with {:?}; live replicas {sorted:?}, epoch {epoch}; {states:?}",
                r.id,
                v.epoch,
                v.settled(),
                v.ring.members()
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
    let shard_label = format!("shard.informer-rs.io/{RING}");
    let drain_label = format!("drain.shard.informer-rs.io/{RING}");
    let label_of = |c: &ConfigMap, label: &str| {
        c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .cloned()
    };
    if fleet.mode == ShardMode::Label {
        // Every object carries exactly its owner's shard label.
        let all_names: Vec<String> = listed
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let expected = owners(&sorted, &all_names);
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
    }
    Ok(())
}
