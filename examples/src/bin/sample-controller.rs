//! The Kubernetes sample-controller with `#[derive(CustomResource)]` and
//! `#[derive(Controller)]` (see `informer_examples::sample`): Foos owning
//! Deployments, a finalizer, events, a `Ready` condition, metrics, health,
//! leader election, and webhooks served by the manager (a defaulter, a
//! validator and the v1alpha1 <-> v1 conversion, with self-managed
//! certificates).
//!
//! With no cluster chosen (no `--kubeconfig`, no `--context`, not in a pod;
//! a `~/.kube/config` or `KUBECONFIG` alone chooses nothing), or with
//! `--demo`, it starts the embedded API server, installs the Foo CRD (two
//! versions, converted by the manager's webhook), the webhook Service and
//! the webhook configurations (all from `webhooks(...)` in the
//! reconciler's `#[controller(...)]`), runs the controller under its generated RBAC role
//! (enforced: any request outside the role would fail with 403), creates a
//! few Foos (one without replicas, one with a bad deployment name, one with
//! many replicas, one as v1alpha1), changes one, deletes one, prints what
//! the controller and its webhooks did, and exits with a summary. With a
//! cluster chosen it prints the cluster's server and context, stops at once
//! with the command that installs the Foo CRD if it is not installed, and
//! otherwise runs until Ctrl-C, serving its webhooks on port 9443 unless
//! `--no-webhooks` is given (install `--print-crd`, `--print-webhooks` and
//! `--print-rbac` first: the files of the `manifests` binary; the webhook
//! Service `default/foo-webhook-service` must reach the manager's port
//! 9443).
//!
//! Run: `cargo run -p informer-examples --bin sample-controller` (the
//! demo), `... -- --context NAME` (a cluster), `... -- --help` (the flags).

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use controller_runtime::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::{Secret, Service};
use controller_runtime::k8s_openapi::api::events::v1::Event;
use controller_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::prelude::*;
use controller_runtime::webhook::WebhookOptions;
use informer_examples::cluster::{ClusterArgs, demo_banner};
use informer_examples::deployment_spec;
use informer_examples::sample::{
    Foo, FooReconciler, FooSpec, Ledger, SECRET_LABEL, manifests, ready_status, v1alpha1, webhooks,
};

const NS: &str = "default";

async fn build_manager(
    client: Client,
    health: SocketAddr,
    metrics: SocketAddr,
    webhook: Option<WebhookOptions>,
    ledger: Ledger,
) -> anyhow::Result<Manager> {
    let mut builder = Manager::builder(client)
        .health_addr(health)
        .metrics_addr(metrics)
        .leader_election(LeaderElectionConfig::new(
            NS,
            "foo-controller-leader",
            controller_runtime::leaderelection::default_identity(),
        ))
        .graceful_shutdown_timeout(Duration::from_secs(10));
    let serve_webhooks = webhook.is_some();
    if let Some(options) = webhook {
        builder = builder.webhook_server(options);
    }
    let mgr = builder.build().await?;
    FooReconciler::new(ledger.clone()).setup(&mgr)?;
    if serve_webhooks {
        webhooks::register(&mgr, ledger)?;
    }
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

fn foo(name: &str, deployment: &str, replicas: impl Into<Option<i32>>) -> Foo {
    Foo::new(
        name,
        FooSpec {
            deployment_name: deployment.into(),
            replicas: replicas.into(),
        },
    )
}

/// Plays the Deployment controller envtest does not have: every Deployment's
/// pods become available at once.
async fn make_available(deployments: &Api<Deployment>, name: &str) -> anyhow::Result<()> {
    let d = deployments.get(name).await?;
    let replicas = deployment_spec(&d).and_then(|s| s.replicas).unwrap_or(0);
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
        .and_then(|d| deployment_spec(&d)?.replicas))
}

/// What the webhooks did in the demo, for the summary.
#[derive(Default)]
struct WebhookStory {
    defaulted: Option<i32>,
    denied: String,
    warnings: Vec<String>,
    converted: String,
}

