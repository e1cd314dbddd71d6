//! A ConfigMap-mirroring operator built on the controller-runtime crate.
//!
//! Every ConfigMap labelled `mirror.example.com/enabled=true` gets a copy
//! named `<name>-mirror` in its namespace, owned (as controller) by the
//! source. The controller is `for` ConfigMaps (filtered by the label) and
//! `owns` ConfigMaps, so editing or deleting a copy re-triggers its source,
//! which repairs it (and records a `Repaired` event); deleting the source
//! removes the copy through the garbage collector, as on a cluster.
//!
//! With no cluster chosen (no `--kubeconfig`, no `--context`, not in a pod;
//! a kubeconfig alone chooses nothing) it starts an in-process envtest API
//! server, runs a bounded demo against it and exits. With a cluster chosen
//! it prints the cluster and context and runs until Ctrl-C or SIGTERM, serving
//! `/healthz` + `/readyz` on 127.0.0.1:8081 and `/metrics` on 127.0.0.1:8080.
//!
//! Run: `cargo run -p informer-examples --bin controller`

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use controller_runtime::cache::CacheError;
use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use controller_runtime::kube_client;
use controller_runtime::predicate::from_fn;
use controller_runtime::prelude::*;

const LABEL: &str = "mirror.example.com/enabled";

fn mirror_name(source: &str) -> String {
    format!("{source}-mirror")
}

