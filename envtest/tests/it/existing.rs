//! Existing-cluster mode changes nothing it did not create: an in-process
//! server plays the user's cluster (with a deployed operator's CRD, object,
//! ClusterRole and binding), and a second `TestEnv` uses it through
//! `TestEnvBuilder::existing_cluster`. A CRD that is there is used as it
//! is, or the start fails naming the difference (replacing it is an
//! opt-in); RBAC clients get per-run names; everything created carries the
//! run label and is gone after the drop; `cleanup_existing_cluster`
//! removes labelled leftovers only; envtest-only accessors and settings
//! are errors naming the feature.

use crate::namespace;
use envtest::{Error, RUN_LABEL, TestEnv};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::json;

/// The user's cluster: an in-process server of its own. `None` (the test
/// is skipped) when the tests themselves run against an existing cluster.
/// The tests run on two worker threads: a `TestEnv`'s drop blocks its
/// thread on the teardown, which the cluster (on the same runtime) answers
/// from the other.
async fn cluster() -> Option<TestEnv> {
    if envtest::skip_on_existing_cluster("an in-process server to play the user's cluster") {
        return None;
    }
    Some(TestEnv::start().await.unwrap())
}

/// A test env on `cluster`, as `USE_EXISTING_CLUSTER=true` would use it.
fn on(cluster: &TestEnv) -> envtest::TestEnvBuilder {
    TestEnv::builder().existing_cluster(cluster.client_config())
}

/// The Foo CRD: `spec.name`, plus `extra` fields in the schema.
fn foo_crd(extra: &[&str]) -> CustomResourceDefinition {
    let mut spec = json!({"name": {"type": "string"}});
    for field in extra {
        spec[*field] = json!({"type": "string"});
    }
    serde_json::from_value(json!({
        "metadata": {"name": "foos.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Foo", "plural": "foos", "singular": "foo"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": spec},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                }}},
            }],
        }
    }))
    .unwrap()
}

fn foos(client: &Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Foo".into(),
        plural: "foos".into(),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn foo(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// The deployed operator: its CRD (with `extra`), a Foo `prod/live`
/// using it, and its ClusterRole and ClusterRoleBinding `foo-controller`.
async fn deploy_operator(cluster: &TestEnv) {
    let client = cluster.client();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &foo_crd(&["extra"]))
        .await
        .unwrap();
    namespace(&client, "prod").await;
    let live = foo("live", json!({"name": "web", "extra": "kept"}));
    let api = foos(&client, "prod");
    let deadline = tokio::time::Instant::now() + crate::WAIT;
    while api.list(&ListParams::default()).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Foo CRD is not served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    api.create(&PostParams::default(), &live).await.unwrap();
    let mut role = ClusterRole::default();
    role.metadata.name = Some("foo-controller".into());
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "foo-controller"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "foo-controller"},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "prod"}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// The deployed operator's objects as (kind/name, uid, resourceVersion, body
/// without metadata), to compare before and after.
async fn operator_state(cluster: &TestEnv) -> Vec<(String, String, String, serde_json::Value)> {
    let client = cluster.client();
    let state = |kind: &str, v: serde_json::Value| {
        let meta = v["metadata"].clone();
        let mut body = v;
        body.as_object_mut().unwrap().remove("metadata");
        if kind == "crd" {
            // Its status (conditions' times) is the server's, not ours.
            body.as_object_mut().unwrap().remove("status");
        }
        (
            format!("{kind}/{}", meta["name"].as_str().unwrap()),
            meta["uid"].as_str().unwrap().to_string(),
            meta["resourceVersion"].as_str().unwrap().to_string(),
            body,
        )
    };
    vec![
        state(
            "crd",
            json(
                &Api::<CustomResourceDefinition>::all(client.clone())
                    .get("foos.example.com")
                    .await
                    .unwrap(),
            ),
        ),
        state(
            "foo",
            json(&foos(&client, "prod").get("live").await.unwrap()),
        ),
        state(
            "clusterrole",
            json(
                &Api::<ClusterRole>::all(client.clone())
                    .get("foo-controller")
                    .await
                    .unwrap(),
            ),
        ),
        state(
            "clusterrolebinding",
            json(
                &Api::<ClusterRoleBinding>::all(client)
                    .get("foo-controller")
                    .await
                    .unwrap(),
            ),
        ),
    ]
}

fn json(v: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}

/// Namespaces named `envtest-...` that are not terminating.
async fn live_test_namespaces(cluster: &TestEnv) -> Vec<String> {
    Api::<Namespace>::all(cluster.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_none())
        .filter_map(|ns| ns.metadata.name)
        .filter(|n| n.starts_with(envtest::NAMESPACE_PREFIX))
        .collect()
}