/// The API server and what is installed in it before the controller
/// starts, as the `manifests` binary writes it: the Foo CRD (v1alpha1 and
/// v1, converted by the manager's webhook), the webhook Service and the
/// webhook configurations, all calling the Service
/// `default/foo-webhook-service`, which envtest sends to the manager's
/// webhook port.
async fn start_envtest(webhook_port: SocketAddr) -> anyhow::Result<envtest::TestEnv> {
    let env = envtest::TestEnv::builder()
        .webhook_service(
            format!("{NS}/{}", webhooks::SERVICE),
            webhook_port.to_string(),
        )
        .start()
        .await?;
    println!("{}", demo_banner(env.base_url()));
    let admin = env.client();
    let hooks = FooReconciler::webhooks(NS);
    let post = PostParams::default();
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&post, &manifests::crd(NS)?)
        .await
        .context("installing the Foo CRD")?;
    Api::<Service>::namespaced(admin.clone(), NS)
        .create(&post, &manifests::webhook_service(NS))
        .await
        .context("installing the webhook Service")?;
    let validating = hooks
        .validating_configuration()
        .context("the reconciler declares a validating webhook")?;
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .create(&post, &validating)
        .await
        .context("installing the validating webhook configuration")?;
    let mutating = hooks
        .mutating_configuration()
        .context("the reconciler declares a defaulting webhook")?;
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .create(&post, &mutating)
        .await
        .context("installing the mutating webhook configuration")?;
    let foos: Api<Foo> = Api::namespaced(admin, NS);
    wait_for("the Foo CRD is served", || async {
        Ok(foos.list(&ListParams::default()).await.is_ok())
    })
    .await?;
    Ok(env)
}

/// The webhooks at work: a bad name denied, a warning for many replicas,
/// a Foo written as v1alpha1 read as v1.
async fn exercise_webhooks(
    admin: &Client,
    foos: &Api<Foo>,
    deployments: &Api<Deployment>,
    story: &mut WebhookStory,
) -> anyhow::Result<()> {
    println!("5. the validator: a bad deployment name, and many replicas");
    match foos
        .create(&PostParams::default(), &foo("bad", "Bad_Name", 1))
        .await
    {
        Err(controller_runtime::kube_client::Error::Api(status)) => {
            println!("   denied ({}): {}", status.code, status.message);
            story.denied = status.message;
        }
        Ok(_) => bail!("foo/bad was admitted: the validator did not run"),
        Err(e) => return Err(e.into()),
    }
    let answer = informer_examples::create_with_warnings(
        admin,
        NS,
        &foo("big", "big-web", 12),
        &PostParams::default(),
    )
    .await?;
    if answer.code != 201 || answer.warnings.is_empty() {
        bail!(
            "foo/big: expected 201 with a warning, got {} {:?}",
            answer.code,
            answer.warnings
        );
    }
    for w in &answer.warnings {
        println!("   Warning: {w}");
    }
    story.warnings = answer.warnings;

    println!("6. a Foo written as samplecontroller.k8s.io/v1alpha1 (spec.deployment, no replicas)");
    let old: Api<v1alpha1::Foo> = Api::namespaced(admin.clone(), NS);
    let legacy = v1alpha1::Foo::new(
        "legacy",
        v1alpha1::FooSpec {
            deployment: "legacy-web".into(),
            replicas: None,
        },
    );
    old.create(&PostParams::default(), &legacy).await?;
    let as_v1 = foos.get("legacy").await?;
    story.converted = format!(
        "foo/legacy written as v1alpha1 {{deployment: legacy-web}} reads as v1 {{deploymentName: {}, replicas: {}}}",
        as_v1.spec.deployment_name,
        as_v1.spec.replicas.map_or("none".into(), |r| r.to_string())
    );
    println!("   {}", story.converted);
    let back = old.get("legacy").await?;
    if back.spec.deployment != "legacy-web" || as_v1.spec.deployment_name != "legacy-web" {
        bail!("the conversion lost the deployment name: {as_v1:?} / {back:?}");
    }
    for dep in ["big-web", "legacy-web"] {
        wait_for(&format!("deployment {dep} created"), || async {
            Ok(replicas(deployments, dep).await?.is_some())
        })
        .await?;
    }
    Ok(())
}

