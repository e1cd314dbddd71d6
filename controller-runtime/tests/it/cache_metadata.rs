//! Metadata-only caches on a real server: a controller that owns Secrets by
//! their metadata alone is reconciled when an owned Secret changes and
//! caches no Secret data; the manager's metadata cache follows its kind's
//! selector and holds metadata only; a controller *for* a kind's metadata
//! (`PartialObjectMeta<K>`) reconciles it within the kind's selector.

use std::time::Duration;

use controller_runtime::informer_core::factory::InformerOptions;
use controller_runtime::kube_client::core::metadata::PartialObjectMeta;
use controller_runtime::prelude::*;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use parking_lot::Mutex;

use crate::fixture::spawn_manager;
use crate::{config_map, eventually};

const LIMIT: Duration = Duration::from_secs(15);
const SECRET_VALUE: &str = "s3cr3t-value-never-cached";

fn secret(name: &str, labels: &[(&str, &str)]) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    s.data = Some([("token".to_owned(), ByteString(SECRET_VALUE.into()))].into());
    s
}

/// What each reconcile of the ConfigMap `app` saw of its Secret
/// `app-token` in the metadata cache: absent, present, or labelled rotated.
struct WatchToken {
    cache: Cache,
    ns: String,
    seen: Arc<Mutex<Vec<&'static str>>>,
}

