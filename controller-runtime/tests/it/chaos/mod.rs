//! The seeded fault suite: for each seed, a random workload of widget
//! creates, updates and deletes (and tampering with the ConfigMaps the
//! controller owns) runs against envtest while faults are injected (dropped
//! watches, compaction so resumes hit 410, 500/429/504 bursts, 409 on
//! writes, latency, server pauses), with reconciles that fail, panic and
//! take time, and informer handlers that panic or are stuck. After
//! quiescence the run checks:
//!
//! - every informer cache equals a fresh LIST (no lost or phantom object,
//!   no stale version);
//! - every widget's ConfigMap holds its data and no ConfigMap outlives its
//!   widget (each was reconciled after its last change);
//! - no key was reconciled by two workers at once;
//! - no handler saw an update or delete it could not place;
//! - a stuck handler's backlog is reported, and drains once it is released.
//!
//! The fleet scenario ([`fleet`]) fails one member cluster of a fleet
//! controller (its API server stalls or dies) while the others converge.
//!
//! `CHAOS_SEEDS` (default 24) sets how many seeds run, `CHAOS_SEED` the
//! first one (default 1), `CHAOS_PARALLEL` how many at once (default 4).
//! A failing seed prints its schedule; rerun it alone with
//! `CHAOS_SEED=<seed> CHAOS_SEEDS=1`. The schedule is fixed by the seed;
//! the interleaving with the real clock and HTTP is not.

mod fleet;
pub(crate) mod gate;
mod handlers;
mod leader;
mod schedule;
mod seeds;
mod sharded;
mod sharded_check;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use controller_runtime::manager::Manager;
use envtest::{FailureRule, TestEnv};
use informer_core::shared_informer::SharedIndexInformer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::{DeleteParams, ListParams, PostParams};
use kube_core::Resource;
use tokio::time::Instant;

use crate::widget::{
    Journal, NS, Widget, WidgetReconciler, cm_name, configmaps, env_with_crd, spawn_manager,
    widget, widgets,
};
use handlers::{Mirror, Panicky, Stuck, name_of, rv_of};
use schedule::{Fault, NAMES, Schedule, Step, Target};
use seeds::Seeds;

/// How long a run may take to converge after its last step.
const QUIESCE: Duration = Duration::from_secs(30);

fn widget_name(i: usize) -> String {
    format!("w{i}")
}