/// The bounded demo on the embedded API server.
async fn demo() -> anyhow::Result<()> {
    // The webhook port first: envtest sends the webhook Service there.
    let webhook_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let webhook_addr = webhook_listener.local_addr()?;
    let env = start_envtest(webhook_addr).await?;
    let admin = env.client();
    let foos: Api<Foo> = Api::namespaced(admin.clone(), NS);

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
    let hooks = FooReconciler::webhooks(NS);
    let options = hooks.options().listener(webhook_listener);
    let mgr = build_manager(client, local, local, Some(options), ledger.clone()).await?;
    let health = mgr.health_addr().context("health server enabled")?;
    let metrics = mgr.metrics_addr().context("metrics server enabled")?;
    println!(
        "   health on http://{health}/readyz, metrics on http://{metrics}/metrics, leader election on lease {NS}/foo-controller-leader"
    );
    println!(
        "   webhooks on https://{webhook_addr} (Service {NS}/{}): defaulter and validator for v1 (a v1alpha1 write is converted to v1 first), conversion at /convert; certificates self-managed in Secret {NS}/{}",
        hooks.service_name(),
        hooks.secret_name()
    );
    let stop = controller_runtime::CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    wait_for(
        "the webhook server is ready (its CA in every caBundle)",
        || async { Ok(mgr.readyz_checks().run_one("webhook") == Some(Ok(()))) },
    )
    .await?;

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let mut story = WebhookStory::default();
    println!("2. create Foos alpha (2 replicas), beta (replicas left out) and gamma (1)");
    for (name, dep, n) in [
        ("alpha", "alpha-web", Some(2)),
        ("beta", "beta-web", None),
        ("gamma", "gamma-web", Some(1)),
    ] {
        foos.create(&PostParams::default(), &foo(name, dep, n))
            .await?;
    }
    story.defaulted = foos.get("beta").await?.spec.replicas;
    if story.defaulted != Some(1) {
        bail!("beta was not defaulted: replicas {:?}", story.defaulted);
    }
    println!("   ok: beta reads back with replicas 1 (set by the defaulting webhook)");
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
        let ann = deployment_spec(&d)
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        Ok(ann.values().any(|v| v.contains("beta-credentials=")))
    })
    .await?;

    exercise_webhooks(&admin, &foos, &deployments, &mut story).await?;

    println!("7. a Foo naming a Deployment it does not control is refused");
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

    println!("8. delete gamma: the finalizer's cleanup runs, then gamma goes");
    foos.delete("gamma", &DeleteParams::default()).await?;
    wait_for("gamma and gamma-web are gone", || async {
        Ok(foos.get_opt("gamma").await?.is_none()
            && deployments.get_opt("gamma-web").await?.is_none())
    })
    .await?;
    wait_for("every Foo reports a Ready condition", || async {
        let list = foos.list(&ListParams::default()).await?;
        Ok(list.items.iter().all(|f| ready_status(f).is_some()))
    })
    .await?;

    stop.cancel();
    run.await??;

    println!("\nwhat the controller and its webhooks did:");
    for line in ledger.lines() {
        println!("  {line}");
    }
    let log = env.request_log();
    let controller_requests = log.len();
    let forbidden = log.iter().filter(|r| r.status == 403).count();
    println!("\nsummary:");
    for f in foos.list(&ListParams::default()).await?.items {
        let name = f.metadata.name.clone().unwrap_or_default();
        let ready = ready_status(&f).map_or("-", |s| s.as_str());
        let avail = f.status.map_or(0, |s| s.available_replicas);
        println!(
            "  foo/{name}: deployment {} wants {} replicas, {avail} available, Ready={ready}",
            f.spec.deployment_name,
            f.spec.replicas.unwrap_or(1)
        );
    }
    println!("  webhooks:");
    println!(
        "    defaulted: foo/beta was created without replicas and got {}",
        story.defaulted.unwrap_or(0)
    );
    println!("    denied: foo/bad: {}", story.denied);
    for w in &story.warnings {
        println!("    warning: foo/big: {w}");
    }
    println!("    converted: {}", story.converted);
    println!(
        "  requests answered (all clients): {controller_requests}, forbidden (403): {forbidden}"
    );
    println!("  refusals to adopt: {}", ledger.count("refused to adopt"));
    for line in mgr.metrics().encode()?.lines() {
        if line.starts_with("controller_runtime_reconcile_total")
            || line.starts_with("controller_runtime_webhook_requests_total")
        {
            println!("  {line}");
        }
    }
    if forbidden > 0 {
        bail!("{forbidden} requests were outside the generated role");
    }
    println!("shut down cleanly");
    Ok(())
}

