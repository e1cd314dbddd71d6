//! The classic first client-go program, in Rust: an informer on Deployments
//! that prints every add, update and delete, then lists the `default`
//! namespace from its lister.
//!
//! With a cluster chosen (`--kubeconfig FILE`, `--context NAME`, or running
//! in a pod) it watches that cluster until Ctrl-C. Without one (a
//! kubeconfig alone chooses nothing) it starts the embedded API server
//! (`envtest`), creates, scales and deletes a few Deployments itself so there
//! is something to see, and exits.
//!
//! Run: `cargo run -p informer-examples --bin informer`

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use controller_runtime::informer_core::factory::SharedInformerFactory;
use controller_runtime::informer_core::key::object_key;
use controller_runtime::informer_core::lister::Lister;
use controller_runtime::informer_core::selector::LabelSelector;
use controller_runtime::informer_core::shared_informer::handler_fn;
use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::prelude::*;
use informer_examples::{demo_deployment, deployment_spec};

/// How long the self-driving demo may take before it gives up.
const DEMO_LIMIT: Duration = Duration::from_secs(60);

fn replicas(d: &Deployment) -> i32 {
    deployment_spec(d).and_then(|s| s.replicas).unwrap_or(1)
}

fn print_default_namespace(lister: &Lister<Deployment>) {
    let mut deployments = lister
        .namespace("default")
        .list(&LabelSelector::everything());
    deployments.sort_by_key(|d| d.metadata.name.clone());
    println!("deployments in namespace default ({}):", deployments.len());
    for d in deployments {
        println!(
            "  {:<12} replicas={} resourceVersion={}",
            d.metadata.name.as_deref().unwrap_or("?"),
            replicas(&d),
            d.metadata.resource_version.as_deref().unwrap_or("?"),
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn");

    // A cluster if one is chosen, else the embedded API server.
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    let (client, env) = if let Some(cluster) = cluster.connect().await? {
        cluster.announce();
        (cluster.client, None)
    } else {
        let env = envtest::TestEnv::start()
            .await
            .context("starting the embedded API server")?;
        println!(
            "{}",
            informer_examples::cluster::demo_banner(env.base_url())
        );
        (env.client(), Some(env))
    };

    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.informer::<Deployment>();
    informer.add_event_handler(
        handler_fn::<Deployment>()
            .on_add(|d: Arc<Deployment>, initial| {
                let when = if initial { " (initial list)" } else { "" };
                println!("ADD     {}{when}", object_key(d.as_ref()));
            })
            .on_update(|old, new| {
                println!(
                    "UPDATE  {} replicas {} -> {}",
                    object_key(new.as_ref()),
                    replicas(&old),
                    replicas(&new)
                );
            })
            .on_delete(|gone| {
                let how = if gone.is_tombstone() {
                    " (inferred)"
                } else {
                    ""
                };
                println!("DELETE  {}{how}", object_key(gone.object().as_ref()));
            }),
    )?;

    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .context("waiting for the Deployment cache to sync")?;
    let lister = informer.lister();
    println!("cache synced");
    print_default_namespace(&lister);

    if env.is_some() {
        tokio::time::timeout(DEMO_LIMIT, drive_demo(client, &lister))
            .await
            .context("the demo took too long")??;
        print_default_namespace(&lister);
    } else {
        println!("watching; press Ctrl-C to stop");
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
    }
    factory.shutdown().await;
    drop(env);
    Ok(())
}

/// Creates three Deployments, scales one, deletes one, and waits until the
/// informer's cache shows the result.
async fn drive_demo(client: Client, lister: &Lister<Deployment>) -> anyhow::Result<()> {
    let api: Api<Deployment> = Api::namespaced(client, "default");
    for name in ["frontend", "backend", "cache"] {
        api.create(&PostParams::default(), &demo_deployment(name, 1))
            .await
            .with_context(|| format!("creating deployment {name}"))?;
    }
    let scale = serde_json::json!({ "spec": { "replicas": 3 } });
    api.patch("frontend", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .context("scaling deployment frontend")?;
    api.delete("cache", &DeleteParams::default())
        .await
        .context("deleting deployment cache")?;

    // The handlers print as events arrive; wait until the cache caught up.
    let ns = lister.namespace("default");
    loop {
        let caught_up = ns.get("cache").is_none()
            && ns.get("backend").is_some()
            && ns.get("frontend").is_some_and(|d| replicas(&d) == 3);
        if caught_up {
            return Ok(());
        }
        if ns.list(&LabelSelector::everything()).len() > 16 {
            bail!("unexpected deployments in the cache");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
