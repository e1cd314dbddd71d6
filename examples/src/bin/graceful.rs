//! Graceful shutdown on SIGTERM, as a pod is stopped by Kubernetes.
//!
//! A manager with leader election reconciles ConfigMaps in the `default`
//! namespace; each reconcile takes `RECONCILE_MS` (default 800 ms) and
//! prints `start <key>` and `end <key>`. On SIGTERM (or Ctrl-C) it prints
//! `signal`, stops taking work, lets in-flight reconciles finish within the
//! graceful-shutdown timeout, releases the lease and exits 0 (1 on error).
//! The `examples` integration test drives it against envtest.
//!
//! Run against a cluster (it has no embedded demo):
//! `cargo run -p informer-examples --bin graceful -- --context NAME`
//! (or `--kubeconfig FILE`).

use std::time::Duration;

use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::prelude::*;

/// Takes a while and says so.
struct Slow {
    work: Duration,
}

impl Reconciler for Slow {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, req: Request, _ctx: CallInfo) -> Result<Action, Self::Error> {
        println!("start {req}");
        tokio::time::sleep(self.work).await;
        println!("end {req}");
        Ok(Action::done())
    }
}

async fn wait_for_sigterm() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        println!("ready");
        tokio::select! {
            _ = term.recv() => {}
            r = tokio::signal::ctrl_c() => r?,
        }
    }
    #[cfg(not(unix))]
    {
        println!("ready");
        tokio::signal::ctrl_c().await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let work = std::env::var("RECONCILE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_millis(800), Duration::from_millis);
    let identity = std::env::var("IDENTITY").unwrap_or_else(|_| "graceful-demo".into());
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    let Some(cluster) = cluster.connect().await? else {
        anyhow::bail!("graceful runs against a cluster: pass --kubeconfig FILE or --context NAME");
    };
    cluster.announce();
    let client = cluster.client.clone();
    let mgr = Manager::builder(client)
        .leader_election(LeaderElectionConfig::new(
            "default",
            "graceful-demo",
            &identity,
        ))
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await?;
    mgr.controller::<ConfigMap>()
        .max_concurrent_reconciles(2)
        .complete(Slow { work })?;
    let stop = CancellationToken::new();
    let signals = tokio::spawn({
        let stop = stop.clone();
        async move {
            let waited = wait_for_sigterm().await;
            // Stop first: a `start` printed after this line began after
            // the stop.
            stop.cancel();
            println!("signal");
            waited
        }
    });
    let result = mgr.run(stop).await;
    signals.abort();
    result?;
    println!("stopped");
    Ok(())
}