/// The command that installs the Foo CRD in the current kubectl context.
const INSTALL_CRD: &str =
    "cargo run -p informer-examples --bin sample-controller -- --print-crd | kubectl apply -f -";

/// The Kubernetes sample-controller on informer-rs. With no --kubeconfig or
/// --context it runs a bounded demo on an embedded API server and never
/// touches your cluster.
#[derive(Parser)]
#[command(
    about,
    long_about = "The Kubernetes sample-controller on informer-rs: Foos owning Deployments, \
with webhooks, metrics, health and leader election.\n\n\
With no --kubeconfig or --context (and outside a pod) it runs a bounded demo on an embedded \
API server and exits, whatever kubeconfig exists: it never touches your cluster by accident. \
With --kubeconfig and/or --context (or in a pod) it prints the cluster and context, checks \
that the Foo CRD is installed and reconciles until Ctrl-C."
)]
struct Cli {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Run the bounded demo on the embedded API server (the default
    /// without --kubeconfig or --context; also in a pod).
    #[arg(long, alias = "once", conflicts_with_all = ["kubeconfig", "context"])]
    demo: bool,
    /// Against a cluster: do not serve the webhooks (port 9443).
    #[arg(long)]
    no_webhooks: bool,
    /// Print the Foo CRD (crd.yaml of the `manifests` binary) and exit.
    #[arg(long, group = "print")]
    print_crd: bool,
    /// Print the webhook Service and configurations (webhooks.yaml) and exit.
    #[arg(long, group = "print")]
    print_webhooks: bool,
    /// Print the ClusterRole, ServiceAccount and binding (rbac.yaml) and exit.
    #[arg(long, group = "print")]
    print_rbac: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn");
    let cli = Cli::parse();
    for (wanted, file) in [
        (cli.print_crd, "crd.yaml"),
        (cli.print_webhooks, "webhooks.yaml"),
        (cli.print_rbac, "rbac.yaml"),
    ] {
        if wanted {
            let files = manifests::render(NS)?;
            let found = files.into_iter().find(|m| m.file == file);
            print!("{}", found.context("the manifests have every file")?.yaml);
            return Ok(());
        }
    }
    let cluster = if cli.demo {
        None
    } else {
        cli.cluster.connect().await?
    };
    let Some(cluster) = cluster else {
        return demo().await;
    };
    // Say where before the first request, then check before any write.
    cluster.announce();
    // The version the controller watches.
    use controller_runtime::kube_client::Resource as _;
    cluster
        .require_served(
            &Foo::group(&()),
            &Foo::version(&()),
            &Foo::plural(&()),
            INSTALL_CRD,
        )
        .await?;
    let ledger = Ledger::default();
    let webhook = (!cli.no_webhooks).then(|| FooReconciler::webhooks(NS).options());
    let mgr = build_manager(
        cluster.client.clone(),
        "127.0.0.1:8081".parse()?,
        "127.0.0.1:8080".parse()?,
        webhook,
        ledger,
    )
    .await?;
    println!("reconciling Foos; Ctrl-C to stop (metrics on http://127.0.0.1:8080/metrics)");
    mgr.run_until_signal().await?;
    Ok(())
}
