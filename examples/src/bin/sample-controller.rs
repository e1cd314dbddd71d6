//! The Kubernetes sample-controller with `#[derive(CustomResource)]` and
//! `#[derive(Controller)]` (see `informer_examples::sample`): Foos owning
//! Deployments, a finalizer, events, metrics, health and leader election.
//!
//! With no cluster configured (no `KUBECONFIG`, no `~/.kube/config`), or with
//! `--once`, it starts the embedded API server, installs the Foo CRD, runs the
//! controller under its generated RBAC role (enforced: any request outside
//! the role would fail with 403), creates a few Foos, changes one, deletes
//! one, prints what the controller did, and exits with a summary. With a
//! cluster it runs until Ctrl-C (install `--print-crd` and `--print-rbac`
//! first).
//!
//! Run: `cargo run -p informer-examples --bin sample-controller`

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use controller_runtime::k8s_openapi;
use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::Secret;
use controller_runtime::k8s_openapi::api::events::v1::Event;
use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::prelude::*;
use controller_runtime::rbac::to_yaml;
use informer_examples::sample::{Foo, FooReconciler, FooSpec, Ledger, SECRET_LABEL};

const NS: &str = "default";

async fn build_manager(
    client: Client,
    health: SocketAddr,
    metrics: SocketAddr,
    ledger: Ledger,
) -> anyhow::Result<Manager> {
    let mgr = Manager::builder(client)
        .health_addr(health)
        .metrics_addr(metrics)
        .leader_election(LeaderElectionConfig::new(
            NS,
            "foo-controller-leader",
            controller_runtime::leaderelection::default_identity(),
        ))
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await?;
    FooReconciler::new(ledger).setup(&mgr)?;
    Ok(mgr)
}

