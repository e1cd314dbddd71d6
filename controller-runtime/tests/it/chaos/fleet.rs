//! The seeded fault suite's fleet scenario: one manager runs a fleet
//! controller over three to five member clusters (an envtest server each)
//! while every member's objects change, and one member, the victim, fails
//! at a seeded round: its API server *stalls* (every request held: envtest
//! paused, then its open watches ended, so informers, probes and writes all
//! hang) and comes back some rounds later, or it *dies* (its server
//! stopped) for good. The round before the fault writes every object of the
//! victim, and a stall holds the open watch until the victim's reconciles
//! are under way, so that reconciles of the victim hang in the workers.
//! The run checks:
//!
//! - the manager never stops;
//! - every round's writes to the other members are reconciled in their own
//!   cluster (the mirror names it) within [`LIMIT`], during the fault too:
//!   a hung cluster never takes every worker;
//! - the victim is reported: its health turns `Failing` and `/readyz` names
//!   it;
//! - after a stall ends, the victim answers again and converges, a write
//!   that was held during the stall included;
//! - a dead victim disengages cleanly and `/readyz` passes again;
//! - the manager stops cleanly within 30 s.
//!
//! `CHAOS_SEEDS` and `CHAOS_SEED` pick the seeds as for the main suite
//! (`CHAOS_FLEET_SEEDS`, if set, counts this scenario's seeds instead);
//! `CHAOS_FLEET_PARALLEL` (default 2) how many run at once.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use controller_runtime::cluster::{ClusterHealth, EngageBackoff};
use controller_runtime::manager::Manager;
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use super::seeds::Seeds;
use crate::fixture::spawn_manager;

/// The limit of every wait on a condition (a loaded 2-core machine).
const LIMIT: Duration = Duration::from_secs(30);
/// Workers of the fleet controller: fewer than the victim's objects, so a
/// controller that let one cluster take every worker would stall them all.
const WORKERS: usize = 3;
const LABEL: &str = "chaos-fleet";

/// How the victim fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every request hangs for `rounds` rounds, then the server answers
    /// again.
    Stall { rounds: usize },
    /// The server stops for good.
    Die,
}

/// Everything one seed decides.
#[derive(Debug, Clone)]
struct Schedule {
    seed: u64,
    members: usize,
    /// Objects `o0..` in every member.
    objects: usize,
    victim: usize,
    fault: Fault,
    /// Rounds before the fault (the last writes every object of the victim).
    before: usize,
    /// Rounds after the fault ends (or, for a death, after it).
    after: usize,
    /// How long each reconcile works before it writes.
    reconcile_ms: u64,
    /// For each round, the object each member writes.
    writes: Vec<Vec<usize>>,
}

impl Schedule {
    fn from_seed(seed: u64) -> Schedule {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xf1ee_7000);
        let members = rng.random_range(3..=5);
        let objects = rng.random_range(WORKERS + 1..=WORKERS + 3);
        let fault = if rng.random_range(0..2) == 0 {
            Fault::Stall {
                rounds: rng.random_range(1..=3),
            }
        } else {
            Fault::Die
        };
        let before = rng.random_range(1..=2);
        let after = rng.random_range(1..=2);
        let during = match fault {
            Fault::Stall { rounds } => rounds,
            Fault::Die => 0,
        };
        let rounds = before + during + after;
        let writes = (0..rounds)
            .map(|_| (0..members).map(|_| rng.random_range(0..objects)).collect())
            .collect();
        Schedule {
            seed,
            members,
            objects,
            victim: rng.random_range(0..members),
            fault,
            before,
            after,
            reconcile_ms: rng.random_range(0..20),
            writes,
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fleet seed {}: {} members of {} objects, victim m{} {:?} after {} rounds, \
             {} rounds after, reconcile {} ms",
            self.seed,
            self.members,
            self.objects,
            self.victim,
            self.fault,
            self.before,
            self.after,
            self.reconcile_ms
        )?;
        for (i, w) in self.writes.iter().enumerate() {
            writeln!(f, "  round {i:2}: {w:?}")?;
        }
        Ok(())
    }
}

/// Mirrors each labelled ConfigMap `o` into `mirror-o` in its own cluster
/// (with the cluster's name) and notes each reconcile as it starts. While
/// `hold` names a cluster, that cluster's reconciles wait before writing.
struct Mirror {
    work: Duration,
    started: Mutex<Vec<(String, String)>>,
    hold: watch::Sender<Option<String>>,
}

