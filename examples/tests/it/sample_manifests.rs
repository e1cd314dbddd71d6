//! The sample controller's manifests (`sample::manifests`, written by the
//! `manifests` binary `cargo xtask crd|rbac` runs): the binary writes
//! exactly what the library renders; each file holds the objects the
//! reconciler's `webhooks(...)` declaration derives (configurations,
//! Service, CRD conversion) and a ClusterRole holding the certificates'
//! rules; and applied to envtest, they run the sample: the manager, as the
//! ServiceAccount they bind and with nothing else granted, writes its CA
//! into every `caBundle`, and a Foo written as v1alpha1 is defaulted,
//! reconciled, rolled by a Secret and deleted through the finalizer, with
//! no request refused. (Every `sample_webhooks` test runs on the same
//! applied manifests.)

#![allow(clippy::disallowed_names)]

use std::process::Command;

use controller_runtime::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use controller_runtime::k8s_openapi::api::apps::v1::Deployment;
use controller_runtime::k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use controller_runtime::k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use controller_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use controller_runtime::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use controller_runtime::kube_client::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use informer_examples::deployment_spec;
use informer_examples::sample::{
    FooReconciler, SECRET_LABEL, SECRETS_ANNOTATION, manifests, v1alpha1, webhooks,
};

use crate::programs::empty_home;
use crate::sample_support::{NS, decode, documents, wait_until};
use crate::sample_webhooks::{Fixture, old_foo};

/// The rendered file `name`'s documents.
fn docs(name: &str) -> Vec<serde_json::Value> {
    let files = manifests::render(NS).unwrap();
    let file = files.into_iter().find(|m| m.file == name);
    documents(&[file.unwrap_or_else(|| panic!("no {name}"))])
}

/// Whether one of `rules` grants `want` (its group, resources, names and
/// verbs, each a subset; a rule without names grants every name).
fn granted(rules: &[PolicyRule], want: &PolicyRule) -> bool {
    let subset = |a: &Option<Vec<String>>, b: &Option<Vec<String>>| {
        a.iter()
            .flatten()
            .all(|x| b.iter().flatten().any(|y| y == x))
    };
    rules.iter().any(|r| {
        subset(&want.api_groups, &r.api_groups)
            && subset(&want.resources, &r.resources)
            && (r.resource_names.is_none() || subset(&want.resource_names, &r.resource_names))
            && want.verbs.iter().all(|v| r.verbs.contains(v))
    })
}

/// The binary `cargo xtask crd|rbac` runs: `--out DIR` writes the three
/// rendered files, `--only NAME --stdout` prints one, `--only rbac`
/// starts with the checked-in role, and an unknown file is refused.
#[test]
fn the_binary_writes_the_rendered_files() {
    let exe = env!("CARGO_BIN_EXE_manifests");
    let run = |args: &[&str]| {
        let output = Command::new(exe)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("starting {exe}: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "manifests {args:?} failed with {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    };
    let rendered = manifests::render(NS).unwrap();
    let names: Vec<&str> = rendered.iter().map(|m| m.file).collect();
    assert_eq!(names, ["crd.yaml", "rbac.yaml", "webhooks.yaml"]);

    let dir = empty_home("manifests");
    let out = dir.join("deploy");
    let printed = run(&["--out", &out.display().to_string()]);
    assert_eq!(printed.lines().count(), 3, "{printed}");
    for m in &rendered {
        let written = std::fs::read_to_string(out.join(m.file))
            .unwrap_or_else(|e| panic!("reading {}: {e}", m.file));
        assert_eq!(written, m.yaml, "{}", m.file);
        let only = m.file.trim_end_matches(".yaml");
        assert_eq!(run(&["--only", only, "--stdout"]), m.yaml, "--only {only}");
    }
    let _ = std::fs::remove_dir_all(&dir);

    let golden = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/golden/sample-controller-rbac.yaml"
    ))
    .unwrap_or_else(|e| panic!("reading the golden role: {e}"));
    let rbac = run(&["--only", "rbac", "--stdout"]);
    assert!(rbac.starts_with(&format!("{golden}---\n")), "{rbac}");

    let refused = Command::new(exe)
        .args(["--only", "manager"])
        .output()
        .unwrap_or_else(|e| panic!("starting {exe}: {e}"));
    assert!(!refused.status.success(), "an unknown --only must fail");
}

