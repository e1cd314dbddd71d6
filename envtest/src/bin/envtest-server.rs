//! `envtest-server`: run the in-process Kubernetes API server as a process,
//! write a kubeconfig for it, and serve until Ctrl-C; or, with `cleanup`,
//! remove what existing-cluster test runs left on a cluster.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// An in-process Kubernetes API server for tests, as a standalone process.
#[derive(Debug, Parser)]
#[command(name = "envtest-server", version, about)]
struct Args {
    /// Port to listen on (127.0.0.1); 0 picks a free one.
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Write a kubeconfig pointing at the server to this file.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Persist state in this directory (every write fsync'd; restarts keep it).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Require this bearer token on every request but health checks (401
    /// otherwise); the kubeconfig carries it. Use it with --tls for kubectl
    /// and other client-go programs: they never send a token over plain
    /// HTTP, so without --tls only clients that do (curl, kube-rs) get in.
    #[arg(long)]
    token: Option<String>,
    /// Serve HTTPS with a CA and server certificate (127.0.0.1, ::1,
    /// localhost) generated at start; the kubeconfig trusts that CA.
    #[arg(long)]
    tls: bool,
    /// Events of watch history kept for resume.
    #[arg(long, default_value_t = envtest::DEFAULT_HISTORY_WINDOW)]
    history_window: usize,
    /// Serve the test-only admin endpoints POST /envtest/v1/compact and
    /// POST /envtest/v1/drop-watches (off by default: 404 there).
    #[arg(long)]
    admin: bool,
    /// Send admission and conversion webhooks that name a Service to a
    /// local address: `NAMESPACE/NAME[:PORT]=HOST:PORT` (repeatable). The
    /// webhook must serve a certificate for NAME.NAMESPACE.svc signed by
    /// its configuration's caBundle.
    #[arg(long = "webhook-service", value_name = "SERVICE=ADDR")]
    webhook_services: Vec<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Remove what tests in existing-cluster mode (USE_EXISTING_CLUSTER=true)
    /// left on a cluster, for example when a run was killed: every
    /// namespace, CRD, ClusterRole, ClusterRoleBinding, Role, RoleBinding
    /// and webhook configuration labelled envtest.informer-rs.io/run.
    /// Objects without the label are not touched. Run it when no test runs
    /// against that cluster.
    Cleanup {
        /// The kubeconfig of the cluster (default: KUBECONFIG, else
        /// ~/.kube/config, its current context).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Only what the run with this id created (the label's value).
        #[arg(long)]
        run: Option<String>,
    },
}

/// `envtest-server cleanup`: prints each object it deletes.
async fn cleanup(
    kubeconfig: Option<PathBuf>,
    run: Option<String>,
) -> Result<(), Box<dyn std::error::Error>> {
    let options = kube_client::config::KubeConfigOptions::default();
    let config = match kubeconfig {
        Some(path) => {
            let file = kube_client::config::Kubeconfig::read_from(&path)?;
            kube_client::Config::from_custom_kubeconfig(file, &options).await?
        }
        None => kube_client::Config::from_kubeconfig(&options).await?,
    };
    println!("cleaning up {}", config.cluster_url);
    let client = kube_client::Client::try_from(config)?;
    let removed = envtest::cleanup_existing_cluster(client, run.as_deref()).await?;
    for what in &removed {
        println!("deleted {what}");
    }
    println!("{} objects deleted", removed.len());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if let Some(Command::Cleanup { kubeconfig, run }) = args.command {
        return cleanup(kubeconfig, run).await;
    }
    let mut builder = envtest::TestEnv::builder()
        .port(args.port)
        .history_window(args.history_window);
    if let Some(t) = &args.token {
        builder = builder.bearer_token(t.clone());
        if !args.tls {
            eprintln!(
                "note: --token without --tls: kubectl and other client-go programs never send \
                 a bearer token over plain HTTP and will get 401; add --tls for them"
            );
        }
    }
    if args.admin {
        builder = builder.admin_endpoints();
    }
    for m in &args.webhook_services {
        let Some((svc, addr)) = m.split_once('=') else {
            return Err(format!(
                "--webhook-service {m:?}: expected NAMESPACE/NAME[:PORT]=HOST:PORT"
            )
            .into());
        };
        builder = builder.webhook_service(svc, addr);
    }
    if args.tls {
        builder = builder.tls();
    }
    if let Some(d) = &args.data_dir {
        builder = builder.data_dir(d.clone());
    }
    let env = builder.start().await?;
    println!("envtest-server listening on {}", env.base_url());
    match &args.kubeconfig {
        Some(path) => {
            std::fs::write(path, env.kubeconfig_yaml())?;
            println!("kubeconfig written to {}", path.display());
            println!(
                "point kubectl at it with:\n  export KUBECONFIG={}\n  kubectl get namespaces",
                path.display()
            );
        }
        None => {
            println!(
                "point kubectl at it with:\n  kubectl --server {} get namespaces",
                env.base_url()
            );
        }
    }
    println!("press Ctrl-C to stop");
    shutdown_signal().await?;
    println!("stopping");
    drop(env);
    Ok(())
}

/// Wait for Ctrl-C (SIGINT) or, on Unix, SIGTERM.
async fn shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
