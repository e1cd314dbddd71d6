//! Cache scope on a real server: a manager restricted to one namespace, or
//! to two, runs under namespaced Roles only (RBAC enforced) without a
//! single 403 and never sees another namespace; a selector-restricted cache
//! never sees objects outside its selector and follows label changes in and
//! out of it; a per-kind transform changes what is cached and never brings
//! managedFields back.

use std::time::Duration;

use controller_runtime::informer_core::factory::InformerOptions;
use controller_runtime::informer_core::selector::LabelSelector;
use controller_runtime::informer_core::shared_informer::handler_fn;
use controller_runtime::prelude::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use parking_lot::Mutex;

use crate::fixture::{assert_nothing_forbidden, copy_into_secret, create_namespace, spawn_manager};
use crate::{config_map, eventually};

const LIMIT: Duration = Duration::from_secs(15);

/// Keeps a Secret `<name>-copy` with each ConfigMap's data, owned by it.
#[derive(Controller)]
#[controller(for = ConfigMap, owns(Secret), name = "scoped-copier")]
struct ScopedCopier;

impl ObjectReconciler<ConfigMap> for ScopedCopier {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        copy_into_secret(&cm, ctx).await
    }
}

#[tokio::test]
async fn a_namespaced_manager_runs_under_a_namespaced_role_without_a_403() {
    let env = envtest::TestEnv::start().await.unwrap();
    create_namespace(&env.client(), "team-a").await;
    create_namespace(&env.client(), "team-b").await;
    let client = env
        .client_with_role(
            "team-a",
            "scoped-copier",
            &ScopedCopier::rbac_role("team-a"),
        )
        .await
        .unwrap();
    let mgr = Manager::builder(client)
        .namespace("team-a")
        .build()
        .await
        .unwrap();
    assert_eq!(mgr.cache().scope().namespace_name(), Some("team-a"));
    ScopedCopier.setup(&mgr).unwrap();
    let (stop, task) = spawn_manager(&mgr);

    for ns in ["team-a", "team-b"] {
        Api::<ConfigMap>::namespaced(env.client(), ns)
            .create(&PostParams::default(), &config_map(ns, "web"))
            .await
            .unwrap();
    }
    let secrets_a: Api<Secret> = Api::namespaced(env.client(), "team-a");
    eventually(LIMIT, "the copy in team-a", || async {
        secrets_a.get_opt("web-copy").await.unwrap()
    })
    .await;
    // Reads go to the namespace's cache (started by now: a reconcile ran).
    let cached = mgr
        .cache()
        .list::<ConfigMap>(&ListOptions::new())
        .await
        .unwrap();
    assert!(
        cached
            .iter()
            .all(|c| c.namespace().as_deref() == Some("team-a"))
    );
    let secrets_b: Api<Secret> = Api::namespaced(env.client(), "team-b");
    assert!(secrets_b.get_opt("web-copy").await.unwrap().is_none());

    assert_nothing_forbidden(&env, "the Role");
    stop.cancel();
    task.await.unwrap().unwrap();
}

fn labelled(name: &str, team: &str) -> ConfigMap {
    let mut cm = config_map("default", name);
    cm.metadata.labels = Some([("team".to_owned(), team.to_owned())].into());
    cm
}