/// Each file holds the objects derived from the reconciler's declaration,
/// as the API server reads them back from YAML.
#[test]
fn the_files_hold_the_declared_webhooks_and_their_rbac() {
    let hooks = FooReconciler::webhooks(NS);

    let crd = docs("crd.yaml");
    assert_eq!(crd.len(), 1);
    let crd: CustomResourceDefinition = decode(&crd[0]);
    assert_eq!(crd, manifests::crd(NS).unwrap());
    let versions: Vec<(&str, bool)> = crd
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.storage))
        .collect();
    assert_eq!(versions, [("v1alpha1", false), ("v1", true)]);
    let conversion = crd.spec.conversion.expect("a conversion stanza");
    assert_eq!(conversion.strategy, "Webhook");
    let client = conversion.webhook.and_then(|w| w.client_config).unwrap();
    assert!(
        client.ca_bundle.is_none(),
        "the manager writes the caBundle"
    );
    let service = client.service.unwrap();
    assert_eq!(
        (service.namespace.as_str(), service.name.as_str()),
        (NS, webhooks::SERVICE)
    );
    assert_eq!(
        (service.path.as_deref(), service.port),
        (Some("/convert"), Some(443))
    );

    let hooks_docs = docs("webhooks.yaml");
    assert_eq!(hooks_docs.len(), 3);
    let service: Service = decode(&hooks_docs[0]);
    assert_eq!(service.metadata.name.as_deref(), Some(webhooks::SERVICE));
    assert_eq!(service.metadata.namespace.as_deref(), Some(NS));
    let spec = service.spec.unwrap();
    let port = &spec.ports.unwrap()[0];
    assert_eq!(
        (port.port, port.target_port.clone()),
        (443, Some(IntOrString::Int(9443)))
    );
    let (label, value) = manifests::POD_LABEL;
    assert_eq!(spec.selector.unwrap()[label], value);
    let mutating: MutatingWebhookConfiguration = decode(&hooks_docs[1]);
    assert_eq!(Some(&mutating), hooks.mutating_configuration().as_ref());
    let validating: ValidatingWebhookConfiguration = decode(&hooks_docs[2]);
    assert_eq!(Some(&validating), hooks.validating_configuration().as_ref());
    let hook = &validating.webhooks.unwrap()[0];
    assert_eq!(hook.name, "validate-v1.foos.samplecontroller.k8s.io");
    assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    let service = hook.client_config.service.as_ref().unwrap();
    assert_eq!(
        service.path.as_deref(),
        Some("/validate-samplecontroller-k8s-io-v1-foo")
    );

    let rbac = docs("rbac.yaml");
    assert_eq!(rbac.len(), 3);
    let role: ClusterRole = decode(&rbac[0]);
    assert_eq!(role, FooReconciler::rbac());
    let rules = role.rules.unwrap_or_default();
    let certificates = hooks.permissions().cluster_role("certificates");
    let wanted = certificates.rules.unwrap_or_default();
    assert!(wanted.len() >= 4, "{wanted:?}");
    for rule in &wanted {
        assert!(granted(&rules, rule), "the role lacks {rule:?}");
    }
    let account: ServiceAccount = decode(&rbac[1]);
    assert_eq!(
        (
            account.metadata.name.as_deref(),
            account.metadata.namespace.as_deref()
        ),
        (Some(manifests::SERVICE_ACCOUNT), Some(NS))
    );
    let binding: ClusterRoleBinding = decode(&rbac[2]);
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("ClusterRole", FooReconciler::CONTROLLER_NAME)
    );
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", manifests::SERVICE_ACCOUNT, Some(NS))
    );
}

/// Applied to envtest, the manifests run the whole sample as their
/// ServiceAccount: the CA reaches every `caBundle` (the certificates' rules
/// suffice), and a Foo written as v1alpha1 without replicas is defaulted
/// (through the conversion), reconciled into a Deployment with status,
/// rolled by its Secret and deleted through the finalizer. `Fixture::stop`
/// fails on any 403.
#[tokio::test]
async fn the_applied_manifests_run_the_sample_as_their_service_account() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    let admin = f.env.client();
    let hooks = FooReconciler::webhooks(NS);
    let validating = Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .get(&hooks.validating_name())
        .await
        .unwrap();
    let mutating = Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .get(&hooks.mutating_name())
        .await
        .unwrap();
    let crd = Api::<CustomResourceDefinition>::all(admin.clone())
        .get("foos.samplecontroller.k8s.io")
        .await
        .unwrap();
    let bundles = [
        validating.webhooks.unwrap()[0]
            .client_config
            .ca_bundle
            .clone(),
        mutating.webhooks.unwrap()[0]
            .client_config
            .ca_bundle
            .clone(),
        crd.spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.ca_bundle),
    ];
    for bundle in &bundles {
        assert!(bundle.as_ref().is_some_and(|b| !b.0.is_empty()));
    }
    assert!(
        bundles.iter().all(|b| b == &bundles[0]),
        "one CA everywhere"
    );

    let old: Api<v1alpha1::Foo> = Api::namespaced(admin.clone(), NS);
    old.create(
        &PostParams::default(),
        &old_foo("legacy", "legacy-web", None),
    )
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let replicas = || async {
        deployments
            .get_opt("legacy-web")
            .await
            .unwrap()
            .and_then(|d| deployment_spec(&d)?.replicas)
    };
    wait_until(
        "legacy-web created with the defaulted 1 replica",
        || async { replicas().await == Some(1) },
    )
    .await;
    let patch = serde_json::json!({"status": {"replicas": 1, "availableReplicas": 1}});
    deployments
        .patch_status("legacy-web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_until("legacy reports 1 available replica", || async {
        let foo = f.foos.get("legacy").await.unwrap();
        foo.status.is_some_and(|s| s.available_replicas == 1)
    })
    .await;

    let mut secret = Secret::default();
    secret.metadata.name = Some("legacy-credentials".into());
    secret.metadata.labels = Some([(SECRET_LABEL.to_string(), "legacy".to_string())].into());
    Api::<Secret>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_until("legacy-web's pod template names the Secret", || async {
        let d = deployments.get("legacy-web").await.unwrap();
        deployment_spec(&d)
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(SECRETS_ANNOTATION).cloned())
            .is_some_and(|v| v.starts_with("legacy-credentials="))
    })
    .await;

    old.delete("legacy", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("legacy and legacy-web are gone", || async {
        f.foos.get_opt("legacy").await.unwrap().is_none()
            && deployments.get_opt("legacy-web").await.unwrap().is_none()
    })
    .await;
    assert!(
        f.ledger.count("foo/legacy: cleaned up") >= 1,
        "{:#?}",
        f.ledger.lines()
    );
    f.stop().await;
}
