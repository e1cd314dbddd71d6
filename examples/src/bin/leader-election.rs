//! Leader election: two replicas of one controller, one of which works at a
//! time; when the leader stops, the other takes over.
//!
//! Each replica is a `Manager` with leader election on the same Lease. Both
//! run their informers (so the follower's cache is warm); only the leader
//! runs the controller, which stamps each ConfigMap labelled
//! `demo.example.com/job=true` with the annotation
//! `demo.example.com/handled-by: <replica>`. On a graceful stop the leader
//! finishes its in-flight reconciles and releases the Lease, so the follower
//! takes over at its next retry instead of waiting for the Lease to expire.
//!
//! With no cluster chosen (no `--kubeconfig`, no `--context`, not in a pod;
//! a kubeconfig alone chooses nothing) it starts the embedded API server and runs both replicas in this process:
//! replica-a leads and handles `job-1`; replica-a stops; replica-b takes
//! over and handles `job-2`; it prints the Lease and exits. With a cluster
//! it runs one replica until Ctrl-C: start it in two terminals and stop the
//! leader to watch leadership move.
//!
//! Run: `cargo run -p informer-examples --bin leader-election`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use controller_runtime::k8s_openapi::api::coordination::v1::Lease;
use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::kube_client;
use controller_runtime::leaderelection::{LeaderElectionConfig, default_identity};
use controller_runtime::predicate::from_fn;
use controller_runtime::prelude::*;
use tokio::task::JoinHandle;

const JOB_LABEL: &str = "demo.example.com/job";
const HANDLED_BY: &str = "demo.example.com/handled-by";
const LEASE_NAMESPACE: &str = "default";
const LEASE_NAME: &str = "leader-election-demo";

fn is_job(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(JOB_LABEL))
        .is_some_and(|v| v == "true")
}

fn handled_by(cm: &ConfigMap) -> Option<&str> {
    cm.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HANDLED_BY))
        .map(String::as_str)
}

/// Stamps each job with the replica that handled it.
struct Stamp {
    replica: String,
    client: Client,
}

impl Reconciler for Stamp {
    type Error = kube_client::Error;

    async fn reconcile(&self, req: Request, _ctx: CallInfo) -> Result<Action, Self::Error> {
        let ns = req.namespace.as_deref().unwrap_or("default");
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let Some(cm) = api.get_opt(&req.name).await? else {
            return Ok(Action::done());
        };
        if handled_by(&cm).is_none() {
            let stamp = serde_json::json!({
                "metadata": { "annotations": { HANDLED_BY: self.replica } }
            });
            api.patch(&req.name, &PatchParams::default(), &Patch::Merge(&stamp))
                .await?;
            tracing::info!(replica = %self.replica, job = %req, "handled");
        }
        Ok(Action::done())
    }
}

/// Short timings so that the demo moves quickly; production keeps the
/// defaults (15 s / 10 s / 2 s).
fn election(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(LEASE_NAMESPACE, LEASE_NAME, identity)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500))
}

async fn build_replica(client: Client, identity: &str) -> anyhow::Result<Manager> {
    let mgr = Manager::builder(client.clone())
        .leader_election(election(identity))
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .build()
        .await?;
    mgr.controller::<ConfigMap>()
        .named("stamp")
        .for_event_filter(from_fn(is_job))
        .complete(Stamp {
            replica: identity.to_string(),
            client,
        })?;
    Ok(mgr)
}

/// One running replica of the demo.
struct Replica {
    name: &'static str,
    mgr: Manager,
    stop: CancellationToken,
    run: JoinHandle<Result<(), ManagerError>>,
}

impl Replica {
    async fn start(client: Client, name: &'static str) -> anyhow::Result<Self> {
        let mgr = build_replica(client, name).await?;
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let (mgr, stop) = (mgr.clone(), stop.clone());
            async move { mgr.run(stop).await }
        });
        println!("started {name}");
        Ok(Replica {
            name,
            mgr,
            stop,
            run,
        })
    }

    /// Graceful stop: in-flight reconciles finish, the lease is released.
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.run
            .await
            .context("replica task")?
            .with_context(|| format!("{} did not stop cleanly", self.name))?;
        println!("stopped {}", self.name);
        Ok(())
    }
}

