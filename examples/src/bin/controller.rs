//! A ConfigMap-mirroring operator built on the controller-runtime crate.
//!
//! Every ConfigMap labelled `mirror.example.com/enabled=true` gets a copy
//! named `<name>-mirror` in its namespace, owned (as controller) by the
//! source. The controller is `for` ConfigMaps (filtered by the label) and
//! `owns` ConfigMaps, so editing or deleting a copy re-triggers its source,
//! which repairs it; deleting the source removes the copy.
//!
//! With no cluster configured (no `KUBECONFIG` and no `~/.kube/config`) it
//! starts an in-process envtest API server, runs a bounded demo against it
//! and exits. With a cluster it runs until Ctrl-C or SIGTERM, serving
//! `/healthz` + `/readyz` on 127.0.0.1:8081 and `/metrics` on 127.0.0.1:8080.
//!
//! Run: `cargo run -p informer-examples --bin controller`

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use controller_runtime::manager::{Cache, CacheError, Manager};
use controller_runtime::predicate::from_fn;
use controller_runtime::reconcile::{Action, Context, Reconciler, Request};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube_client::Client;
use kube_client::api::{Api, DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

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

/// Keeps `<name>-mirror` equal to each labelled ConfigMap.
struct Mirror {
    client: Client,
    cache: Cache,
}

impl Reconciler for Mirror {
    type Error = MirrorError;

    async fn reconcile(&self, req: Request, _ctx: Context) -> Result<Action, MirrorError> {
        let ns = req.namespace.as_deref().unwrap_or("default");
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let name = mirror_name(&req.name);
        let source = self.cache.get::<ConfigMap>(Some(ns), &req.name).await?;
        let Some(source) = source.filter(|s| wants_mirror(s)) else {
            // Gone or no longer labelled: remove the copy (a cluster's garbage
            // collector would too, but envtest has none).
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => tracing::info!(mirror = %name, "deleted mirror"),
                Err(kube_client::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::done());
        };
        let owner = OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: req.name.clone(),
            uid: source.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let desired = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(ns.into()),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            data: source.data.clone(),
            binary_data: source.binary_data.clone(),
            ..ConfigMap::default()
        };
        match self.cache.get::<ConfigMap>(Some(ns), &name).await? {
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
            }
            Some(_) => {}
        }
        Ok(Action::done())
    }
}

async fn build_manager(
    client: Client,
    health: SocketAddr,
    metrics: SocketAddr,
) -> anyhow::Result<Manager> {
    let mgr = Manager::builder(client.clone())
        .health_addr(health)
        .metrics_addr(metrics)
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await?;
    mgr.controller::<ConfigMap>()
        .named("configmap-mirror")
        .with_event_filter(from_fn(wants_mirror))
        .owns::<ConfigMap>()
        .max_concurrent_reconciles(2)
        .complete(Mirror {
            client,
            cache: mgr.cache().clone(),
        })?;
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
        "no cluster configured: started envtest at {}",
        env.base_url()
    );
    let client = env.client();
    let local: SocketAddr = "127.0.0.1:0".parse()?;
    let mgr = build_manager(client.clone(), local, local).await?;
    let health = mgr.health_addr().context("health server enabled")?;
    let metrics = mgr.metrics_addr().context("metrics server enabled")?;
    println!("health on http://{health}/readyz, metrics on http://{metrics}/metrics");
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
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

    stop.cancel();
    run.await??;
    println!("\nshut down cleanly");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn,controller=info,controller_runtime=info");
    if !informer_examples::kubeconfig_present() {
        return demo().await;
    }
    let client = Client::try_default().await?;
    let mgr = build_manager(client, "127.0.0.1:8081".parse()?, "127.0.0.1:8080".parse()?).await?;
    println!(
        "mirroring ConfigMaps labelled {LABEL}=true; Ctrl-C to stop (metrics on http://127.0.0.1:8080/metrics)"
    );
    mgr.run_until_signal().await?;
    Ok(())
}
