//! `informer-bench`: every performance scenario of informer-rs next to
//! kube-runtime (and a floor where one exists), against one running
//! `envtest-server`. Writes one JSON record per measured quantity with the
//! value of every run; `cargo xtask bench` starts the server, runs this
//! program and turns the records into `docs/performance.md`.
//!
//! The two sides alternate within each scenario (A B, then B A) so load from
//! other work on the machine falls on both alike. Nothing here asserts on
//! timing: the program fails only if a scenario cannot run at all.

mod controller;
mod fixtures;
mod fleet;
mod heap;
mod indexer;
mod profile;
mod protobuf;
mod record;
mod relist;
mod scope;
mod sharding;
mod sync;
mod watch;
mod webhook;
mod workqueue;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use kube_client::{Client, Config};

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "informer-bench", about)]
struct Args {
    /// Base URL of the envtest-server to measure against.
    #[arg(long)]
    server: String,
    /// The envtest-server program, for the scenarios that start servers of
    /// their own (fleet: one per member cluster).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Small sizes and two runs: proves every scenario still works.
    #[arg(long)]
    quick: bool,
    /// Runs per measurement (default: 2 with --quick, 5 otherwise).
    #[arg(long)]
    runs: Option<usize>,
    /// Only these scenarios (comma-separated: workqueue, indexer,
    /// controller, watch, fanout, sync, protobuf, scope, sharding, relist,
    /// webhook, fleet; `sharding-recovery` runs only the sharding
    /// scenario's kill-recovery cases).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Initial-sync sizes instead of the default ones (comma-separated).
    #[arg(long, value_delimiter = ',')]
    sync_sizes: Vec<usize>,
    /// Write the JSON records here.
    #[arg(long, required_unless_present_any = ["touch", "profile"])]
    out: Option<PathBuf>,
    /// Not a bench run: make the writes of one watch-event measurement
    /// (`NAMESPACE:EVENTS:ROUND`) and exit. The protobuf scenario starts
    /// this program so, to keep the writes' CPU time out of its own.
    #[arg(long, hide = true)]
    touch: Option<String>,
    /// Not a bench run: one phase of the protobuf scenario, alone and
    /// repeated, for a profiler (`SIDE:PHASE:N:REPS`; see `profile.rs`).
    #[arg(long, hide = true)]
    profile: Option<String>,
    /// The commit measured (`git describe`-like, `+dirty` when the work
    /// tree had changes), recorded in the JSON for the report.
    #[arg(long)]
    commit: Option<String>,
}

/// A scenario could not run.
#[derive(Debug)]
pub struct BenchError(pub String);

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl BenchError {
    /// Wraps any displayable error.
    pub fn msg(err: impl std::fmt::Display) -> Self {
        BenchError(err.to_string())
    }

    /// Fails unless a cache holds exactly the expected number of objects.
    pub fn expect_len(what: &str, got: usize, want: usize) -> Result<(), BenchError> {
        if got == want {
            Ok(())
        } else {
            Err(BenchError(format!(
                "{what} holds {got} objects, expected {want}"
            )))
        }
    }
}

/// The sizes of one session.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Runs per measurement.
    pub runs: usize,
    /// Initial-sync sizes.
    pub sync_sizes: Vec<usize>,
    /// Objects updated in the watch scenario, and the writes made to them.
    pub watch_objects: usize,
    /// Writes in the watch-throughput scenario.
    pub watch_writes: usize,
    /// Writes per fan-out run.
    pub fanout_writes: usize,
    /// Handler counts for fan-out.
    pub fanout_handlers: Vec<usize>,
    /// Objects in the indexer scenario.
    pub indexer_objects: usize,
    /// Items per workqueue run.
    pub queue_items: usize,
    /// Objects in the controller scenario.
    pub controller_objects: usize,
    /// Secrets (4 KiB of data each) in the cache-scope scenario.
    pub scope_objects: usize,
    /// Admission reviews per webhook case (all clients together).
    pub webhook_requests: usize,
    /// ConfigMaps in the sharding scenario.
    pub sharding_objects: usize,
    /// Member clusters in each fleet case (each its own server process).
    pub fleet_clusters: Vec<usize>,
    /// ConfigMaps in each fleet member.
    pub fleet_objects: usize,
}