impl ObjectReconciler<ConfigMap> for Mirror {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let cluster = match ctx.cluster() {
            "" => "none",
            member => member,
        }
        .to_string();
        self.started.lock().push((cluster.clone(), cm.name_any()));
        let mut hold = self.hold.subscribe();
        let _ = hold
            .wait_for(|held| held.as_deref() != Some(cluster.as_str()))
            .await;
        if !self.work.is_zero() {
            tokio::time::sleep(self.work).await;
        }
        let mut data = cm.data.clone().unwrap_or_default();
        data.insert("cluster".into(), cluster);
        let mirror = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("mirror-{}", cm.name_any())},
            "data": data,
        });
        ctx.api()
            .patch(
                &format!("mirror-{}", cm.name_any()),
                &PatchParams::apply("chaos-fleet").force(),
                &Patch::Apply(&mirror),
            )
            .await?;
        Ok(Action::done())
    }
}

fn member(i: usize) -> String {
    format!("m{i}")
}

fn object(i: usize) -> String {
    format!("o{i}")
}

/// Sets the labelled ConfigMap `name`'s `v` in `env`.
async fn put(env: &TestEnv, name: &str, value: u32) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {LABEL: "src"}},
        "data": {"v": value.to_string()},
    });
    api.patch(
        name,
        &PatchParams::apply("chaos").force(),
        &Patch::Apply(&cm),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("write {name}: {e}"))
}

/// Whether `mirror-<name>` in `env` holds `value` from `cluster`.
async fn mirrored(env: &TestEnv, cluster: &str, name: &str, value: u32) -> bool {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let Ok(Some(cm)) = api.get_opt(&format!("mirror-{name}")).await else {
        return false;
    };
    let data = cm.data.unwrap_or_default();
    data.get("v") == Some(&value.to_string())
        && data.get("cluster").map(String::as_str) == Some(cluster)
}

