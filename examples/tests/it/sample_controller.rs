//! The derived sample-controller against envtest, running as a service
//! account bound to its generated ClusterRole (RBAC enforced): create,
//! update and delete with the finalizer, the `Ready` condition and
//! `observedGeneration`, re-triggers by the owned Deployment and the mapped
//! Secret, per-key backoff, a refused adoption, and 403 once a rule is
//! taken out of the role. (Its webhooks: `sample_webhooks`.) The tests run
//! unchanged against an existing cluster (`USE_EXISTING_CLUSTER=true`), in
//! a namespace of their own, the manager watching that namespace only; the
//! Foo CRD on the cluster is used as it is when it serves the test's (a
//! deployed sample's, with more fields, is), and the ClusterRole and
//! binding are the env's own (`foo-controller-<run id>`), so a deployed
//! sample is left as it is. There the server's log of 403 answers is not
//! available and a missing rule shows in the controller's error metric
//! alone.

// The kind is `Foo`: a `foo` here is a Foo object, not a placeholder name.
#![allow(clippy::disallowed_names)]

use std::time::Duration;

use controller_runtime::conditions::Conditions;
use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::Secret;
use controller_runtime::kube_client::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use controller_runtime::manifests::to_yaml;
use controller_runtime::rbac::ClusterRole;
use informer_examples::deployment_spec;
use informer_examples::sample::{
    FINALIZER, Foo, FooReconciler, FooSpec, READY, SECRET_LABEL, SECRETS_ANNOTATION,
};

use crate::sample_support::{Running, forbidden, wait_until};

struct Fixture {
    env: envtest::TestEnv,
    foos: Api<Foo>,
    deployments: Api<Deployment>,
    secrets: Api<Secret>,
    running: Running,
}

impl Fixture {
    /// envtest with the Foo CRD, and the controller running as a service
    /// account bound to `role`.
    async fn start(role: ClusterRole) -> Fixture {
        // The CRD is served once `start` returns (on an existing cluster:
        // Established; removed with the env if this run installed it).
        let env = envtest::TestEnv::builder()
            .crds([Foo::crd().unwrap()])
            .start()
            .await
            .unwrap();
        let (admin, ns) = (env.client(), env.namespace().to_string());
        let client = env
            .client_with_cluster_role(&ns, "foo-controller", &role)
            .await
            .unwrap();
        let running = Running::start(&env, client, None).await;
        Fixture {
            foos: Api::namespaced(admin.clone(), &ns),
            deployments: Api::namespaced(admin.clone(), &ns),
            secrets: Api::namespaced(admin, &ns),
            env,
            running,
        }
    }

    async fn create_foo(&self, name: &str, deployment: &str, replicas: i32) {
        let foo = Foo::new(
            name,
            FooSpec {
                deployment_name: deployment.into(),
                replicas: Some(replicas),
            },
        );
        self.foos
            .create(&PostParams::default(), &foo)
            .await
            .unwrap();
    }

    async fn replicas(&self, deployment: &str) -> Option<i32> {
        self.deployments
            .get_opt(deployment)
            .await
            .unwrap()
            .and_then(|d| deployment_spec(&d)?.replicas)
    }

    async fn available(&self, foo: &str) -> Option<i32> {
        self.foos
            .get_opt(foo)
            .await
            .unwrap()
            .and_then(|f| f.status)
            .map(|s| s.available_replicas)
    }

    /// Requests the server answered with 403 so far.
    fn forbidden(&self) -> Vec<String> {
        forbidden(&self.env)
    }

    async fn stop(self) {
        self.running.stop().await;
    }
}