fn wants_mirror(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL))
        .is_some_and(|v| v == "true")
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum MirrorError {
    #[error("reading the cache: {0}")]
    Cache(#[from] CacheError),
    #[error("writing the mirror: {0}")]
    Api(#[from] kube_client::Error),
}

/// Neither error is terminal: both are retried with backoff.
impl Terminal for MirrorError {}

/// Keeps `<name>-mirror` equal to each labelled ConfigMap.
struct Mirror;

impl ObjectReconciler<ConfigMap> for Mirror {
    type Error = MirrorError;

    async fn reconcile(
        &self,
        source: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, MirrorError> {
        let api = ctx.api();
        let name = mirror_name(&source.name_any());
        if !wants_mirror(&source) {
            // No longer labelled: remove the copy.
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(mirror = %name, "deleted mirror"),
                Err(kube_client::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::done());
        }
        let owner = OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: source.name_any(),
            uid: source.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let desired = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: source.metadata.namespace.clone(),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            data: source.data.clone(),
            binary_data: source.binary_data.clone(),
            ..ConfigMap::default()
        };
        match ctx.cache().get::<ConfigMap>(ctx.namespace(), &name).await? {
            None => {
                api.create(&PostParams::default(), &desired).await?;
                tracing::info!(mirror = %name, "created mirror");
            }
            Some(current)
                if current.data != desired.data || current.binary_data != desired.binary_data =>
            {
                let mut updated = desired;
                updated.metadata.resource_version = current.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &updated).await?;
                tracing::info!(mirror = %name, "updated mirror");
                ctx.recorder().publish(
                    source.as_ref(),
                    EventInfo::normal("Repaired", "UpdateMirror")
                        .note(format!("{name} follows its source again")),
                );
            }
            Some(_) => {}
        }
        Ok(Action::done())
    }

    // The source is gone: its mirror, owned by it, goes with it through the
    // garbage collector (envtest runs one, as a cluster does).
}

async fn build_manager(
    client: Client,
    health: SocketAddr,
    metrics: SocketAddr,
) -> anyhow::Result<Manager> {
    let mgr = Manager::builder(client)
        .health_addr(health)
        .metrics_addr(metrics)
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await?;
    mgr.controller::<ConfigMap>()
        .named("configmap-mirror")
        .for_event_filter(from_fn(wants_mirror))
        .owns::<ConfigMap>()
        .max_concurrent_reconciles(2)
        .complete(Mirror)?;
    Ok(mgr)
}

async fn wait_for<F, Fut>(what: &str, mut cond: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond().await? {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("  ok: {what}");
    Ok(())
}

async fn mirror_data(
    api: &Api<ConfigMap>,
    source: &str,
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    Ok(api
        .get_opt(&mirror_name(source))
        .await?
        .map(|cm| cm.data.unwrap_or_default()))
}

/// The bounded demo on an in-process API server.
async fn demo() -> anyhow::Result<()> {
    let env = envtest::TestEnv::start().await?;
    println!(
        "{}",
        informer_examples::cluster::demo_banner(env.base_url())
    );
    let client = env.client();
    let local: SocketAddr = "127.0.0.1:0".parse()?;
    let mgr = build_manager(client.clone(), local, local).await?;
    let health = mgr.health_addr().context("health server enabled")?;
    let metrics = mgr.metrics_addr().context("metrics server enabled")?;
    println!("health on http://{health}/readyz, metrics on http://{metrics}/metrics");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn({
        let mgr = mgr.clone();
        async move {
            mgr.run_until(async {
                let _ = stopped.await;
            })
            .await
        }
    });

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let data = |v: &str| Some(BTreeMap::from([("greeting".to_string(), v.to_string())]));
    let mut source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            labels: Some(BTreeMap::from([(LABEL.to_string(), "true".to_string())])),
            ..ObjectMeta::default()
        },
        data: data("hello"),
        ..ConfigMap::default()
    };
    println!("1. create a labelled ConfigMap 'settings'");
    source = api.create(&PostParams::default(), &source).await?;
    wait_for("the mirror is created", || async {
        Ok(mirror_data(&api, "settings").await? == data("hello"))
    })
    .await?;

    println!("2. update the source");
    source.data = data("bonjour");
    api.replace("settings", &PostParams::default(), &source)
        .await?;
    wait_for("the mirror follows", || async {
        Ok(mirror_data(&api, "settings").await? == data("bonjour"))
    })
    .await?;

    println!("3. tamper with the mirror");
    let mut copy = api.get(&mirror_name("settings")).await?;
    copy.data = data("tampered");
    api.replace(&mirror_name("settings"), &PostParams::default(), &copy)
        .await?;
    wait_for("the owner repairs its mirror", || async {
        Ok(mirror_data(&api, "settings").await? == data("bonjour"))
    })
    .await?;

    println!("4. an unlabelled ConfigMap is ignored");
    let plain = ConfigMap {
        metadata: ObjectMeta {
            name: Some("plain".into()),
            ..ObjectMeta::default()
        },
        data: data("x"),
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &plain).await?;

    println!("5. delete the source");
    api.delete("settings", &DeleteParams::default()).await?;
    wait_for("the mirror is deleted", || async {
        Ok(mirror_data(&api, "settings").await?.is_none())
    })
    .await?;
    if mirror_data(&api, "plain").await?.is_some() {
        bail!("an unlabelled ConfigMap was mirrored");
    }

    println!("\n/readyz?verbose:");
    let ready = mgr.readyz_checks().run(&[], true).render("readyz");
    print!("{ready}");
    println!("\nreconcile metrics:");
    for line in mgr.metrics().encode()?.lines() {
        if line.starts_with("controller_runtime_reconcile_total")
            || line.starts_with("workqueue_adds_total")
        {
            println!("  {line}");
        }
    }

    let _ = stop.send(());
    run.await??;
    println!("\nshut down cleanly");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn,controller=info,controller_runtime=info");
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    let Some(cluster) = cluster.connect().await? else {
        return demo().await;
    };
    cluster.announce();
    let client = cluster.client.clone();
    let mgr = build_manager(client, "127.0.0.1:8081".parse()?, "127.0.0.1:8080".parse()?).await?;
    println!(
        "mirroring ConfigMaps labelled {LABEL}=true; Ctrl-C to stop (metrics on http://127.0.0.1:8080/metrics)"
    );
    mgr.run_until_signal().await?;
    Ok(())
}
