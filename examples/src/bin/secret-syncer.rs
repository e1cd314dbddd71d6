//! Secret syncer: copies a Secret into every namespace that asks for it.
//!
//! A Secret labelled `syncer.example.com/source=true` is copied into each
//! namespace labelled `syncer.example.com/sync=true`. Copies carry the label
//! `syncer.example.com/copy-of=<namespace>.<name>`. The controller is `for`
//! Secrets and shows the two tools that decide what gets reconciled:
//!
//! - predicates: only source Secrets (or Secrets that just stopped being one)
//!   reach the queue, and only label changes of Namespaces;
//! - mapping handlers: a Namespace event maps to every source Secret (a new
//!   labelled namespace gets its copies), and a change to a copy maps back to
//!   its source (a tampered or deleted copy is repaired).
//!
//! Copies cannot be owned across namespaces, so the reconcile deletes the
//! copies of a source that is gone and those in namespaces no longer
//! labelled.
//!
//! With no cluster chosen (no `--kubeconfig`, no `--context`, not in a pod;
//! a kubeconfig alone chooses nothing) it starts the embedded API server, runs a bounded demo and exits. With a
//! cluster it runs until Ctrl-C.
//!
//! Run: `cargo run -p informer-examples --bin secret-syncer`

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use anyhow::{Context as _, bail};
use controller_runtime::cache::CacheError;
use controller_runtime::informer_core::selector::LabelSelector;
use controller_runtime::k8s_openapi::ByteString;
use controller_runtime::k8s_openapi::api::core::v1::{Namespace, Secret};
use controller_runtime::predicate::{Funcs, LabelsChanged};
use controller_runtime::prelude::*;
use controller_runtime::{informer_core, kube_client};

const SOURCE_LABEL: &str = "syncer.example.com/source";
const SYNC_LABEL: &str = "syncer.example.com/sync";
const COPY_OF_LABEL: &str = "syncer.example.com/copy-of";

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn is_source(s: &Secret) -> bool {
    label(&s.metadata, SOURCE_LABEL) == Some("true")
}

fn wants_copies(ns: &Namespace) -> bool {
    label(&ns.metadata, SYNC_LABEL) == Some("true") && ns.metadata.deletion_timestamp.is_none()
}