/// Plays the Deployment controller: all replicas available.
async fn make_available(deployments: &Api<Deployment>, name: &str, n: i32) {
    let patch = serde_json::json!({"status": {"replicas": n, "availableReplicas": n}});
    deployments
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn reconciles_create_update_and_delete_through_the_finalizer() {
    let f = Fixture::start(FooReconciler::rbac()).await;
    f.create_foo("alpha", "alpha-web", 2).await;
    wait_until("alpha-web created with 2 replicas", || async {
        f.replicas("alpha-web").await == Some(2)
    })
    .await;
    let foo = f.foos.get("alpha").await.unwrap();
    assert_eq!(
        foo.metadata.finalizers.as_deref(),
        Some(&[FINALIZER.to_string()][..])
    );
    let dep = f.deployments.get("alpha-web").await.unwrap();
    let owner = &dep.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Foo", Some(true)));
    assert_eq!(Some(&owner.uid), foo.metadata.uid.as_ref());

    // Update: the spec change reaches the Deployment, availability the status.
    let patch = serde_json::json!({"spec": {"replicas": 4}});
    f.foos
        .patch("alpha", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_until("alpha-web scaled to 4", || async {
        f.replicas("alpha-web").await == Some(4)
    })
    .await;
    make_available(&f.deployments, "alpha-web", 4).await;
    wait_until("alpha reports 4 available", || async {
        f.available("alpha").await == Some(4)
    })
    .await;
    // Ready, for the generation just reconciled.
    let foo = f.foos.get("alpha").await.unwrap();
    let status = foo.status.unwrap();
    let ready = status.conditions.find_condition(READY).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "DeploymentAvailable")
    );
    assert_eq!(ready.message, "4 of 4 replicas available");
    assert!(foo.metadata.generation >= Some(2));
    assert_eq!(status.observed_generation, foo.metadata.generation);
    assert_eq!(ready.observed_generation, foo.metadata.generation);

    // Delete: cleanup runs, the finalizer is removed, the object goes.
    f.foos
        .delete("alpha", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("alpha and alpha-web gone", || async {
        f.foos.get_opt("alpha").await.unwrap().is_none()
            && f.deployments.get_opt("alpha-web").await.unwrap().is_none()
    })
    .await;
    // At least once: removing the Deployment re-triggers the Foo while the
    // cache may still hold it with the finalizer, and cleanup is idempotent.
    assert!(
        f.running.ledger.count("foo/alpha: cleaned up") >= 1,
        "{:#?}",
        f.running.ledger.lines()
    );
    assert_eq!(
        f.forbidden(),
        Vec::<String>::new(),
        "the generated role covers everything"
    );
    f.stop().await;
}

#[tokio::test]
async fn the_owned_deployment_retriggers_its_foo() {
    let f = Fixture::start(FooReconciler::rbac()).await;
    f.create_foo("beta", "beta-web", 1).await;
    wait_until("beta-web created", || async {
        f.replicas("beta-web").await == Some(1)
    })
    .await;
    // Someone scales the Deployment by hand: the owner scales it back.
    let patch = serde_json::json!({"spec": {"replicas": 7}});
    f.deployments
        .patch("beta-web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_until("beta-web scaled back to 1", || async {
        f.replicas("beta-web").await == Some(1)
    })
    .await;
    assert!(
        f.running
            .ledger
            .count("foo/beta: scaled deployment beta-web from 7 to 1")
            >= 1,
        "{:#?}",
        f.running.ledger.lines()
    );
    // A Deployment status change (no Foo change at all) updates the Foo's status.
    make_available(&f.deployments, "beta-web", 1).await;
    wait_until("beta reports 1 available", || async {
        f.available("beta").await == Some(1)
    })
    .await;
    assert_eq!(f.forbidden(), Vec::<String>::new());
    f.stop().await;
}

#[tokio::test]
async fn a_mapped_secret_retriggers_its_foo() {
    let f = Fixture::start(FooReconciler::rbac()).await;
    f.create_foo("gamma", "gamma-web", 1).await;
    wait_until("gamma-web created", || async {
        f.replicas("gamma-web").await == Some(1)
    })
    .await;
    let annotation = || async {
        let d = f.deployments.get("gamma-web").await.unwrap();
        deployment_spec(&d)
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(SECRETS_ANNOTATION).cloned())
            .unwrap_or_default()
    };
    assert_eq!(annotation().await, "");
    let mut secret = Secret::default();
    secret.metadata.name = Some("gamma-credentials".into());
    secret.metadata.labels = Some([(SECRET_LABEL.to_string(), "gamma".to_string())].into());
    let created = f
        .secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    wait_until("gamma-web names the secret's version", || async {
        annotation().await == format!("gamma-credentials={rv}")
    })
    .await;
    // An unlabelled Secret maps to nothing.
    assert!(FooReconciler::secret_to_foos(&Secret::default()).is_empty());
    assert_eq!(f.forbidden(), Vec::<String>::new());
    f.stop().await;
}