fn reader_role(name: &str) -> ClusterRole {
    let mut role = ClusterRole::default();
    role.metadata.name = Some(name.into());
    role.rules = Some(vec![PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: vec!["list".into()],
        ..PolicyRule::default()
    }]);
    role
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployed_operator_is_unchanged_by_a_test_using_its_crd_and_role_names() {
    let Some(cluster) = cluster().await else {
        return;
    };
    deploy_operator(&cluster).await;
    let before = operator_state(&cluster).await;
    let env = on(&cluster).crds([foo_crd(&[])]).start().await.unwrap();
    // The CRD on the cluster serves what the test needs: used as it is.
    let mine = foos(&env.client(), env.namespace());
    mine.create(&PostParams::default(), &foo("mine", json!({"name": "x"})))
        .await
        .unwrap();
    // The role and binding of the operator's names are the env's own.
    let client = env
        .client_with_cluster_role(
            env.namespace(),
            "foo-controller",
            &reader_role("foo-controller"),
        )
        .await
        .unwrap();
    let own = env.cluster_scoped_name("foo-controller");
    assert_ne!(own, "foo-controller");
    let role = Api::<ClusterRole>::all(cluster.client())
        .get(&own)
        .await
        .unwrap();
    let run = env.run_id().unwrap().to_string();
    assert_eq!(
        role.metadata.labels.unwrap_or_default().get(RUN_LABEL),
        Some(&run)
    );
    Api::<ConfigMap>::all(client)
        .list(&ListParams::default())
        .await
        .expect("the per-run role is bound");
    assert_eq!(
        operator_state(&cluster).await,
        before,
        "while the test runs"
    );
    drop(env);
    assert_eq!(operator_state(&cluster).await, before, "after the teardown");
    let roles = Api::<ClusterRole>::all(cluster.client());
    assert!(
        roles.get_opt(&own).await.unwrap().is_none(),
        "{own} removed"
    );
    let bindings = Api::<ClusterRoleBinding>::all(cluster.client());
    assert!(bindings.get_opt(&own).await.unwrap().is_none());
    assert_eq!(live_test_namespaces(&cluster).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_that_lacks_what_the_test_needs_fails_the_start_naming_it() {
    let Some(cluster) = cluster().await else {
        return;
    };
    deploy_operator(&cluster).await;
    let before = operator_state(&cluster).await;
    let e = on(&cluster)
        .crds([foo_crd(&["replicas"])])
        .start()
        .await
        .unwrap_err();
    let message = e.to_string();
    for part in [
        "use CRD foos.example.com, which is on the cluster already",
        "version v1: field spec.replicas is not in its schema",
        "replace_existing_crds_destructively",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(operator_state(&cluster).await, before);
    assert_eq!(
        live_test_namespaces(&cluster).await,
        Vec::<String>::new(),
        "nothing created before the check"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_destructive_opt_in_replaces_the_crd_and_leaves_it() {
    let Some(cluster) = cluster().await else {
        return;
    };
    deploy_operator(&cluster).await;
    let crds = Api::<CustomResourceDefinition>::all(cluster.client());
    let uid = crds.get("foos.example.com").await.unwrap().metadata.uid;
    let env = on(&cluster)
        .crds([foo_crd(&["replicas"])])
        .replace_existing_crds_destructively()
        .start()
        .await
        .unwrap();
    drop(env);
    let crd = crds.get("foos.example.com").await.unwrap();
    assert_eq!(crd.metadata.uid, uid, "replaced, not re-created");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    assert!(
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"].is_object(),
        "{schema}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_run_creates_is_labelled_and_removed_at_teardown() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let env = on(&cluster).crds([foo_crd(&[])]).start().await.unwrap();
    let run = env.run_id().unwrap().to_string();
    assert_eq!(env.namespace(), format!("envtest-{run}"));
    let crds = Api::<CustomResourceDefinition>::all(cluster.client());
    let crd = crds.get("foos.example.com").await.unwrap();
    assert_eq!(crd.metadata.labels.unwrap_or_default()[RUN_LABEL], run);
    let ns = Api::<Namespace>::all(cluster.client())
        .get(env.namespace())
        .await
        .unwrap();
    assert_eq!(ns.metadata.labels.unwrap_or_default()[RUN_LABEL], run);
    assert_eq!(env.run_labels()[RUN_LABEL], run);
    drop(env);
    assert!(crds.get_opt("foos.example.com").await.unwrap().is_none());
    assert_eq!(live_test_namespaces(&cluster).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_crds_stay_and_the_next_run_uses_them_as_they_are() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let first = on(&cluster)
        .crds([foo_crd(&[])])
        .keep_crds()
        .start()
        .await
        .unwrap();
    drop(first);
    let crds = Api::<CustomResourceDefinition>::all(cluster.client());
    let kept = crds.get("foos.example.com").await.unwrap();
    let second = on(&cluster).crds([foo_crd(&[])]).start().await.unwrap();
    drop(second);
    let after = crds.get("foos.example.com").await.unwrap();
    assert_eq!(
        (after.metadata.uid, after.metadata.resource_version),
        (kept.metadata.uid, kept.metadata.resource_version),
        "not the second run's to delete"
    );
}

fn feature(e: Error) -> String {
    match e {
        Error::EnvtestOnly { feature } => feature,
        other => panic!("expected EnvtestOnly, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envtest_only_accessors_are_errors_naming_the_feature() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let env = on(&cluster).start().await.unwrap();
    assert_eq!(feature(env.try_faults().map(drop).unwrap_err()), "faults");
    assert_eq!(feature(env.try_request_log().unwrap_err()), "request_log");
    assert_eq!(
        feature(env.try_current_revision().unwrap_err()),
        "current_revision"
    );
    assert_eq!(
        feature(env.try_service_account_token("ns", "sa").unwrap_err()),
        "service_account_token"
    );
    let message = env.try_faults().map(drop).unwrap_err().to_string();
    assert!(
        message.contains("skip_on_existing_cluster"),
        "says what to do: {message}"
    );
    // On the in-process server they answer.
    assert!(cluster.try_faults().is_ok());
    assert!(cluster.try_request_log().is_ok());
    assert!(cluster.try_current_revision().is_ok());
    assert!(cluster.try_service_account_token("ns", "sa").is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envtest_only_settings_are_refused_on_an_existing_cluster() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let refused = [
        (on(&cluster).json_only(), "json_only"),
        (on(&cluster).tls(), "tls"),
        (on(&cluster).admin_endpoints(), "admin_endpoints"),
        (on(&cluster).bearer_token("t"), "bearer_token"),
    ];
    for (builder, name) in refused {
        assert_eq!(feature(builder.start().await.unwrap_err()), name);
    }
    assert_eq!(live_test_namespaces(&cluster).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_removes_labelled_objects_only() {
    let Some(cluster) = cluster().await else {
        return;
    };
    deploy_operator(&cluster).await;
    let before = operator_state(&cluster).await;
    let client = cluster.client();
    let labelled = |run: &str| json!({RUN_LABEL: run});
    // Left by two killed runs: a namespace, a CRD, a ClusterRole, a
    // RoleBinding in another namespace and a webhook configuration.
    for run in ["a", "b"] {
        let ns: Namespace = serde_json::from_value(
            json!({"metadata": {"name": format!("envtest-{run}"), "labels": labelled(run)}}),
        )
        .unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let mut role = reader_role(&format!("reader-{run}"));
        role.metadata.labels = serde_json::from_value(labelled(run)).unwrap();
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        let binding: RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("reader-{run}"), "namespace": "prod", "labels": labelled(run)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("reader-{run}")},
        }))
        .unwrap();
        Api::<RoleBinding>::namespaced(client.clone(), "prod")
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
        let hooks: ValidatingWebhookConfiguration = serde_json::from_value(
            json!({"metadata": {"name": format!("hooks-{run}"), "labels": labelled(run)}}),
        )
        .unwrap();
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .create(&PostParams::default(), &hooks)
            .await
            .unwrap();
    }
    let mut crd = foo_crd(&[]);
    crd.metadata.name = Some("bars.example.com".into());
    crd.spec.names.kind = "Bar".into();
    crd.spec.names.plural = "bars".into();
    crd.spec.names.singular = Some("bar".into());
    crd.metadata.labels = serde_json::from_value(labelled("a")).unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();

    let mut removed = envtest::cleanup_existing_cluster(client.clone(), Some("b"))
        .await
        .unwrap();
    removed.sort();
    assert_eq!(
        removed,
        [
            "ClusterRole reader-b",
            "Namespace envtest-b",
            "RoleBinding prod/reader-b",
            "ValidatingWebhookConfiguration hooks-b",
        ]
    );
    let mut removed = envtest::cleanup_existing_cluster(client.clone(), None)
        .await
        .unwrap();
    removed.sort();
    assert_eq!(
        removed,
        [
            "ClusterRole reader-a",
            "CustomResourceDefinition bars.example.com",
            "Namespace envtest-a",
            "RoleBinding prod/reader-a",
            "ValidatingWebhookConfiguration hooks-a",
        ]
    );
    assert_eq!(
        operator_state(&cluster).await,
        before,
        "unlabelled: untouched"
    );
    assert!(
        envtest::cleanup_existing_cluster(client, None)
            .await
            .unwrap()
            .is_empty(),
        "nothing left"
    );
}