async fn wait_for<F, Fut>(what: &str, mut cond: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond().await? {
        if Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("   ok: {what}");
    Ok(())
}

fn foo(name: &str, deployment: &str, replicas: i32) -> Foo {
    Foo::new(
        name,
        FooSpec {
            deployment_name: deployment.into(),
            replicas: Some(replicas),
        },
    )
}

/// Plays the Deployment controller envtest does not have: every Deployment's
/// pods become available at once.
async fn make_available(deployments: &Api<Deployment>, name: &str) -> anyhow::Result<()> {
    let d = deployments.get(name).await?;
    let replicas = d.spec.and_then(|s| s.replicas).unwrap_or(0);
    let patch = serde_json::json!({"status": {"replicas": replicas, "availableReplicas": replicas, "readyReplicas": replicas}});
    deployments
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

async fn available(foos: &Api<Foo>, name: &str) -> anyhow::Result<Option<i32>> {
    Ok(foos
        .get_opt(name)
        .await?
        .and_then(|f| f.status)
        .map(|s| s.available_replicas))
}

async fn replicas(deployments: &Api<Deployment>, name: &str) -> anyhow::Result<Option<i32>> {
    Ok(deployments
        .get_opt(name)
        .await?
        .and_then(|d| d.spec)
        .and_then(|s| s.replicas))
}

/// The bounded demo on the embedded API server.
async fn demo() -> anyhow::Result<()> {
    let env = envtest::TestEnv::start().await?;
    println!(
        "no cluster configured: started envtest at {}",
        env.base_url()
    );
    let admin = env.client();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(admin.clone());
    crds.create(&PostParams::default(), &Foo::crd()?)
        .await
        .context("installing the Foo CRD")?;
    let foos: Api<Foo> = Api::namespaced(admin.clone(), NS);
    wait_for("the Foo CRD is served", || async {
        Ok(foos.list(&ListParams::default()).await.is_ok())
    })
    .await?;

    let role = FooReconciler::rbac();
    let rules = role.rules.as_ref().map_or(0, Vec::len);
    let client = env
        .client_with_cluster_role(NS, "foo-controller", &role)
        .await?;
    println!(
        "1. run foo-controller as service account {NS}/foo-controller, bound to its generated ClusterRole ({rules} rules, enforced)"
    );
    let ledger = Ledger::default();
    let local: SocketAddr = "127.0.0.1:0".parse()?;
    let mgr = build_manager(client, local, local, ledger.clone()).await?;
    let health = mgr.health_addr().context("health server enabled")?;
    let metrics = mgr.metrics_addr().context("metrics server enabled")?;
    println!(
        "   health on http://{health}/readyz, metrics on http://{metrics}/metrics, leader election on lease {NS}/foo-controller-leader"
    );
    let stop = controller_runtime::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    println!("2. create Foos alpha (2 replicas), beta (1) and gamma (1)");
    for (name, dep, n) in [
        ("alpha", "alpha-web", 2),
        ("beta", "beta-web", 1),
        ("gamma", "gamma-web", 1),
    ] {
        foos.create(&PostParams::default(), &foo(name, dep, n))
            .await?;
    }
    for dep in ["alpha-web", "beta-web", "gamma-web"] {
        wait_for(&format!("deployment {dep} created"), || async {
            Ok(replicas(&deployments, dep).await?.is_some())
        })
        .await?;
        make_available(&deployments, dep).await?;
    }
    wait_for("alpha reports 2 available replicas", || async {
        Ok(available(&foos, "alpha").await? == Some(2))
    })
    .await?;

    println!("3. scale alpha to 3");
    let patch = serde_json::json!({"spec": {"replicas": 3}});
    foos.patch("alpha", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    wait_for("deployment alpha-web scaled to 3", || async {
        Ok(replicas(&deployments, "alpha-web").await? == Some(3))
    })
    .await?;
    make_available(&deployments, "alpha-web").await?;
    wait_for("alpha reports 3 available replicas", || async {
        Ok(available(&foos, "alpha").await? == Some(3))
    })
    .await?;

    println!("4. a Secret labelled {SECRET_LABEL}=beta rolls beta's pods");
    let mut secret = Secret::default();
    secret.metadata.name = Some("beta-credentials".into());
    secret.metadata.labels = Some([(SECRET_LABEL.to_string(), "beta".to_string())].into());
    Api::<Secret>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await?;
    wait_for("beta-web's pod template names the Secret", || async {
        let d = deployments.get("beta-web").await?;
        let ann = d
            .spec
            .and_then(|s| s.template.metadata)
            .and_then(|m| m.annotations)
            .unwrap_or_default();
        Ok(ann.values().any(|v| v.contains("beta-credentials=")))
    })
    .await?;

    println!("5. a Foo naming a Deployment it does not control is refused");
    deployments
        .create(
            &PostParams::default(),
            &informer_examples::demo_deployment("squatter", 1),
        )
        .await?;
    foos.create(&PostParams::default(), &foo("delta", "squatter", 1))
        .await?;
    let events: Api<Event> = Api::namespaced(admin.clone(), NS);
    wait_for("a Warning event ErrResourceExists for delta", || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ErrResourceExists")))
    })
    .await?;

    println!("6. delete gamma: the finalizer's cleanup runs, then gamma goes");
    foos.delete("gamma", &DeleteParams::default()).await?;
    wait_for("gamma and gamma-web are gone", || async {
        Ok(foos.get_opt("gamma").await?.is_none()
            && deployments.get_opt("gamma-web").await?.is_none())
    })
    .await?;

    stop.cancel();
    run.await??;

    println!("\nwhat the controller did:");
    for line in ledger.lines() {
        println!("  {line}");
    }
    let log = env.request_log();
    let controller_requests = log.len();
    let forbidden = log.iter().filter(|r| r.status == 403).count();
    println!("\nsummary:");
    for f in foos.list(&ListParams::default()).await?.items {
        let name = f.metadata.name.clone().unwrap_or_default();
        let avail = f.status.map_or(0, |s| s.available_replicas);
        println!(
            "  foo/{name}: deployment {} wants {} replicas, {avail} available",
            f.spec.deployment_name,
            f.spec.replicas.unwrap_or(1)
        );
    }
    println!(
        "  requests answered (all clients): {controller_requests}, forbidden (403): {forbidden}"
    );
    println!("  refusals to adopt: {}", ledger.count("refused to adopt"));
    for line in mgr.metrics().encode()?.lines() {
        if line.starts_with("controller_runtime_reconcile_total") {
            println!("  {line}");
        }
    }
    if forbidden > 0 {
        bail!("{forbidden} requests were outside the generated role");
    }
    println!("shut down cleanly");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn");
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--print-crd") {
        print!("{}", to_yaml(&Foo::crd()?)?);
        return Ok(());
    }
    if args.iter().any(|a| a == "--print-rbac") {
        print!("{}", to_yaml(&FooReconciler::rbac())?);
        return Ok(());
    }
    if args.iter().any(|a| a == "--once") || !informer_examples::kubeconfig_present() {
        return demo().await;
    }
    let client = Client::try_default().await?;
    println!("server: the cluster in your kubeconfig");
    let ledger = Ledger::default();
    let mgr = build_manager(
        client,
        "127.0.0.1:8081".parse()?,
        "127.0.0.1:8080".parse()?,
        ledger,
    )
    .await?;
    println!("reconciling Foos; Ctrl-C to stop (metrics on http://127.0.0.1:8080/metrics)");
    mgr.run_until_signal().await?;
    Ok(())
}