#[tokio::test]
async fn a_refused_adoption_backs_off_per_key() {
    let f = Fixture::start(FooReconciler::rbac()).await;
    let mut squatter = informer_examples::demo_deployment("squatter", 1);
    squatter.metadata.namespace = None; // the test's namespace
    f.deployments
        .create(&PostParams::default(), &squatter)
        .await
        .unwrap();
    f.create_foo("delta", "squatter", 1).await;
    wait_until("the first refusal", || async {
        f.running.ledger.count("foo/delta: refused to adopt") >= 1
    })
    .await;
    wait_until("delta reports Ready=False (ErrResourceExists)", || async {
        let foo = f.foos.get("delta").await.unwrap();
        let status = foo.status.unwrap_or_default();
        status
            .conditions
            .find_condition(READY)
            .is_some_and(|c| c.status == "False" && c.reason == "ErrResourceExists")
    })
    .await;
    // Another Foo is not held up by delta's failures.
    f.create_foo("epsilon", "epsilon-web", 1).await;
    wait_until("epsilon-web created", || async {
        f.replicas("epsilon-web").await == Some(1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Exponential per-key backoff from 5 ms: about 9 attempts in 1.5 s
    // (5, 10, 20 ... 640 ms apart); an immediate requeue would make hundreds.
    let attempts = f.running.ledger.count("foo/delta: refused to adopt");
    assert!((3..=20).contains(&attempts), "{attempts} attempts in 1.5 s");
    // The squatter is never adopted or changed.
    let squatter = f.deployments.get("squatter").await.unwrap();
    assert!(squatter.metadata.owner_references.is_none());
    assert_eq!(deployment_spec(&squatter).and_then(|s| s.replicas), Some(1));
    f.stop().await;
}

#[tokio::test]
async fn a_rule_removed_from_the_generated_role_fails_with_403() {
    let mut role = FooReconciler::rbac();
    let rules = role.rules.as_mut().unwrap();
    let before = rules.len();
    rules.retain(|r| !r.resources.iter().flatten().any(|res| res == "foos/status"));
    assert_eq!(
        rules.len(),
        before - 1,
        "the generated role has a foos/status rule"
    );
    let f = Fixture::start(role).await;
    f.create_foo("zeta", "zeta-web", 1).await;
    wait_until("zeta-web created", || async {
        f.replicas("zeta-web").await == Some(1)
    })
    .await;
    let failed = || {
        let metrics = f.running.mgr.metrics().encode().unwrap();
        metrics.lines().any(|l| {
            l.starts_with("controller_runtime_reconcile_errors_total")
                && l.contains("foo-controller")
        })
    };
    wait_until("a failed reconcile", || async { failed() }).await;
    assert_eq!(f.available("zeta").await, None);
    if !f.env.is_existing_cluster() {
        wait_until("a forbidden status write", || async {
            f.forbidden()
                .iter()
                .any(|r| r.starts_with("PATCH") && r.ends_with("/foos/zeta/status"))
        })
        .await;
    }
    f.stop().await;
}

/// The generated role, checked in. Regenerate with
/// `UPDATE_GOLDEN=1 cargo test -p informer-examples --test it sample_controller::`.
#[test]
fn golden_rbac() {
    let yaml = to_yaml(&FooReconciler::rbac()).unwrap();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/sample-controller-rbac.yaml"
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &yaml).unwrap();
    }
    assert_eq!(
        yaml,
        std::fs::read_to_string(path).unwrap(),
        "regenerate with UPDATE_GOLDEN=1"
    );
}

/// The README's main job: the demo binary, with no cluster chosen,
/// reaches its end state and says so.
#[test]
fn the_demo_runs_to_its_summary() {
    let home =
        std::env::temp_dir().join(format!("informer-sample-controller-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sample-controller"))
        .env_remove("KUBECONFIG")
        .env_remove(envtest::USE_EXISTING_CLUSTER)
        .env("HOME", &home)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.starts_with(&format!(
            "{}http",
            informer_examples::cluster::DEMO_BANNER_PREFIX
        )),
        "{stdout}"
    );
    for line in [
        "bound to its generated ClusterRole",
        "   ok: the webhook server is ready (its CA in every caBundle)",
        "   ok: beta reads back with replicas 1 (set by the defaulting webhook)",
        "foo/alpha: scaled deployment alpha-web from 2 to 3",
        "foo/delta: refused to adopt deployment squatter",
        "foo/gamma: cleaned up (deployment gamma-web removed)",
        "foo/alpha: deployment alpha-web wants 3 replicas, 3 available, Ready=True",
        "foo/delta: deployment squatter wants 1 replicas, 0 available, Ready=False",
        "foo/legacy: deployment legacy-web wants 1 replicas, 0 available, Ready=False",
        "    defaulted: foo/beta was created without replicas and got 1",
        "    denied: foo/bad: admission webhook \"validate-v1.foos.samplecontroller.k8s.io\" denied the request: spec.deploymentName: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label",
        "    warning: foo/big: spec.replicas: 12 replicas is more than 10; is this intended?",
        "    converted: foo/legacy written as v1alpha1 {deployment: legacy-web} reads as v1 {deploymentName: legacy-web, replicas: 1}",
        "forbidden (403): 0",
        "shut down cleanly",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    assert!(
        !stdout.contains("foo/gamma: deployment"),
        "gamma was deleted:\n{stdout}"
    );
}
