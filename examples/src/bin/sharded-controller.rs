//! Sharding a derived controller: three replicas of one
//! `#[derive(Controller)]` reconciler, each reconciling its share of the
//! ConfigMaps, with a finalizer, under the ClusterRole the derive generates.
//!
//! `#[controller(.., sharding(mode = "label"))]` generates
//! `setup_sharded(&mgr, ShardingConfig)` and adds the shard Lease and label
//! rules to `rbac()`. Each replica is a `Manager` whose cache selects the
//! jobs (`demo.example.com/job=true`); the ring's sharder labels each job
//! with its replica, and each replica caches and reconciles only the jobs
//! labelled for it: it stamps them `demo.example.com/handled-by:
//! <replica>`, and its finalizer's cleanup runs on the same replica when a
//! job is deleted. A ConfigMap outside the selection is never labelled.
//!
//! It starts the embedded API server (RBAC enforced for the replicas'
//! service account), runs the three replicas in this process, prints which
//! replica reconciled and cleaned up what, and exits (it refuses
//! `--kubeconfig` and `--context`: the demo needs three replicas in one
//! process).
//!
//! Run: `cargo run -p informer-examples --bin sharded-controller`

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use controller_runtime::informer_core::factory::InformerOptions;
use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::kube_client;
use controller_runtime::prelude::*;
use controller_runtime::sharding::config::ShardingConfig;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

const NS: &str = "default";
const JOB_LABEL: &str = "demo.example.com/job";
const HANDLED_BY: &str = "demo.example.com/handled-by";
const REPLICAS: [&str; 3] = ["replica-a", "replica-b", "replica-c"];

/// What each replica did, in order: `(replica, "reconciled" | "cleaned up", job)`.
type Log = Arc<Mutex<Vec<(String, &'static str, String)>>>;

/// Stamps each job with the replica that reconciled it.
#[derive(Controller)]
#[controller(
    for = ConfigMap,
    finalizer = "demo.example.com/cleanup",
    sharding(mode = "label"),
    name = "sharded-stamper"
)]
struct Stamper {
    replica: String,
    log: Log,
}

impl ObjectReconciler<ConfigMap> for Stamper {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        if cm.annotations().get(HANDLED_BY) != Some(&self.replica) {
            let stamp = serde_json::json!({
                "metadata": { "annotations": { HANDLED_BY: self.replica } }
            });
            ctx.api()
                .patch(
                    &cm.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&stamp),
                )
                .await?;
            self.log
                .lock()
                .await
                .push((self.replica.clone(), "reconciled", cm.name_any()));
        }
        Ok(Action::done())
    }
}

impl Cleanup<ConfigMap> for Stamper {
    async fn cleanup(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.log
            .lock()
            .await
            .push((self.replica.clone(), "cleaned up", cm.name_any()));
        Ok(Action::done())
    }
}

struct Replica {
    mgr: Manager,
    stop: CancellationToken,
    run: JoinHandle<Result<(), ManagerError>>,
}

/// One replica: a manager whose cache selects the jobs, with the stamper
/// sharded on ring `stampers` under identity `name`.
async fn start(client: Client, name: &str, log: &Log) -> anyhow::Result<Replica> {
    let mgr = Manager::builder(client)
        .namespace(NS)
        .cache_options::<ConfigMap>(
            InformerOptions::new().label_selector(format!("{JOB_LABEL}=true")),
        )
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .build()
        .await?;
    let config = ShardingConfig::new(NS, "stampers")
        .identity(name)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(4))
        .retry_period(Duration::from_millis(500));
    Stamper {
        replica: name.to_string(),
        log: Arc::clone(log),
    }
    .setup_sharded(&mgr, config)?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    Ok(Replica { mgr, stop, run })
}

fn job(name: &str, selected: bool) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    cm.metadata.labels = Some(BTreeMap::from([(
        JOB_LABEL.to_string(),
        selected.to_string(),
    )]));
    cm
}