/// What one seed measured.
#[derive(Debug, Default)]
struct Outcome {
    faults: BTreeMap<String, usize>,
    reconciles: usize,
    handler_panics: u64,
    stuck_pending_max: usize,
    converge: Duration,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seeded_fault_suite() {
    let seeds = Seeds::from_env(None, "CHAOS_PARALLEL", 4);
    let results: Vec<(Schedule, Result<Outcome, String>)> = seeds
        .run(|seed| async move {
            let schedule = Schedule::from_seed(seed);
            let outcome = run_seed(&schedule).await;
            (schedule, outcome)
        })
        .await;

    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    let (mut reconciles, mut panics, mut stuck_max) = (0, 0, 0);
    let mut slowest = Duration::ZERO;
    let mut failures = Vec::new();
    for (schedule, result) in &results {
        match result {
            Ok(o) => {
                for (kind, n) in &o.faults {
                    *faults.entry(kind.clone()).or_default() += n;
                }
                reconciles += o.reconciles;
                panics += o.handler_panics;
                stuck_max = stuck_max.max(o.stuck_pending_max);
                slowest = slowest.max(o.converge);
            }
            Err(why) => failures.push(format!("{why}\n{schedule}")),
        }
    }
    // The figures docs/reliability.md quotes come from this summary.
    eprintln!(
        "chaos: {}; faults {faults:?}; {reconciles} reconciles; {panics} handler panics; \
         stuck handler backlog up to {stuck_max}; slowest convergence {slowest:.1?}",
        seeds.summary(failures.len()),
    );
    seeds.verdict("", &failures);
}

/// Runs one schedule and checks the invariants; `Err` names what broke.
async fn run_seed(schedule: &Schedule) -> Result<Outcome, String> {
    let env = env_with_crd().await;
    let client = env.client();
    let mgr = Manager::builder(client.clone())
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await
        .map_err(|e| format!("manager: {e}"))?;
    let journal = Arc::new(Journal::default());
    let mut reconciler = WidgetReconciler::new(&mgr, Arc::clone(&journal));
    reconciler.work = Duration::from_millis(schedule.reconcile_ms);
    mgr.controller::<Widget>()
        .owns::<ConfigMap>()
        .max_concurrent_reconciles(3)
        .complete(reconciler)
        .map_err(|e| format!("controller: {e}"))?;
    let widget_informer: SharedIndexInformer<Widget> = mgr.informer_factory().informer();
    let cm_informer: SharedIndexInformer<ConfigMap> = mgr.informer_factory().informer();
    let mirror = Arc::new(Mirror::default());
    let cm_mirror = Arc::new(Mirror::default());
    let panicky = Arc::new(Panicky {
        every: schedule.handler_panic_every,
        seen: Default::default(),
    });
    let stuck = Arc::new(Stuck::default());
    let reg = |r: Result<_, informer_core::shared_informer::InformerError>| {
        r.map_err(|e| format!("add handler: {e}"))
    };
    reg(widget_informer.add_event_handler(Arc::clone(&mirror)))?;
    reg(cm_informer.add_event_handler(Arc::clone(&cm_mirror)))?;
    let panicky_reg = reg(widget_informer.add_event_handler(Arc::clone(&panicky)))?;
    let stuck_reg = reg(cm_informer.add_event_handler(Arc::clone(&stuck)))?;
    let (stop, run) = spawn_manager(&mgr);

    let mut outcome = Outcome::default();
    for step in &schedule.steps {
        if let Step::Fault(f) = step {
            *outcome.faults.entry(f.kind()).or_default() += 1;
        }
        drive(&env, step).await;
        outcome.stuck_pending_max = outcome.stuck_pending_max.max(stuck_reg.pending());
    }
    // Quiescence: no more faults; wait for the invariants to hold.
    env.faults().clear_failures();
    env.faults().set_latency(Duration::ZERO);
    env.faults().resume();
    let quiet = Instant::now();
    let mut last_problem = String::new();
    let converged = loop {
        match check(&client, &widget_informer, &cm_informer, &mirror, &cm_mirror).await {
            Ok(()) => break true,
            Err(problem) => last_problem = problem,
        }
        if quiet.elapsed() > QUIESCE {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    outcome.converge = quiet.elapsed();
    // What the reflectors went through, for a run that did not converge.
    let reflector_story = if converged {
        String::new()
    } else {
        format!(
            "widgets at rv {:?}, configmaps at rv {:?}, server at rv {}, now {:.3} s (unix)\n{}",
            widget_informer.last_sync_resource_version(),
            cm_informer.last_sync_resource_version(),
            env.current_revision(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            reflector_metrics(&mgr)
        )
    };
    // The stuck handler held everything for the ConfigMap informer back the
    // whole time; it was reported, and it drains once released.
    let backlog_reported = stuck.seen.load(Ordering::SeqCst) == 0 || stuck_reg.pending() > 0;
    outcome.stuck_pending_max = outcome.stuck_pending_max.max(stuck_reg.pending());
    stuck.released.store(true, Ordering::SeqCst);
    let drained = wait_for(Duration::from_secs(10), || stuck_reg.pending() == 0).await;
    // A handler that entered its panicking call is counted once the call
    // unwinds: wait for that rather than read the counter mid-call.
    let panics_due = schedule.handler_panic_every > 0
        && panicky.seen.load(Ordering::SeqCst) >= schedule.handler_panic_every;
    let panics_counted =
        !panics_due || wait_for(Duration::from_secs(10), || panicky_reg.panics() > 0).await;
    outcome.handler_panics = panicky_reg.panics();
    outcome.reconciles = journal.attempts.lock().values().map(Vec::len).sum();
    let overlap = journal.overlap.lock().clone();
    stop.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(30), run).await;
    drop(env);

    if !converged {
        return Err(format!(
            "seed {}: did not converge within {QUIESCE:?}: {last_problem}\n\
             reflector metrics at the deadline:\n{reflector_story}",
            schedule.seed
        ));
    }
    if let Some(key) = overlap {
        return Err(format!(
            "seed {}: {key} was reconciled by two workers at once",
            schedule.seed
        ));
    }
    if !backlog_reported {
        return Err(format!(
            "seed {}: the stuck handler's backlog was not reported",
            schedule.seed
        ));
    }
    if !drained {
        return Err(format!(
            "seed {}: the released handler did not drain",
            schedule.seed
        ));
    }
    if !panics_counted {
        return Err(format!(
            "seed {}: handler panics were not counted",
            schedule.seed
        ));
    }
    match stopped {
        Ok(Ok(Ok(()))) => Ok(outcome),
        other => Err(format!(
            "seed {}: manager did not stop cleanly: {other:?}",
            schedule.seed
        )),
    }
}

/// The manager's `informer_*` series other than histogram buckets: lists,
/// list failures, relists, watch restarts and the backoff waits (count and
/// total seconds) of each reflector. A run that does not converge prints
/// them, so that a reflector still waiting out a long backoff at the
/// deadline can be told apart from an event that was lost.
fn reflector_metrics(mgr: &Manager) -> String {
    match mgr.metrics().encode() {
        Ok(text) => text
            .lines()
            .filter(|l| l.starts_with("informer_") && !l.contains("_bucket{"))
            .filter(|l| !l.starts_with("informer_handler_pending"))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("metrics could not be encoded: {e}"),
    }
}

async fn wait_for(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Runs one step. The driver's own requests meet the injected faults too:
/// each write is tried a few times, and a write that still fails is simply
/// not part of the desired state (the checks read the server).
async fn drive(env: &TestEnv, step: &Step) {
    let client = env.client();
    let api = widgets(&client);
    match step {
        Step::Create {
            name,
            value,
            fail_times,
            panic_times,
        } => {
            let mut w = widget(&widget_name(*name), &[("v", &value.to_string())]);
            w.spec.fail_times = *fail_times;
            w.spec.panic_times = *panic_times;
            retry(|| async { api.create(&PostParams::default(), &w).await.map(|_| ()) }).await;
        }
        Step::Update { name, value } => {
            retry(|| async {
                let mut w = api.get(&widget_name(*name)).await?;
                w.spec.data = BTreeMap::from([("v".into(), value.to_string())]);
                api.replace(&widget_name(*name), &PostParams::default(), &w)
                    .await
                    .map(|_| ())
            })
            .await;
        }
        Step::Delete { name } => {
            retry(|| async {
                api.delete(&widget_name(*name), &DeleteParams::default())
                    .await
                    .map(|_| ())
            })
            .await;
        }
        Step::TamperConfigMap { name } => {
            let cms = configmaps(&client);
            retry(|| async {
                let mut cm = cms.get(&cm_name(&widget_name(*name))).await?;
                cm.data = Some(BTreeMap::from([("v".into(), "tampered".into())]));
                cms.replace(&cm_name(&widget_name(*name)), &PostParams::default(), &cm)
                    .await
                    .map(|_| ())
            })
            .await;
        }
        Step::Pause { ms } => tokio::time::sleep(Duration::from_millis(*ms)).await,
        Step::Fault(fault) => inject(env, fault).await,
    }
}

async fn inject(env: &TestEnv, fault: &Fault) {
    let faults = env.faults();
    match fault {
        Fault::DropWatches => faults.drop_watches(),
        Fault::Compact => {
            faults.compact();
            faults.drop_watches();
        }
        Fault::Burst {
            status,
            count,
            target,
        } => {
            let rule = FailureRule::new(*count, *status);
            faults.fail_next(match target {
                Target::Watches => rule.watch(true),
                Target::Lists => rule.method(http::Method::GET).watch(false),
                Target::Any => rule,
            });
            if matches!(target, Target::Watches) {
                // Open watches are not requests: end them so the burst bites.
                faults.drop_watches();
            }
        }
        Fault::WriteConflicts { count } => faults.fail_next(
            FailureRule::new(*count, 409)
                .method(http::Method::PUT)
                .path_contains("/configmaps/"),
        ),
        Fault::Latency { ms, for_ms } => {
            faults.set_latency(Duration::from_millis(*ms));
            tokio::time::sleep(Duration::from_millis(*for_ms)).await;
            faults.set_latency(Duration::ZERO);
        }
        Fault::ServerPause { ms } => {
            faults.pause();
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            faults.resume();
        }
    }
}

async fn retry<F, Fut>(mut op: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube_client::Error>>,
{
    for _ in 0..5 {
        match op().await {
            Ok(()) => return,
            // Gone or already there: the step's intent cannot apply.
            Err(kube_client::Error::Api(s))
                if s.code == 404 || s.code == 409 && s.reason == "AlreadyExists" =>
            {
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn versions<'a, K: Resource + 'a>(
    items: impl IntoIterator<Item = &'a K>,
) -> BTreeMap<String, String> {
    items.into_iter().map(|o| (name_of(o), rv_of(o))).collect()
}

/// The invariants, checked against a fresh LIST.
async fn check(
    client: &kube_client::Client,
    widget_informer: &SharedIndexInformer<Widget>,
    cm_informer: &SharedIndexInformer<ConfigMap>,
    mirror: &Mirror,
    cm_mirror: &Mirror,
) -> Result<(), String> {
    let listed_widgets = Api::<Widget>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list widgets: {e}"))?
        .items;
    let listed_cms = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list configmaps: {e}"))?
        .items;
    let server_widgets = versions(&listed_widgets);
    let server_cms = versions(&listed_cms);
    let cached_widgets = versions(widget_informer.indexer().list().iter().map(AsRef::as_ref));
    let cached_cms = versions(cm_informer.indexer().list().iter().map(AsRef::as_ref));
    if cached_widgets != server_widgets {
        return Err(format!(
            "widget cache {cached_widgets:?} != LIST {server_widgets:?}"
        ));
    }
    if cached_cms != server_cms {
        return Err(format!(
            "configmap cache {cached_cms:?} != LIST {server_cms:?}"
        ));
    }
    // Desired state: one ConfigMap per widget with its data, none extra.
    let data: HashMap<String, BTreeMap<String, String>> = listed_cms
        .iter()
        .filter(|cm| cm.metadata.namespace.as_deref() == Some(NS))
        .map(|cm| {
            (
                cm.metadata.name.clone().unwrap_or_default(),
                cm.data.clone().unwrap_or_default(),
            )
        })
        .collect();
    for w in &listed_widgets {
        let name = w.metadata.name.clone().unwrap_or_default();
        match data.get(&cm_name(&name)) {
            Some(d) if *d == w.spec.data => {}
            other => {
                return Err(format!(
                    "widget {name} wants {:?}, its ConfigMap has {other:?}",
                    w.spec.data
                ));
            }
        }
    }
    for i in 0..NAMES {
        let name = widget_name(i);
        if !server_widgets.contains_key(&format!("{NS}/{name}"))
            && data.contains_key(&cm_name(&name))
        {
            return Err(format!("ConfigMap of deleted widget {name} remains"));
        }
    }
    // Handlers: nothing unplaceable, and they end where the cache is.
    for (what, m, cache) in [
        ("widget", mirror, &server_widgets),
        ("configmap", cm_mirror, &server_cms),
    ] {
        let violations = m.violations.lock().clone();
        if !violations.is_empty() {
            return Err(format!("{what} handler: {violations:?}"));
        }
        let view: BTreeMap<String, String> = m
            .view
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if view != *cache {
            return Err(format!(
                "{what} handler ended at {view:?}, LIST has {cache:?}"
            ));
        }
    }
    Ok(())
}