async fn wait_until<F, Fut>(what: &str, mut cond: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + LIMIT;
    while !cond().await {
        if Instant::now() >= deadline {
            return Err(format!("not within {LIMIT:?}: {what}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Waits until every `(member, object)` in `want` mirrors its value.
async fn converged(
    envs: &[Option<TestEnv>],
    want: &BTreeMap<(usize, usize), u32>,
    what: &str,
) -> Result<(), String> {
    wait_until(what, || async {
        for (&(m, o), &v) in want {
            let Some(env) = &envs[m] else { continue };
            if !mirrored(env, &member(m), &object(o), v).await {
                return false;
            }
        }
        true
    })
    .await
    .map_err(|e| format!("{e}; expected {want:?}"))
}

/// What one seed measured.
#[derive(Debug, Default)]
struct Outcome {
    reconciles: usize,
    /// From the fault to the other members' first converged round.
    others_during: Duration,
    /// From the end of a stall to the victim converged.
    recovered: Option<Duration>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fleet_fault_suite() {
    if envtest::skip_on_existing_cluster("several in-process API servers that stall and die") {
        return;
    }
    let seeds = Seeds::from_env(Some("CHAOS_FLEET_SEEDS"), "CHAOS_FLEET_PARALLEL", 2);
    let results: Vec<(Schedule, Result<Outcome, String>)> = seeds
        .run(|seed| async move {
            let schedule = Schedule::from_seed(seed);
            let outcome = run_seed(&schedule).await;
            (schedule, outcome)
        })
        .await;
    let (mut reconciles, mut stalls, mut deaths) = (0, 0, 0);
    let (mut slowest_others, mut slowest_recovery) = (Duration::ZERO, Duration::ZERO);
    let mut failures = Vec::new();
    for (schedule, result) in &results {
        match result {
            Ok(o) => {
                reconciles += o.reconciles;
                slowest_others = slowest_others.max(o.others_during);
                if let Some(r) = o.recovered {
                    slowest_recovery = slowest_recovery.max(r);
                }
                match schedule.fault {
                    Fault::Stall { .. } => stalls += 1,
                    Fault::Die => deaths += 1,
                }
            }
            Err(why) => failures.push(format!("{why}\n{schedule}")),
        }
    }
    eprintln!(
        "chaos (fleet): {}; \
         {stalls} stalls, {deaths} deaths; {reconciles} reconciles; others converged during \
         the fault within {slowest_others:.1?}; stalled victims recovered within \
         {slowest_recovery:.1?}",
        seeds.summary(failures.len()),
    );
    seeds.verdict("fleet ", &failures);
}

/// Looks shorter than the waits (>= 5x margins), a probe that gives up on
/// a hung server after 1 s.
fn backoff() -> EngageBackoff {
    EngageBackoff::default()
        .initial(Duration::from_millis(50))
        .max(Duration::from_millis(500))
        .probe_interval(Duration::from_millis(200))
        .probe_timeout(Duration::from_secs(1))
}

async fn run_seed(s: &Schedule) -> Result<Outcome, String> {
    let own = TestEnv::start().await.map_err(|e| format!("hub: {e}"))?;
    let mut envs = Vec::new();
    for _ in 0..s.members {
        envs.push(Some(
            TestEnv::start().await.map_err(|e| format!("member: {e}"))?,
        ));
    }
    let mgr = Manager::builder(own.client())
        .fleet_backoff(backoff())
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await
        .map_err(|e| format!("manager: {e}"))?;
    // Any member down makes the manager unready (the default leaves them out).
    mgr.fleet().readyz_threshold(0);
    let mirror = Arc::new(Mirror {
        work: Duration::from_millis(s.reconcile_ms),
        started: Mutex::new(Vec::new()),
        hold: watch::Sender::new(None),
    });
    mgr.fleet_controller::<ConfigMap>()
        .named("chaos-mirror")
        .max_concurrent_reconciles(WORKERS)
        .for_event_filter(controller_runtime::predicate::from_fn(|cm: &ConfigMap| {
            cm.labels().contains_key(LABEL)
        }))
        .complete(Arc::clone(&mirror))
        .map_err(|e| format!("controller: {e}"))?;
    let (stop, run) = spawn_manager(&mgr);
    for (i, env) in envs.iter().enumerate() {
        if let Some(env) = env {
            mgr.fleet()
                .engage(&member(i), env.client())
                .map_err(|e| format!("engage: {e}"))?;
        }
    }
    let result = drive(s, &mgr, &mut envs, &mirror, &run).await;
    stop.cancel();
    let stopped = tokio::time::timeout(LIMIT, run).await;
    let mut outcome = result?;
    outcome.reconciles = mirror.started.lock().len();
    match stopped {
        Ok(Ok(Ok(()))) => Ok(outcome),
        other => Err(format!(
            "seed {}: manager did not stop cleanly: {other:?}",
            s.seed
        )),
    }
}

async fn drive(
    s: &Schedule,
    mgr: &Manager,
    envs: &mut [Option<TestEnv>],
    mirror: &Mirror,
    run: &tokio::task::JoinHandle<Result<(), controller_runtime::manager::ManagerError>>,
) -> Result<Outcome, String> {
    let seed = s.seed;
    let victim = member(s.victim);
    let mut outcome = Outcome::default();
    // Every object's last value, per member.
    let mut want: BTreeMap<(usize, usize), u32> = BTreeMap::new();
    for (m, env) in envs.iter().enumerate() {
        if let Some(env) = env {
            for o in 0..s.objects {
                put(env, &object(o), 0).await?;
                want.insert((m, o), 0);
            }
        }
    }
    converged(envs, &want, "the first objects mirrored").await?;
    let mut faulted_at = None;
    let mut held_write: Option<tokio::task::JoinHandle<Result<(), String>>> = None;
    let stall_ends = match s.fault {
        Fault::Stall { rounds } => s.before + rounds,
        Fault::Die => usize::MAX,
    };
    for (round, writes) in s.writes.iter().enumerate() {
        let value = u32::try_from(round + 1).unwrap_or(u32::MAX);
        if round == stall_ends {
            // The stall ends: held requests go on.
            if let Some(env) = &envs[s.victim] {
                env.faults().resume();
            }
            let resumed = Instant::now();
            if let Some(write) = held_write.take() {
                tokio::time::timeout(LIMIT, write)
                    .await
                    .map_err(|_| format!("seed {seed}: the held write did not complete"))?
                    .map_err(|e| format!("seed {seed}: held write: {e}"))??;
            }
            wait_until("the victim answers again", || async {
                mgr.fleet().health(&victim) == Some(ClusterHealth::Ready)
            })
            .await
            .map_err(|e| format!("seed {seed}: {e}"))?;
            converged(
                envs,
                &want,
                "every member, the victim included, after the stall",
            )
            .await
            .map_err(|e| format!("seed {seed}: {e}"))?;
            outcome.recovered = Some(resumed.elapsed());
        }
        let faulted = faulted_at.is_some() && round < stall_ends;
        let mut this_round = BTreeMap::new();
        for (m, &o) in writes.iter().enumerate() {
            if faulted && m == s.victim {
                continue;
            }
            let Some(env) = &envs[m] else { continue };
            put(env, &object(o), value).await?;
            want.insert((m, o), value);
            this_round.insert((m, o), value);
        }
        if round + 1 == s.before {
            // Every object of the victim changes, then the fault hits.
            let before = mirror.started.lock().len();
            if matches!(s.fault, Fault::Stall { .. }) {
                mirror.hold.send_replace(Some(victim.clone()));
            }
            if let Some(env) = &envs[s.victim] {
                for o in 0..s.objects {
                    put(env, &object(o), value).await?;
                    want.insert((s.victim, o), value);
                }
            }
            inject(s, envs, mirror, before).await?;
            faulted_at = Some(Instant::now());
            if let (Fault::Stall { .. }, Some(env)) = (s.fault, &envs[s.victim]) {
                // A write sent during the stall hangs, and lands after it.
                let (client, ns) = (env.client(), env.namespace().to_string());
                let o = s.objects - 1;
                let late = value + 1000;
                want.insert((s.victim, o), late);
                held_write = Some(tokio::spawn(async move {
                    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
                    let cm = json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": object(o), "labels": {LABEL: "src"}},
                        "data": {"v": late.to_string()},
                    });
                    api.patch(
                        &object(o),
                        &PatchParams::apply("chaos").force(),
                        &Patch::Apply(&cm),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                }));
            }
        }
        let others: BTreeMap<_, _> = if faulted_at.is_some() && round < stall_ends {
            this_round
                .into_iter()
                .filter(|((m, _), _)| *m != s.victim)
                .collect()
        } else {
            this_round
        };
        converged(envs, &others, &format!("round {round} reconciled"))
            .await
            .map_err(|e| format!("seed {seed}: {e}"))?;
        if let Some(at) = faulted_at
            && round + 1 == s.before
        {
            outcome.others_during = at.elapsed();
            wait_until("the victim reported failing", || async {
                matches!(
                    mgr.fleet().health(&victim),
                    Some(ClusterHealth::Failing { .. })
                )
            })
            .await
            .map_err(|e| format!("seed {seed}: {e}"))?;
            let readiness = mgr.readyz_checks().run_one("fleet clusters");
            match readiness {
                Some(Err(message)) if message.contains(&format!("{victim} (")) => {}
                other => {
                    return Err(format!(
                        "seed {seed}: /readyz does not name the victim: {other:?}"
                    ));
                }
            }
        }
        if run.is_finished() {
            return Err(format!("seed {seed}: the manager stopped in round {round}"));
        }
    }
    if s.fault == Fault::Die {
        let gone = tokio::time::timeout(LIMIT, mgr.fleet().disengage(&victim))
            .await
            .map_err(|_| format!("seed {seed}: disengaging the dead victim hung"))?;
        if !gone {
            return Err(format!("seed {seed}: the dead victim was not engaged"));
        }
        if mgr.readyz_checks().run_one("fleet clusters") != Some(Ok(())) {
            return Err(format!(
                "seed {seed}: /readyz fails with the dead victim disengaged"
            ));
        }
    }
    converged(envs, &want, "every live member at the end")
        .await
        .map_err(|e| format!("seed {seed}: {e}"))?;
    if run.is_finished() {
        return Err(format!("seed {seed}: the manager stopped"));
    }
    Ok(outcome)
}

/// Fails the victim. A stall waits until a reconcile of the victim started
/// since the `before`th (held by the mirror before its write), holds every
/// new request, ends the open watches (their return hangs) and lets the
/// held reconciles write (they hang); a death stops the server.
async fn inject(
    s: &Schedule,
    envs: &mut [Option<TestEnv>],
    mirror: &Mirror,
    before: usize,
) -> Result<(), String> {
    let victim = member(s.victim);
    match s.fault {
        Fault::Stall { .. } => {
            let Some(env) = &envs[s.victim] else {
                return Ok(());
            };
            wait_until("a reconcile of the victim under way", || async {
                mirror.started.lock()[before..]
                    .iter()
                    .any(|(c, _)| *c == victim)
            })
            .await
            .map_err(|e| format!("seed {}: {e}", s.seed))?;
            env.faults().pause();
            env.faults().drop_watches();
            mirror.hold.send_replace(None);
        }
        Fault::Die => {
            envs[s.victim] = None;
        }
    }
    Ok(())
}