impl Plan {
    fn new(quick: bool, runs: Option<usize>) -> Self {
        if quick {
            Plan {
                runs: runs.unwrap_or(2),
                sync_sizes: vec![500],
                watch_objects: 100,
                watch_writes: 1_000,
                fanout_writes: 200,
                fanout_handlers: vec![1, 10, 100],
                indexer_objects: 5_000,
                queue_items: 20_000,
                controller_objects: 200,
                scope_objects: 2_000,
                webhook_requests: 2_000,
                sharding_objects: 300,
                fleet_clusters: vec![1, 3],
                fleet_objects: 50,
            }
        } else {
            Plan {
                runs: runs.unwrap_or(5),
                sync_sizes: vec![1_000, 10_000, 50_000],
                watch_objects: 1_000,
                watch_writes: 50_000,
                fanout_writes: 5_000,
                fanout_handlers: vec![1, 10, 100],
                indexer_objects: 100_000,
                queue_items: 200_000,
                controller_objects: 10_000,
                scope_objects: 10_000,
                webhook_requests: 20_000,
                sharding_objects: 20_000,
                fleet_clusters: vec![1, 10, 50],
                fleet_objects: 1_000,
            }
        }
    }
}

/// What the JSON file holds.
#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    quick: bool,
    runs: usize,
    cpus: usize,
    load_average: String,
    /// When the bench finished, in seconds since the Unix epoch (the
    /// report's date, the same on any later render).
    finished: u64,
    /// Whether this program was built with the release profile.
    release: bool,
    /// The commit measured, as `--commit` gave it.
    commit: Option<&'a str>,
    records: &'a [record::Record],
}

/// `--touch NAMESPACE:EVENTS:ROUND`: the writes of one watch-event
/// measurement, in this process.
async fn touch(server: &str, spec: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut parts = spec.split(':');
    let (Some(namespace), Some(events), Some(round), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("--touch wants NAMESPACE:EVENTS:ROUND, got {spec:?}").into());
    };
    let client = Client::try_from(Config::new(server.parse()?))?;
    protobuf::write_all(&client, namespace, events.parse()?, round.parse()?).await?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut plan = Plan::new(args.quick, args.runs);
    if !args.sync_sizes.is_empty() {
        plan.sync_sizes.clone_from(&args.sync_sizes);
    }
    let wanted = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?;
    if let Some(spec) = &args.touch {
        return runtime.block_on(touch(&args.server, spec));
    }
    if let Some(spec) = &args.profile {
        return runtime.block_on(async {
            let client = Client::try_from(Config::new(args.server.parse()?))?;
            profile::run(&client, &args.server, spec).await?;
            Ok(())
        });
    }
    let out_path = args.out.clone().ok_or("--out is required")?;
    let records = runtime.block_on(async {
        let config = Config::new(args.server.parse()?);
        let client = Client::try_from(config.clone())?;
        let writer = protobuf::Writer {
            server: args.server.clone(),
        };
        let mut out = record::Records::default();
        // In-memory scenarios first, then the controller (which watches every
        // namespace, so it runs before the other scenarios seed theirs).
        let started = Instant::now();
        if wanted("workqueue") {
            workqueue::run(&plan, &mut out).await?;
        }
        if wanted("webhook") {
            webhook::run(&plan, &mut out).await?;
        }
        if wanted("indexer") {
            indexer::run(&plan, &mut out)?;
        }
        if wanted("controller") {
            controller::run(&client, &plan, &mut out).await?;
        }
        if wanted("watch") || wanted("fanout") {
            watch::run(&client, &plan, wanted("watch"), wanted("fanout"), &mut out).await?;
        }
        if wanted("sync") {
            sync::run(&client, &plan, &mut out).await?;
        }
        if wanted("protobuf") {
            protobuf::run(&client, &writer, &plan, &mut out).await?;
        }
        if wanted("scope") {
            scope::run(&client, &plan, &mut out).await?;
        }
        if wanted("sharding") {
            sharding::run(&client, &config, &plan, &mut out).await?;
        } else if wanted("sharding-recovery") {
            sharding::recovery_only(&client, &config, &plan, &mut out).await?;
        }
        if wanted("fleet") {
            let bin = args
                .server_bin
                .as_deref()
                .ok_or("the fleet scenario needs --server-bin")?;
            fleet::run(&client, bin, &plan, &mut out).await?;
        }
        // Last: it compacts the server's watch history.
        if wanted("relist") {
            relist::run(&client, &plan, &mut out).await?;
        }
        eprintln!(
            "all scenarios done in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok::<_, Box<dyn std::error::Error>>(out.0)
    })?;
    let output = Output {
        quick: args.quick,
        runs: plan.runs,
        cpus: std::thread::available_parallelism().map_or(0, usize::from),
        load_average: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        finished: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        release: !cfg!(debug_assertions),
        commit: args.commit.as_deref(),
        records: &records,
    };
    std::fs::write(&out_path, serde_json::to_string_pretty(&output)?)?;
    Ok(())
}