#[tokio::test]
async fn a_selector_restricted_cache_sees_only_matching_objects_and_follows_labels() {
    let env = envtest::TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    cms.create(&PostParams::default(), &labelled("in", "a"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &labelled("out", "b"))
        .await
        .unwrap();
    let mgr = Manager::builder(env.client())
        .cache_options::<ConfigMap>(InformerOptions::new().label_selector("team=a"))
        .build()
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    mgr.cache()
        .informer::<ConfigMap>()
        .add_event_handler(
            handler_fn()
                .on_add({
                    let seen = seen.clone();
                    move |cm: Arc<ConfigMap>, _| seen.lock().push(format!("add {}", cm.name_any()))
                })
                .on_delete({
                    let seen = seen.clone();
                    move |cm| {
                        seen.lock()
                            .push(format!("delete {}", cm.object().name_any()))
                    }
                }),
        )
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let names = || async {
        let mut names: Vec<String> = mgr
            .cache()
            .list::<ConfigMap>(&ListOptions::new())
            .await
            .unwrap()
            .iter()
            .map(|c| c.name_any())
            .collect();
        names.sort();
        names
    };
    eventually(LIMIT, "the manager started", || async {
        mgr.cache().is_started().then_some(())
    })
    .await;
    assert_eq!(names().await, ["in"]);
    assert_eq!(
        mgr.cache()
            .get::<ConfigMap>(Some("default"), "out")
            .await
            .unwrap(),
        None,
        "an object outside the selector is invisible"
    );

    // Labelled into the selector: an add; out of it: a delete.
    let relabel =
        |team: &str| Patch::Merge(serde_json::json!({"metadata": {"labels": {"team": team}}}));
    cms.patch("out", &PatchParams::default(), &relabel("a"))
        .await
        .unwrap();
    eventually(LIMIT, "'out' labelled in", || async {
        (names().await == ["in", "out"]).then_some(())
    })
    .await;
    cms.patch("in", &PatchParams::default(), &relabel("b"))
        .await
        .unwrap();
    eventually(LIMIT, "'in' labelled out", || async {
        (names().await == ["out"]).then_some(())
    })
    .await;
    eventually(LIMIT, "the events", || async {
        let seen = seen.lock().clone();
        (seen == ["add in", "add out", "delete in"]).then_some(())
    })
    .await;
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_manager_of_two_namespaces_runs_under_their_roles_and_never_sees_a_third() {
    let env = envtest::TestEnv::start().await.unwrap();
    for ns in ["team-a", "team-b", "team-c"] {
        create_namespace(&env.client(), ns).await;
    }
    // One service account, a Role and RoleBinding in each of its two
    // namespaces, nothing cluster-wide.
    let mut client = None;
    for ns in ["team-a", "team-b"] {
        client = Some(
            env.client_with_role("team-a", "scoped-copier", &ScopedCopier::rbac_role(ns))
                .await
                .unwrap(),
        );
    }
    let mgr = Manager::builder(client.unwrap())
        .namespaces(["team-b", "team-a"])
        .build()
        .await
        .unwrap();
    assert_eq!(mgr.cache().scope().namespace_names(), ["team-a", "team-b"]);
    assert_eq!(mgr.cache().informer::<ConfigMap>().informers().len(), 2);
    ScopedCopier.setup(&mgr).unwrap();
    let lister = mgr.cache().lister::<ConfigMap>();
    let (stop, task) = spawn_manager(&mgr);

    for ns in ["team-c", "team-a", "team-b"] {
        Api::<ConfigMap>::namespaced(env.client(), ns)
            .create(&PostParams::default(), &config_map(ns, "web"))
            .await
            .unwrap();
    }
    for ns in ["team-a", "team-b"] {
        let secrets: Api<Secret> = Api::namespaced(env.client(), ns);
        eventually(LIMIT, &format!("the copy in {ns}"), || async {
            secrets.get_opt("web-copy").await.unwrap()
        })
        .await;
    }
    let keys = |objs: Vec<Arc<ConfigMap>>| {
        let mut keys: Vec<String> = objs
            .iter()
            .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
            .collect();
        keys.sort();
        keys
    };
    let cached = mgr
        .cache()
        .list::<ConfigMap>(&ListOptions::new())
        .await
        .unwrap();
    assert_eq!(keys(cached), ["team-a/web", "team-b/web"]);
    let in_b = mgr
        .cache()
        .list::<ConfigMap>(&ListOptions::new().namespace("team-b"))
        .await
        .unwrap();
    assert_eq!(keys(in_b), ["team-b/web"]);
    assert!(
        mgr.cache()
            .get::<ConfigMap>(Some("team-b"), "web")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        mgr.cache()
            .get::<ConfigMap>(Some("team-c"), "web")
            .await
            .unwrap(),
        None
    );
    eventually(LIMIT, "the lister over both namespaces", || async {
        (keys(lister.list(&LabelSelector::everything())) == ["team-a/web", "team-b/web"])
            .then_some(())
    })
    .await;
    let secrets_c: Api<Secret> = Api::namespaced(env.client(), "team-c");
    assert!(secrets_c.get_opt("web-copy").await.unwrap().is_none());
    assert_nothing_forbidden(&env, "the Roles");
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_cache_transform_changes_what_is_cached_and_managed_fields_stay_stripped() {
    let env = envtest::TestEnv::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for (name, team) in [("in", "a"), ("out", "b")] {
        cms.patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(labelled(name, team)),
        )
        .await
        .unwrap();
    }
    assert!(
        cms.get("in")
            .await
            .unwrap()
            .metadata
            .managed_fields
            .is_some(),
        "the server keeps managedFields"
    );
    let mgr = Manager::builder(env.client())
        .cache_options::<ConfigMap>(InformerOptions::new().label_selector("team=a"))
        .cache_transform(|mut cm: ConfigMap| {
            cm.data = None;
            cm.metadata
                .annotations
                .get_or_insert_default()
                .insert("transformed".into(), "yes".into());
            // A transform that tries to keep (even add) managedFields.
            cm.metadata
                .managed_fields
                .get_or_insert_default()
                .push(ManagedFieldsEntry {
                    manager: Some("transform".into()),
                    ..ManagedFieldsEntry::default()
                });
            cm
        })
        .build()
        .await
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    eventually(LIMIT, "the manager started", || async {
        mgr.cache().is_started().then_some(())
    })
    .await;
    let cached = mgr
        .cache()
        .list::<ConfigMap>(&ListOptions::new())
        .await
        .unwrap();
    assert_eq!(cached.len(), 1, "only the object in the selector");
    let cm = &cached[0];
    assert_eq!(cm.name_any(), "in");
    assert_eq!(
        cm.annotations().get("transformed").map(String::as_str),
        Some("yes")
    );
    assert_eq!(cm.data, None);
    assert_eq!(cm.metadata.managed_fields, None);

    // An update arrives transformed as well.
    cms.patch(
        "in",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"k": "v"}, "metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    let updated = eventually(LIMIT, "the update", || async {
        mgr.cache()
            .get::<ConfigMap>(Some("default"), "in")
            .await
            .unwrap()
            .filter(|cm| cm.labels().contains_key("x"))
    })
    .await;
    assert_eq!(updated.data, None);
    assert_eq!(updated.metadata.managed_fields, None);
    assert_eq!(
        updated.annotations().get("transformed").map(String::as_str),
        Some("yes")
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}
