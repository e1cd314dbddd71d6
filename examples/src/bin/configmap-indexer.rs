//! A secondary index on an informer's cache: "which ConfigMaps belong to team
//! X?" answered from memory, across namespaces, without a request to the API
//! server.
//!
//! The informer on ConfigMaps gets an index named `by-team` whose values are
//! the `example.com/team` label of each ConfigMap (client-go's `Indexers`).
//! The lister then answers `by_index("by-team", "payments")` for the whole
//! cluster and `namespace(ns).by_index(..)` for one namespace. The index
//! follows the cache: relabelling or deleting a ConfigMap moves or removes it.
//!
//! With no cluster chosen (no `--kubeconfig`, no `--context`, not in a pod;
//! a kubeconfig alone chooses nothing) it starts the embedded API server, creates ConfigMaps for two teams in two
//! namespaces, moves one to the other team, deletes one, prints the index
//! after each step, checks it and exits. With a cluster it prints the index
//! of the cluster's ConfigMaps and then every change to it until Ctrl-C.
//!
//! Run: `cargo run -p informer-examples --bin configmap-indexer`

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use controller_runtime::informer_core::factory::SharedInformerFactory;
use controller_runtime::informer_core::key::object_key;
use controller_runtime::informer_core::lister::Lister;
use controller_runtime::informer_core::shared_informer::handler_fn;
use controller_runtime::informer_core::store::IndexFn;
use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use controller_runtime::prelude::*;

/// The label the index is built from.
const TEAM_LABEL: &str = "example.com/team";
/// The index name.
const BY_TEAM: &str = "by-team";

/// The index function: a ConfigMap's team, or no value when unlabelled (it
/// is then in no bucket of the index, but still in the cache).
fn team_index() -> IndexFn<ConfigMap> {
    Arc::new(|cm: &ConfigMap| {
        Ok(cm
            .metadata
            .labels
            .as_ref()
            .and_then(|labels| labels.get(TEAM_LABEL))
            .map(|team| vec![team.clone()])
            .unwrap_or_default())
    })
}

/// `team -> sorted namespace/name keys`, read from the index.
fn teams(lister: &Lister<ConfigMap>) -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
    let indexer = lister.indexer();
    let mut out = BTreeMap::new();
    for team in indexer.list_index_func_values(BY_TEAM)? {
        let members: BTreeSet<String> = lister
            .by_index(BY_TEAM, &team)?
            .iter()
            .map(|cm| object_key(cm.as_ref()))
            .collect();
        if !members.is_empty() {
            out.insert(team, members);
        }
    }
    Ok(out)
}

fn print_index(lister: &Lister<ConfigMap>) -> anyhow::Result<()> {
    let teams = teams(lister)?;
    println!("  index {BY_TEAM}: {} team(s)", teams.len());
    for (team, members) in &teams {
        let members: Vec<&str> = members.iter().map(String::as_str).collect();
        println!("    {team:<10} {}", members.join(", "));
    }
    Ok(())
}

fn config_map(namespace: &str, name: &str, team: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(TEAM_LABEL.to_string(), team.to_string())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("owner".to_string(), team.to_string())])),
        ..ConfigMap::default()
    }
}

/// Waits until the index shows `team`'s members as `expected`.
async fn wait_for_team(
    lister: &Lister<ConfigMap>,
    team: &str,
    expected: &[&str],
) -> anyhow::Result<()> {
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = teams(lister)?.remove(team).unwrap_or_default();
        if now == expected {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("index {BY_TEAM}={team}: expected {expected:?}, found {now:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The bounded demo on the embedded API server.
async fn demo(client: Client, lister: &Lister<ConfigMap>) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in ["shop", "search"] {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {ns}"))?;
    }
    println!("1. create ConfigMaps for teams payments and catalog in namespaces shop and search");
    for (ns, name, team) in [
        ("shop", "checkout", "payments"),
        ("shop", "cart", "catalog"),
        ("search", "refunds", "payments"),
        ("search", "ranking", "catalog"),
    ] {
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &config_map(ns, name, team))
            .await
            .with_context(|| format!("creating configmap {ns}/{name}"))?;
    }
    wait_for_team(lister, "payments", &["search/refunds", "shop/checkout"]).await?;
    wait_for_team(lister, "catalog", &["search/ranking", "shop/cart"]).await?;
    print_index(lister)?;
    let in_shop: Vec<String> = lister
        .namespace("shop")
        .by_index(BY_TEAM, "payments")?
        .iter()
        .map(|cm| object_key(cm.as_ref()))
        .collect();
    println!("  payments in namespace shop only: {}", in_shop.join(", "));
    if in_shop != ["shop/checkout"] {
        bail!("namespace-scoped index query returned {in_shop:?}");
    }

    println!("2. move search/ranking to team payments (relabel)");
    let relabel = serde_json::json!({ "metadata": { "labels": { TEAM_LABEL: "payments" } } });
    Api::<ConfigMap>::namespaced(client.clone(), "search")
        .patch("ranking", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .context("relabelling search/ranking")?;
    wait_for_team(
        lister,
        "payments",
        &["search/ranking", "search/refunds", "shop/checkout"],
    )
    .await?;
    wait_for_team(lister, "catalog", &["shop/cart"]).await?;
    print_index(lister)?;

    println!("3. delete shop/cart");
    Api::<ConfigMap>::namespaced(client, "shop")
        .delete("cart", &DeleteParams::default())
        .await
        .context("deleting shop/cart")?;
    wait_for_team(lister, "catalog", &[]).await?;
    print_index(lister)?;
    println!("index followed every change");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn");
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
    let informer = factory.informer::<ConfigMap>();
    informer.add_indexers([(BY_TEAM.to_string(), team_index())])?;
    let lister = informer.lister();
    factory.start();
    factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .context("waiting for the ConfigMap cache to sync")?;
    println!("cache synced");

    if env.is_some() {
        tokio::time::timeout(Duration::from_secs(60), demo(client, &lister))
            .await
            .context("the demo took too long")??;
    } else {
        print_index(&lister)?;
        let printer = lister.clone();
        informer.add_event_handler(handler_fn::<ConfigMap>().on_update(move |old, new| {
            let team = |cm: &ConfigMap| {
                cm.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(TEAM_LABEL).cloned())
            };
            if team(&old) != team(&new) {
                println!("team of {} changed", object_key(new.as_ref()));
                if let Err(error) = print_index(&printer) {
                    eprintln!("cannot read the index: {error}");
                }
            }
        }))?;
        println!("watching; press Ctrl-C to stop");
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
    }
    factory.shutdown().await;
    drop(env);
    Ok(())
}