async fn wait_until<F: FnMut() -> bool>(what: &str, mut cond: F) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Creates job `name` and returns the replica that handled it.
async fn run_job(api: &Api<ConfigMap>, name: &str) -> anyhow::Result<String> {
    let job = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                JOB_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &job)
        .await
        .with_context(|| format!("creating job {name}"))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let cm = api.get(name).await?;
        if let Some(by) = handled_by(&cm) {
            return Ok(by.to_string());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("job {name} was not handled");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn print_lease(client: Client) -> anyhow::Result<()> {
    let lease = Api::<Lease>::namespaced(client, LEASE_NAMESPACE)
        .get(LEASE_NAME)
        .await?;
    let spec = lease.spec.unwrap_or_default();
    println!(
        "lease {LEASE_NAMESPACE}/{LEASE_NAME}: holder={} transitions={}",
        spec.holder_identity.as_deref().unwrap_or("<none>"),
        spec.lease_transitions.unwrap_or(0)
    );
    Ok(())
}

/// The bounded demo on the embedded API server.
async fn demo(client: Client) -> anyhow::Result<()> {
    let jobs: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    println!("1. replica-a starts alone and takes the lease");
    let a = Replica::start(client.clone(), "replica-a").await?;
    wait_until("replica-a leads", || a.mgr.is_leader()).await?;
    println!("   replica-a leads");

    println!("2. replica-b starts and follows");
    let b = Replica::start(client.clone(), "replica-b").await?;
    let observed = || {
        b.mgr
            .leader_elector()
            .and_then(|e| e.observed_leader())
            .is_some_and(|l| l == "replica-a")
    };
    wait_until("replica-b sees replica-a leading", observed).await?;
    println!("   replica-b follows replica-a");

    println!("3. job-1 is handled by the leader");
    let by = run_job(&jobs, "job-1").await?;
    println!("   job-1 handled by {by}");
    if by != "replica-a" {
        bail!("job-1 was handled by {by}, not the leader");
    }
    if b.mgr.is_leader() {
        bail!("two leaders at once");
    }
    print_lease(client.clone()).await?;

    println!("4. replica-a stops (gracefully: it releases the lease)");
    let stopped = Instant::now();
    a.stop().await?;
    wait_until("replica-b leads", || b.mgr.is_leader()).await?;
    println!(
        "   replica-b leads, {} ms after replica-a stopped",
        stopped.elapsed().as_millis()
    );

    println!("5. job-2 is handled by the new leader");
    let by = run_job(&jobs, "job-2").await?;
    println!("   job-2 handled by {by}");
    if by != "replica-b" {
        bail!("job-2 was handled by {by}, not the new leader");
    }
    print_lease(client).await?;

    b.stop().await?;
    println!("leadership moved from replica-a to replica-b");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn");
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    let Some(cluster) = cluster.connect().await? else {
        let env = envtest::TestEnv::start().await?;
        println!(
            "{}",
            informer_examples::cluster::demo_banner(env.base_url())
        );
        return tokio::time::timeout(Duration::from_secs(90), demo(env.client()))
            .await
            .context("the demo took too long")?;
    };
    cluster.announce();
    let client = cluster.client.clone();
    let identity = default_identity();
    let mgr = build_replica(client, &identity).await?;
    if let Some(elector) = mgr.leader_elector() {
        let mut leading = elector.subscribe();
        let me = identity.clone();
        tokio::spawn(async move {
            while leading.changed().await.is_ok() {
                let now = if *leading.borrow() {
                    "leading"
                } else {
                    "not leading"
                };
                println!("{me}: {now}");
            }
        });
    }
    println!(
        "{identity}: competing for lease {LEASE_NAMESPACE}/{LEASE_NAME}; label ConfigMaps {JOB_LABEL}=true; Ctrl-C to stop"
    );
    mgr.run_until_signal().await?;
    Ok(())
}
