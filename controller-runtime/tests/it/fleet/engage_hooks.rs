//! What decides that a cluster enters the fleet: the fleet's filter (by
//! name, and by the labels a provider gives: a `SecretProvider`'s are the
//! Secret's), engage hooks (one that fails keeps the member out, reported
//! `Failing` and retried, until it succeeds), and a provider of one's own
//! written as an `async fn` that makes its clients with
//! `MemberClientOptions`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use controller_runtime::BoxError;
use controller_runtime::CancellationToken;
use controller_runtime::cluster::{
    ClusterHealth, ClusterInfo, Fleet, FleetError, MemberClientOptions, Provider, SecretProvider,
    StaticProvider,
};
use controller_runtime::manager::Manager;
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_client::api::PostParams;
use parking_lot::Mutex;

use super::{LONG, fast_backoff, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// Notes the names it reconciled.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl Seen {
    fn has(&self, name: &str) -> bool {
        self.0.lock().iter().any(|n| n == name)
    }
}

impl ObjectReconciler<ConfigMap> for Seen {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.0.lock().push(cm.name_any());
        Ok(Action::done())
    }
}

async fn create(env: &TestEnv, name: &str) {
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    api.create(&PostParams::default(), &cm).await.unwrap();
}

fn version_looks(member: &TestEnv) -> usize {
    member
        .request_log()
        .iter()
        .filter(|r| r.path.starts_with("/version"))
        .count()
}

#[tokio::test]
async fn a_failing_engage_hook_keeps_the_member_out_until_it_succeeds() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let own = TestEnv::start().await.unwrap();
    let member = TestEnv::start().await.unwrap();
    let mgr = Manager::builder(own.client())
        .fleet_backoff(fast_backoff())
        .build()
        .await
        .unwrap();
    let seen = Arc::new(Seen::default());
    mgr.fleet_controller::<ConfigMap>()
        .named("seen")
        .complete(Arc::clone(&seen))
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let allow = Arc::new(AtomicBool::new(false));
    mgr.fleet().on_engage("gate", {
        let (calls, allow) = (Arc::clone(&calls), Arc::clone(&allow));
        move |cluster| {
            let (calls, allow) = (Arc::clone(&calls), Arc::clone(&allow));
            async move {
                assert_eq!(cluster.name(), "member");
                assert!(
                    !cluster.cache().is_started(),
                    "hooked before it is attached"
                );
                // The hook reaches the member through its client.
                cluster.client().apiserver_version().await?;
                calls.fetch_add(1, Ordering::SeqCst);
                if allow.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err::<(), BoxError>("the member is not prepared yet".into())
                }
            }
        }
    });
    let (stop, task) = spawn_manager(&mgr);
    let cluster = mgr.fleet().engage("member", member.client()).unwrap();
    create(&member, "early").await;

    let error = eventually(LONG, "the hook failed three times", || async {
        match mgr.fleet().health("member") {
            Some(ClusterHealth::Failing { failures, error }) if failures >= 3 => Some(error),
            _ => None,
        }
    })
    .await;
    assert!(
        error.contains("engage hook \"gate\" failed: the member is not prepared yet"),
        "{error}"
    );
    assert!(calls.load(Ordering::SeqCst) >= 3, "retried");
    assert!(!cluster.cache().is_started(), "kept out: not attached");
    assert!(
        cluster.informer_factory().is_empty(),
        "no controller watches it"
    );
    assert!(!seen.has("early"));

    allow.store(true, Ordering::SeqCst);
    eventually(
        LONG,
        "the member reconciled once the hook succeeds",
        || async { (ready(&mgr, "member") && seen.has("early")).then_some(()) },
    )
    .await;
    // Once per engagement: later looks do not run it again.
    let (hooked, looks) = (calls.load(Ordering::SeqCst), version_looks(&member));
    eventually(LONG, "five more looks", || async {
        (version_looks(&member) >= looks + 5).then_some(())
    })
    .await;
    assert_eq!(calls.load(Ordering::SeqCst), hooked);
    stop_manager(stop, task).await;
}

fn cluster_secret(name: &str, region: &str, kubeconfig: &str) -> Secret {
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.into());
    secret.metadata.labels = Some(BTreeMap::from([
        ("fleet".into(), "member".into()),
        ("region".into(), region.into()),
    ]));
    secret.data = Some(BTreeMap::from([(
        "kubeconfig".into(),
        ByteString(kubeconfig.as_bytes().to_vec()),
    )]));
    secret
}