/// `<namespace>.<name>`: a label value naming the source of a copy (both
/// parts are DNS labels, so the dot is unambiguous).
fn copy_of(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// Only source Secrets, and Secrets that stop being one (so their copies
/// are removed).
fn source_events() -> impl Predicate<Secret> {
    Funcs::new()
        .on_create(is_source)
        .on_update(|old, new| is_source(old) || is_source(new))
        .on_delete(is_source)
        .on_generic(is_source)
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("reading the cache: {0}")]
    Cache(#[from] CacheError),
    #[error("writing a copy: {0}")]
    Api(#[from] kube_client::Error),
    #[error("selecting copies: {0}")]
    Selector(#[from] informer_core::selector::SelectorError),
}

/// Every failure here is worth a retry with backoff.
impl controller_runtime::Terminal for SyncError {}

/// Keeps the copies of one source Secret in step with it.
struct Syncer {
    client: Client,
    cache: Cache,
}

impl Syncer {
    async fn copies_of(&self, source: &str) -> Result<Vec<std::sync::Arc<Secret>>, SyncError> {
        let selector = LabelSelector::from_labels([(COPY_OF_LABEL, source)])?;
        Ok(self
            .cache
            .list::<Secret>(&ListOptions::new().labels(selector))
            .await?)
    }

    async fn delete_copy(&self, copy: &Secret) -> Result<(), SyncError> {
        let (Some(ns), Some(name)) = (&copy.metadata.namespace, &copy.metadata.name) else {
            return Ok(());
        };
        match Api::<Secret>::namespaced(self.client.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => tracing::info!(copy = %format!("{ns}/{name}"), "deleted copy"),
            Err(kube_client::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }
}

impl Reconciler for Syncer {
    type Error = SyncError;

    async fn reconcile(&self, req: Request, _ctx: CallInfo) -> Result<Action, SyncError> {
        let ns = req.namespace.as_deref().unwrap_or("default");
        let source_id = copy_of(ns, &req.name);
        let source = self.cache.get::<Secret>(Some(ns), &req.name).await?;
        let existing = self.copies_of(&source_id).await?;
        let Some(source) = source.filter(|s| is_source(s)) else {
            for copy in &existing {
                self.delete_copy(copy).await?;
            }
            return Ok(Action::done());
        };

        let targets: Vec<String> = self
            .cache
            .list::<Namespace>(&ListOptions::new())
            .await?
            .iter()
            .filter(|n| wants_copies(n))
            .filter_map(|n| n.metadata.name.clone())
            .filter(|n| n != ns)
            .collect();
        for copy in &existing {
            let stale = copy
                .metadata
                .namespace
                .as_ref()
                .is_none_or(|n| !targets.contains(n));
            if stale {
                self.delete_copy(copy).await?;
            }
        }
        for target in &targets {
            let desired = Secret {
                metadata: ObjectMeta {
                    name: Some(req.name.clone()),
                    namespace: Some(target.clone()),
                    labels: Some(BTreeMap::from([(
                        COPY_OF_LABEL.to_string(),
                        source_id.clone(),
                    )])),
                    ..ObjectMeta::default()
                },
                data: source.data.clone(),
                type_: source.type_.clone(),
                ..Secret::default()
            };
            let api: Api<Secret> = Api::namespaced(self.client.clone(), target);
            match self.cache.get::<Secret>(Some(target), &req.name).await? {
                None => {
                    api.create(&PostParams::default(), &desired).await?;
                    tracing::info!(copy = %format!("{target}/{}", req.name), "created copy");
                }
                Some(current)
                    if current.data != desired.data
                        || label(&current.metadata, COPY_OF_LABEL) != Some(&source_id) =>
                {
                    let mut updated = desired;
                    updated.metadata.resource_version = current.metadata.resource_version.clone();
                    api.replace(&req.name, &PostParams::default(), &updated)
                        .await?;
                    tracing::info!(copy = %format!("{target}/{}", req.name), "updated copy");
                }
                Some(_) => {}
            }
        }
        Ok(Action::done())
    }
}

async fn build_manager(client: Client) -> anyhow::Result<Manager> {
    let mgr = Manager::builder(client.clone())
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await?;
    // A namespace event (labelled, unlabelled, created) reconciles every
    // source Secret, read from the shared cache.
    let sources = mgr.cache().lister::<Secret>();
    let selector = LabelSelector::from_labels([(SOURCE_LABEL, "true")])?;
    let all_sources = EnqueueRequestsFromMapFunc::new(move |_ns: &Namespace| {
        sources
            .list(&selector)
            .iter()
            .filter_map(|s| Request::from_object(s.as_ref()).ok())
            .collect()
    });
    // A copy maps back to its source.
    let copy_to_source = EnqueueRequestsFromMapFunc::new(|copy: &Secret| {
        label(&copy.metadata, COPY_OF_LABEL)
            .and_then(|id| id.split_once('.'))
            .map(|(ns, name)| vec![Request::new(Some(ns), name)])
            .unwrap_or_default()
    });
    mgr.controller::<Secret>()
        .named("secret-syncer")
        .for_event_filter(source_events())
        .watches_with::<Namespace>(all_sources, vec![Box::new(LabelsChanged)])
        .watches(copy_to_source)
        .complete(Syncer {
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
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("   ok: {what}");
    Ok(())
}

fn token(value: &str) -> Option<BTreeMap<String, ByteString>> {
    Some(BTreeMap::from([(
        "token".to_string(),
        ByteString(value.as_bytes().to_vec()),
    )]))
}

/// The copy's `token`, if the copy exists.
async fn copy_token(client: &Client, ns: &str) -> anyhow::Result<Option<String>> {
    let copy = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt("registry-auth")
        .await?;
    Ok(copy.map(|s| {
        s.data
            .and_then(|d| {
                d.get("token")
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            })
            .unwrap_or_default()
    }))
}

async fn label_namespace(client: &Client, ns: &str, sync: Option<&str>) -> anyhow::Result<()> {
    let patch = serde_json::json!({ "metadata": { "labels": { SYNC_LABEL: sync } } });
    Api::<Namespace>::all(client.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("labelling namespace {ns}"))?;
    Ok(())
}

/// The bounded demo on the embedded API server.
async fn demo(client: Client) -> anyhow::Result<()> {
    let mgr = build_manager(client.clone()).await?;
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, stop) = (mgr.clone(), stop.clone());
        async move { mgr.run(stop).await }
    });
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, sync) in [("team-a", true), ("team-b", true), ("team-c", false)] {
        let labels = sync.then(|| BTreeMap::from([(SYNC_LABEL.to_string(), "true".to_string())]));
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels,
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    println!("namespaces team-a, team-b labelled {SYNC_LABEL}=true; team-c not");

    println!("1. create the source Secret default/registry-auth");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let mut source = Secret {
        metadata: ObjectMeta {
            name: Some("registry-auth".into()),
            labels: Some(BTreeMap::from([(
                SOURCE_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        data: token("v1"),
        ..Secret::default()
    };
    source = secrets.create(&PostParams::default(), &source).await?;
    wait_for("copies in team-a and team-b", || async {
        Ok(
            copy_token(&client, "team-a").await?.as_deref() == Some("v1")
                && copy_token(&client, "team-b").await?.as_deref() == Some("v1"),
        )
    })
    .await?;
    if copy_token(&client, "team-c").await?.is_some() {
        bail!("an unlabelled namespace got a copy");
    }

    println!("2. rotate the source's token");
    source.data = token("v2");
    secrets
        .replace("registry-auth", &PostParams::default(), &source)
        .await?;
    wait_for("both copies follow", || async {
        Ok(
            copy_token(&client, "team-a").await?.as_deref() == Some("v2")
                && copy_token(&client, "team-b").await?.as_deref() == Some("v2"),
        )
    })
    .await?;

    println!("3. label namespace team-c (mapping handler: Namespace -> sources)");
    label_namespace(&client, "team-c", Some("true")).await?;
    wait_for("team-c gets a copy", || async {
        Ok(copy_token(&client, "team-c").await?.as_deref() == Some("v2"))
    })
    .await?;

    println!("4. tamper with the copy in team-a (mapping handler: copy -> source)");
    let team_a: Api<Secret> = Api::namespaced(client.clone(), "team-a");
    let mut copy = team_a.get("registry-auth").await?;
    copy.data = token("forged");
    team_a
        .replace("registry-auth", &PostParams::default(), &copy)
        .await?;
    wait_for("the copy is repaired", || async {
        Ok(copy_token(&client, "team-a").await?.as_deref() == Some("v2"))
    })
    .await?;

    println!("5. unlabel namespace team-b");
    label_namespace(&client, "team-b", None).await?;
    wait_for("team-b's copy is removed", || async {
        Ok(copy_token(&client, "team-b").await?.is_none())
    })
    .await?;

    println!("6. delete the source");
    secrets
        .delete("registry-auth", &DeleteParams::default())
        .await?;
    wait_for("every copy is removed", || async {
        Ok(copy_token(&client, "team-a").await?.is_none()
            && copy_token(&client, "team-c").await?.is_none())
    })
    .await?;

    println!("\nreconcile metrics:");
    for line in mgr.metrics().encode()?.lines() {
        if line.starts_with("controller_runtime_reconcile_total") {
            println!("  {line}");
        }
    }
    stop.cancel();
    run.await??;
    println!("secrets synced; shut down cleanly");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    informer_examples::init_tracing("warn,secret_syncer=info");
    let cluster = <informer_examples::cluster::ClusterArgs as clap::Parser>::parse();
    let Some(cluster) = cluster.connect().await? else {
        let env = envtest::TestEnv::start().await?;
        println!(
            "{}",
            informer_examples::cluster::demo_banner(env.base_url())
        );
        return tokio::time::timeout(Duration::from_secs(90), demo(env.client()))
            .await
            .context("the demo took too long")?;
    };
    cluster.announce();
    let mgr = build_manager(cluster.client.clone()).await?;
    println!(
        "copying Secrets labelled {SOURCE_LABEL}=true into namespaces labelled {SYNC_LABEL}=true; Ctrl-C to stop"
    );
    mgr.run_until_signal().await?;
    Ok(())
}