async fn wait_for<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await? {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn demo(env: &envtest::TestEnv) -> anyhow::Result<()> {
    let role = Stamper::rbac();
    let rules = role.rules.as_ref().map_or(0, Vec::len);
    let client = env
        .client_with_cluster_role(NS, "sharded-stamper", &role)
        .await?;
    println!(
        "1. three replicas run as service account {NS}/sharded-stamper, bound to the derived ClusterRole ({rules} rules, enforced)"
    );
    let log = Log::default();
    let mut replicas = Vec::new();
    for name in REPLICAS {
        replicas.push(start(client.clone(), name, &log).await?);
    }
    wait_for(
        "the three replicas are members of a settled ring",
        || async {
            Ok(replicas
                .iter()
                .all(|r| r.mgr.readyz_checks().run_one("shard-sharded-stamper") == Some(Ok(()))))
        },
    )
    .await?;
    let admin: Api<ConfigMap> = Api::namespaced(env.client(), NS);
    let jobs: Vec<String> = (1..=9).map(|i| format!("job-{i}")).collect();
    println!(
        "2. create {} jobs and one ConfigMap outside the selection",
        jobs.len()
    );
    for name in &jobs {
        admin
            .create(&PostParams::default(), &job(name, true))
            .await?;
    }
    admin
        .create(&PostParams::default(), &job("not-a-job", false))
        .await?;
    let shard_label = ShardingConfig::new(NS, "stampers").shard_label();
    wait_for(
        "every job is stamped by the replica it is labelled for",
        || async {
            let all = admin.list(&ListParams::default()).await?.items;
            Ok(jobs.iter().all(|name| {
                all.iter().find(|c| &c.name_any() == name).is_some_and(|c| {
                    let shard = c.labels().get(&shard_label);
                    shard.is_some() && c.annotations().get(HANDLED_BY) == shard
                })
            }))
        },
    )
    .await?;
    let all = admin.list(&ListParams::default()).await?.items;
    for replica in REPLICAS {
        let mine: Vec<String> = all
            .iter()
            .filter(|c| c.labels().get(&shard_label).map(String::as_str) == Some(replica))
            .map(ResourceExt::name_any)
            .collect();
        println!("   {replica} holds {}", mine.join(", "));
    }
    let outside = admin.get("not-a-job").await?;
    if outside.labels().contains_key(&shard_label) {
        bail!("not-a-job is outside the selection but was labelled");
    }
    println!("   not-a-job: no shard label (outside the replicas' selection)");

    println!("3. delete the jobs: each finalizer is removed by the replica holding the job");
    for name in &jobs {
        admin.delete(name, &DeleteParams::default()).await?;
    }
    wait_for("every job is gone", || async {
        let all = admin.list(&ListParams::default()).await?.items;
        Ok(all.iter().all(|c| !jobs.contains(&c.name_any())))
    })
    .await?;
    for r in replicas {
        r.stop.cancel();
        r.run.await.context("replica task")??;
    }
    println!("4. what each replica did:");
    let log = log.lock().await;
    for replica in REPLICAS {
        for what in ["reconciled", "cleaned up"] {
            let mut names: Vec<&str> = log
                .iter()
                .filter(|(r, w, _)| r == replica && *w == what)
                .map(|(_, _, n)| n.as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            println!("   {replica} {what}: {}", names.join(", "));
        }
    }
    let forbidden = env.request_log().iter().filter(|r| r.status == 403).count();
    if forbidden > 0 {
        bail!("{forbidden} requests were refused by RBAC");
    }
    println!("no request refused by RBAC; every job reconciled and cleaned up by its shard");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn");
    // The demo always runs on the embedded server: it needs three
    // replicas in one process and a service account it can bind.
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    if cluster.kubeconfig.is_some() || cluster.context.is_some() {
        anyhow::bail!(
            "sharded-controller runs on the embedded API server only (its demo needs three replicas in one process); run it without --kubeconfig and --context"
        );
    }
    let env = envtest::TestEnv::start().await?;
    println!(
        "{}",
        informer_examples::cluster::demo_banner(env.base_url())
    );
    tokio::time::timeout(Duration::from_secs(120), demo(&env))
        .await
        .context("the demo took too long")?
}
