//! Fleet: one manager reconciling in many clusters, which come and go.
//!
//! The manager runs against a *hub* cluster, whose Secrets labelled
//! `fleet.example.com/member=true` hold the kubeconfigs of the member
//! clusters (`SecretProvider`): a Secret added engages its cluster, a
//! Secret deleted disengages it. One fleet controller, `greeter`, is for
//! ConfigMaps labelled `fleet.example.com/greet=true` in every member: it
//! writes `<name>-greeting` next to each, saying which cluster it was
//! reconciled in, through that cluster's own client.
//!
//! With no cluster chosen (no `--kubeconfig`, no `--context`, not in a pod;
//! a kubeconfig alone chooses nothing) it starts four embedded API servers (the hub and three members: east, west,
//! north), runs a bounded demo that prints what it reconciled where, and
//! exits. With a cluster it uses it as the hub (Secrets in `default`) and
//! runs until Ctrl-C.
//!
//! Run: `cargo run -p informer-examples --bin fleet`

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use controller_runtime::cluster::SecretProvider;
use controller_runtime::k8s_openapi::ByteString;
use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Secret};
use controller_runtime::kube_client;
use controller_runtime::predicate::from_fn;
use controller_runtime::prelude::*;
use envtest::TestEnv;

const MEMBER_LABEL: &str = "fleet.example.com/member";
const GREET_LABEL: &str = "fleet.example.com/greet";
const HUB_NAMESPACE: &str = "default";

/// Writes `<name>-greeting` next to each labelled ConfigMap, in the
/// ConfigMap's cluster, and notes where it reconciled what.
#[derive(Default)]
struct Greeter {
    seen: Mutex<BTreeSet<String>>,
}

impl ObjectReconciler<ConfigMap> for Greeter {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        let cluster = match ctx.cluster() {
            "" => "hub",
            member => member,
        };
        let name = format!("{}-greeting", cm.name_any());
        let greeting = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"greeting": format!("hello from {cluster}")},
        });
        ctx.api()
            .patch(
                &name,
                &PatchParams::apply("greeter").force(),
                &Patch::Apply(&greeting),
            )
            .await?;
        if let Ok(mut seen) = self.seen.lock() {
            seen.insert(format!(
                "{cluster}/{}/{}",
                ctx.namespace().unwrap_or_default(),
                cm.name_any()
            ));
        }
        Ok(Action::done())
    }
}

async fn build_manager(hub: Client) -> anyhow::Result<(Manager, Arc<Greeter>)> {
    let mgr = Manager::builder(hub.clone())
        .provider(SecretProvider::new(
            hub,
            HUB_NAMESPACE,
            format!("{MEMBER_LABEL}=true"),
        ))
        .build()
        .await?;
    let greeter = Arc::new(Greeter::default());
    mgr.fleet_controller::<ConfigMap>()
        .named("greeter")
        .max_concurrent_reconciles(3)
        .for_event_filter(from_fn(|cm: &ConfigMap| {
            cm.labels().get(GREET_LABEL).is_some_and(|v| v == "true")
        }))
        .complete(Arc::clone(&greeter))?;
    Ok((mgr, greeter))
}

async fn wait_for<F, Fut>(what: &str, mut cond: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond().await? {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("   ok: {what}");
    Ok(())
}

/// The Secret that engages the member `name`.
fn member_secret(name: &str, kubeconfig: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(MEMBER_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            controller_runtime::cluster::KUBECONFIG_KEY.to_string(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Creates the labelled ConfigMap `app` in `member`.
async fn create_app(member: &TestEnv) -> anyhow::Result<()> {
    let app = ConfigMap {
        metadata: ObjectMeta {
            name: Some("app".into()),
            labels: Some(BTreeMap::from([(GREET_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(member.client(), "default")
        .create(&PostParams::default(), &app)
        .await?;
    Ok(())
}

/// The greeting next to `app` in `member`, if any.
async fn greeting(member: &TestEnv) -> anyhow::Result<Option<String>> {
    let cm = Api::<ConfigMap>::namespaced(member.client(), "default")
        .get_opt("app-greeting")
        .await?;
    Ok(cm.and_then(|cm| cm.data?.get("greeting").cloned()))
}

/// The bounded demo on embedded API servers.
async fn demo(hub: TestEnv) -> anyhow::Result<()> {
    let mut members = BTreeMap::new();
    for name in ["east", "west", "north"] {
        let member = TestEnv::start().await?;
        println!("member {name}: envtest at {}", member.base_url());
        create_app(&member).await?;
        members.insert(name, member);
    }
    let (mgr, greeter) = build_manager(hub.client()).await?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let secrets: Api<Secret> = Api::namespaced(hub.client(), HUB_NAMESPACE);
    let engage = |name: &'static str| {
        let (secrets, kubeconfig) = (secrets.clone(), members[name].kubeconfig_yaml());
        async move {
            secrets
                .create(&PostParams::default(), &member_secret(name, &kubeconfig))
                .await
                .with_context(|| format!("creating the Secret of {name}"))
        }
    };

    println!("1. Secrets for east and west in the hub");
    engage("east").await?;
    engage("west").await?;
    for name in ["east", "west"] {
        let member = &members[name];
        wait_for(&format!("{name} greeted from {name}"), || async {
            Ok(greeting(member).await?.as_deref() == Some(&format!("hello from {name}")))
        })
        .await?;
    }
    if greeting(&members["north"]).await?.is_some() {
        bail!("north was reconciled before it was engaged");
    }
    println!("   north, not engaged yet, is untouched");

    println!("2. a Secret for north: it joins the running manager");
    engage("north").await?;
    let north = &members["north"];
    wait_for("north greeted from north", || async {
        Ok(greeting(north).await?.as_deref() == Some("hello from north"))
    })
    .await?;

    println!("3. delete west's Secret: west is disengaged");
    secrets
        .delete("west", &DeleteParams::default())
        .await
        .context("deleting the Secret of west")?;
    wait_for("the fleet is east and north", || async {
        Ok(mgr.fleet().names() == ["east", "north"])
    })
    .await?;

    println!("what greeter reconciled where:");
    let seen = greeter
        .seen
        .lock()
        .map(|seen| seen.clone())
        .unwrap_or_default();
    for line in &seen {
        println!("   {line}");
    }
    stop.cancel();
    run.await.context("the manager task")??;
    println!("each cluster reconciled in its own cluster; shut down cleanly");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn,fleet=info");
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    let Some(cluster) = cluster.connect().await? else {
        let hub = TestEnv::start().await?;
        println!(
            "{} (the hub)",
            informer_examples::cluster::demo_banner(hub.base_url())
        );
        return tokio::time::timeout(Duration::from_secs(90), demo(hub))
            .await
            .context("the demo took too long")?;
    };
    cluster.announce();
    let (mgr, _) = build_manager(cluster.client.clone()).await?;
    println!(
        "engaging the clusters of Secrets labelled {MEMBER_LABEL}=true in {HUB_NAMESPACE}; greeting ConfigMaps labelled {GREET_LABEL}=true; Ctrl-C to stop"
    );
    mgr.run_until_signal().await?;
    Ok(())
}