impl Reconciler for WatchToken {
    type Error = std::convert::Infallible;
    async fn reconcile(&self, req: Request, _: CallInfo) -> Result<Action, Self::Error> {
        if req.name == "app" && req.namespace.as_deref() == Some(&self.ns) {
            let token = self
                .cache
                .metadata_informer::<Secret>()
                .get(Some(&self.ns), "app-token");
            self.seen.lock().push(match token {
                None => "absent",
                Some(t) if t.labels().contains_key("rotated") => "rotated",
                Some(_) => "present",
            });
        }
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_controller_owning_secret_metadata_is_reconciled_by_their_changes_and_caches_no_data() {
    let env = envtest::TestEnv::start().await.unwrap();
    let mgr = Manager::builder(env.client()).build().await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    mgr.controller::<ConfigMap>()
        .named("secret-owner")
        .owns_metadata::<Secret>()
        .complete(WatchToken {
            cache: mgr.cache().clone(),
            ns: env.namespace().into(),
            seen: Arc::clone(&seen),
        })
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let saw = |what: &'static str| {
        let seen = Arc::clone(&seen);
        move || {
            let found = seen.lock().contains(&what);
            async move { found.then_some(()) }
        }
    };

    // The ConfigMap alone: reconciled once, no Secret yet.
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
    let owner = cms
        .create(&PostParams::default(), &config_map(env.namespace(), "app"))
        .await
        .unwrap();
    eventually(LIMIT, "the owner reconciled", saw("absent")).await;
    // The ConfigMap never changes again: only its Secret's events can
    // reconcile it from here on.
    let mut owned = secret("app-token", &[]);
    owned.metadata.owner_references = owner.controller_owner_ref(&()).map(|o| vec![o]);
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    secrets
        .create(&PostParams::default(), &owned)
        .await
        .unwrap();
    eventually(
        LIMIT,
        "a reconcile by the Secret's creation",
        saw("present"),
    )
    .await;
    secrets
        .patch(
            "app-token",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"rotated": "1"}}})),
        )
        .await
        .unwrap();
    eventually(LIMIT, "a reconcile by the Secret's change", saw("rotated")).await;

    // The cache holds metadata only, and no full Secret informer exists.
    // (On an existing cluster other namespaces hold Secrets too.)
    let cached: Vec<_> = mgr
        .cache()
        .metadata_informer::<Secret>()
        .list()
        .into_iter()
        .filter(|m| m.namespace().as_deref() == Some(env.namespace()))
        .collect();
    assert_eq!(cached.len(), 1);
    for meta in cached {
        let json = serde_json::to_string(meta.as_ref()).unwrap();
        assert!(!json.contains("\"data\""), "{json}");
    }
    let informers = mgr.informer_factory().synced();
    assert!(
        informers
            .keys()
            .any(|k| k.starts_with("PartialObjectMeta<Secret>")),
        "{informers:?}"
    );
    assert!(
        !informers.keys().any(|k| k.starts_with("Secret ")),
        "a full Secret informer was started: {informers:?}"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// The Secrets `ours` (team a) and `theirs` (team b) on a started server,
/// and a manager whose Secret cache selects `team=a`.
async fn team_secrets_and_a_manager_of_team_a() -> (envtest::TestEnv, Api<Secret>, Manager) {
    let env = envtest::TestEnv::start().await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    for (name, team) in [("ours", "a"), ("theirs", "b")] {
        secrets
            .create(&PostParams::default(), &secret(name, &[("team", team)]))
            .await
            .unwrap();
    }
    let mgr = Manager::builder(env.client())
        .cache_options::<Secret>(InformerOptions::new().label_selector("team=a"))
        .build()
        .await
        .unwrap();
    (env, secrets, mgr)
}

/// Labels the Secret `name` `team: a`, into the manager's selector.
async fn label_team_a(secrets: &Api<Secret>, name: &str) {
    secrets
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn the_managers_metadata_cache_follows_the_kinds_selector_and_holds_no_data() {
    let (env, secrets, mgr) = team_secrets_and_a_manager_of_team_a().await;
    let cached = mgr.cache().metadata_informer::<Secret>();
    let (stop, task) = spawn_manager(&mgr);
    let names = || {
        let mut names: Vec<String> = cached.list().iter().map(|s| s.name_any()).collect();
        names.sort();
        names
    };
    eventually(LIMIT, "the metadata cache synced", || async {
        cached.has_synced().then_some(())
    })
    .await;
    assert_eq!(names(), ["ours"]);
    label_team_a(&secrets, "theirs").await;
    eventually(LIMIT, "'theirs' labelled in", || async {
        (names() == ["ours", "theirs"]).then_some(())
    })
    .await;
    for meta in cached.list() {
        let json = serde_json::to_string(meta.as_ref()).unwrap();
        assert!(
            !json.contains(SECRET_VALUE) && !json.contains("\"data\""),
            "{json}"
        );
        assert_eq!(meta.labels().get("team").map(String::as_str), Some("a"));
    }
    // The selector went to the server with every list and watch.
    let reads: Vec<String> = env
        .request_log()
        .into_iter()
        .filter(|r| r.path == "/api/v1/secrets")
        .map(|r| r.query)
        .collect();
    assert!(!reads.is_empty());
    assert!(
        reads.iter().all(|q| q.contains("labelSelector=team%3Da")),
        "{reads:?}"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

/// Records the labels of each Secret it reconciles, from its metadata.
struct LabelsOf(Arc<Mutex<Vec<String>>>);

impl ObjectReconciler<PartialObjectMeta<Secret>> for LabelsOf {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        secret: Arc<PartialObjectMeta<Secret>>,
        _ctx: &ObjectContext<PartialObjectMeta<Secret>>,
    ) -> Result<Action, Self::Error> {
        let team = secret.labels().get("team").cloned().unwrap_or_default();
        self.0.lock().push(format!("{}:{team}", secret.name_any()));
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_controller_for_a_kinds_metadata_reconciles_it_within_the_kinds_selector() {
    // The selector given for Secret applies to the Secret metadata informer.
    let (_env, secrets, mgr) = team_secrets_and_a_manager_of_team_a().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let controller = mgr
        .controller::<PartialObjectMeta<Secret>>()
        .complete(LabelsOf(Arc::clone(&seen)))
        .unwrap();
    assert_eq!(controller.name(), "secret");
    let (stop, task) = spawn_manager(&mgr);
    eventually(LIMIT, "the Secret in the selector reconciled", || async {
        seen.lock().contains(&"ours:a".to_string()).then_some(())
    })
    .await;
    label_team_a(&secrets, "theirs").await;
    eventually(LIMIT, "the Secret labelled in reconciled", || async {
        seen.lock().contains(&"theirs:a".to_string()).then_some(())
    })
    .await;
    assert!(
        !seen.lock().iter().any(|s| s.ends_with(":b")),
        "reconciled outside the selector: {:?}",
        seen.lock()
    );
    let informers = mgr.informer_factory().synced();
    assert_eq!(informers.len(), 1, "one metadata informer: {informers:?}");
    assert!(
        informers
            .keys()
            .all(|k| k.starts_with("PartialObjectMeta<Secret>") && k.contains("labels=team=a")),
        "{informers:?}"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}