#[tokio::test]
async fn the_filter_decides_by_name_and_by_the_secrets_labels() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let own = TestEnv::start().await.unwrap();
    let (eu, us, listed) = (
        TestEnv::start().await.unwrap(),
        TestEnv::start().await.unwrap(),
        TestEnv::start().await.unwrap(),
    );
    let secrets: Api<Secret> = Api::namespaced(own.client(), own.namespace());
    for (name, region, env) in [("edge-eu", "eu", &eu), ("edge-us", "us", &us)] {
        secrets
            .create(
                &PostParams::default(),
                &cluster_secret(name, region, &env.kubeconfig_yaml()),
            )
            .await
            .unwrap();
    }
    let mgr = Manager::builder(own.client())
        .fleet_backoff(fast_backoff())
        .provider(SecretProvider::new(
            own.client(),
            own.namespace(),
            "fleet=member",
        ))
        .provider(
            StaticProvider::new()
                .client("static-in", listed.client())
                .client("static-out", listed.client()),
        )
        .build()
        .await
        .unwrap();
    mgr.fleet()
        .filter(|c| c.label("region") == Some("eu") || c.name() == "static-in");
    let (stop, task) = spawn_manager(&mgr);

    eventually(LONG, "the admitted clusters ready", || async {
        (ready(&mgr, "edge-eu") && ready(&mgr, "static-in")).then_some(())
    })
    .await;
    assert_eq!(mgr.fleet().names(), ["edge-eu", "static-in"]);
    assert!(!task.is_finished(), "a filtered cluster stops no provider");
    assert!(matches!(
        mgr.fleet().engage("by-hand", listed.client()),
        Err(FleetError::Filtered(name)) if name == "by-hand"
    ));

    // The Secret's labels change: the filter decides again.
    let mut moved = secrets.get("edge-us").await.unwrap();
    moved
        .metadata
        .labels
        .get_or_insert_default()
        .insert("region".into(), "eu".into());
    secrets
        .replace("edge-us", &PostParams::default(), &moved)
        .await
        .unwrap();
    eventually(LONG, "the relabelled cluster engaged", || async {
        ready(&mgr, "edge-us").then_some(())
    })
    .await;
    stop_manager(stop, task).await;
}

/// A provider of one's own, its `run` an `async fn`: engages one cluster
/// from a kubeconfig through `MemberClientOptions`, with a label.
struct OneKubeconfig {
    name: String,
    yaml: String,
}

impl Provider for OneKubeconfig {
    fn name(&self) -> String {
        format!("one kubeconfig {}", self.name)
    }

    async fn run(&self, fleet: Fleet, stop: CancellationToken) -> Result<(), BoxError> {
        let client = MemberClientOptions::new()
            .client_from_yaml(&self.name, self.yaml.as_bytes())
            .await?;
        let labels = BTreeMap::from([("source".to_string(), "mine".to_string())]);
        fleet.engage_with(ClusterInfo::new(&self.name).with_labels(labels), client)?;
        stop.cancelled().await;
        Ok(())
    }
}

#[tokio::test]
async fn a_provider_of_ones_own_is_an_async_fn() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let own = TestEnv::start().await.unwrap();
    let member = TestEnv::start().await.unwrap();
    let mgr = Manager::builder(own.client())
        .fleet_backoff(fast_backoff())
        .provider(OneKubeconfig {
            name: "mine".into(),
            yaml: member.kubeconfig_yaml(),
        })
        .build()
        .await
        .unwrap();
    let labelled = Arc::new(AtomicBool::new(false));
    mgr.fleet().filter({
        let labelled = Arc::clone(&labelled);
        move |c| {
            labelled.store(c.label("source") == Some("mine"), Ordering::SeqCst);
            true
        }
    });
    let seen = Arc::new(Seen::default());
    mgr.fleet_controller::<ConfigMap>()
        .named("seen")
        .complete(Arc::clone(&seen))
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    create(&member, "from-mine").await;
    eventually(LONG, "the provider's cluster reconciled", || async {
        seen.has("from-mine").then_some(())
    })
    .await;
    assert!(
        labelled.load(Ordering::SeqCst),
        "its labels reached the filter"
    );
    stop_manager(stop, task).await;
}
