//! The Kubernetes sample-controller, written with the derives.
//!
//! A `Foo` (`samplecontroller.k8s.io/v1alpha1`) asks for a Deployment named
//! `spec.deploymentName` with `spec.replicas` replicas. [`FooReconciler`]
//! creates that Deployment owned (as controller) by the Foo, scales it back
//! when it drifts, refuses to adopt a Deployment of that name that it does
//! not control (a Warning Event, and a retry with per-key backoff), keeps
//! `status.availableReplicas` equal to the Deployment's, and stamps the pod
//! template with the resource versions of the Secrets labelled
//! `samplecontroller.k8s.io/foo=<foo name>`, so editing such a Secret rolls the
//! Foo's pods. A finalizer lets it remove the Deployment itself, and record
//! it, before the Foo goes.
//!
//! Everything it watches, writes and records is declared once, in
//! `#[controller(...)]`; [`FooReconciler::rbac`] is the least-privilege
//! ClusterRole derived from that declaration.
//!
//! ```no_run
//! # async fn demo(mgr: controller_runtime::manager::Manager) -> anyhow::Result<()> {
//! use informer_examples::sample::FooReconciler;
//! let ledger = informer_examples::sample::Ledger::default();
//! FooReconciler::new(ledger.clone()).setup(&mgr)?;
//! println!("{}", controller_runtime::rbac::to_yaml(&FooReconciler::rbac())?);
//! # Ok(()) }
//! ```

// The kind is `Foo`, as in the Go sample-controller this ports: a `foo` here
// is a Foo object, not a placeholder name.
#![allow(clippy::disallowed_names)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use controller_runtime::CustomResource;
use controller_runtime::cache::CacheError;
use controller_runtime::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use controller_runtime::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, Secret};
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, OwnerReference,
};
use controller_runtime::kube_client;
use controller_runtime::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Label on a Secret naming the Foo (same namespace) whose pods use it.
pub const SECRET_LABEL: &str = "samplecontroller.k8s.io/foo";
/// Pod-template annotation carrying the used Secrets' resource versions.
pub const SECRETS_ANNOTATION: &str = "samplecontroller.k8s.io/secrets";
/// The finalizer [`FooReconciler`] manages.
pub const FINALIZER: &str = "samplecontroller.k8s.io/cleanup";

/// What a Foo asks for.
// Two printcolumns of type "integer" trip clippy's duplicated_attributes,
// a known false positive on derive attributes (see docs/macros.md).
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[resource(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    shortname = "foo",
    printcolumn(
        name = "Deployment",
        json_path = ".spec.deploymentName",
        type = "string"
    ),
    printcolumn(name = "Replicas", json_path = ".spec.replicas", type = "integer"),
    printcolumn(
        name = "Available",
        json_path = ".status.availableReplicas",
        type = "integer"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// The Deployment this Foo owns.
    #[resource(
        min_length = 1,
        max_length = 63,
        pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    )]
    pub deployment_name: String,
    /// Desired replicas (default 1).
    #[resource(minimum = 0, maximum = 100)]
    pub replicas: Option<i32>,
}

/// What a Foo has.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// Available replicas of the Deployment.
    pub available_replicas: i32,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum FooError {
    /// A Deployment of the wanted name exists and another object controls it.
    #[error("deployment {0} already exists and is not controlled by this Foo")]
    NotControlled(String),
    /// Reading the cache failed.
    #[error("reading the cache: {0}")]
    Cache(#[from] CacheError),
    /// A write failed.
    #[error("writing to the API server: {0}")]
    Api(#[from] kube_client::Error),
}

impl Terminal for FooError {
    fn is_terminal(&self) -> bool {
        false
    }
}

/// What the controller did, in order (the demo prints it; tests read it).
#[derive(Debug, Clone, Default)]
pub struct Ledger(Arc<Mutex<Vec<String>>>);

fn lock(m: &Mutex<Vec<String>>) -> std::sync::MutexGuard<'_, Vec<String>> {
    // A panic while holding the lock cannot leave a Vec half-written.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ledger {
    /// Append one line.
    pub fn record(&self, line: impl Into<String>) {
        let line = line.into();
        tracing::info!(target: "sample_controller", "{line}");
        lock(&self.0).push(line);
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        lock(&self.0).clone()
    }

    /// How many lines contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        lock(&self.0).iter().filter(|l| l.contains(needle)).count()
    }
}

/// The sample-controller's reconciler.
#[derive(Controller)]
#[controller(
    for = Foo,
    owns(Deployment),
    watches(Secret, map = Self::secret_to_foos),
    max_concurrent = 4,
    finalizer = "samplecontroller.k8s.io/cleanup",
    predicate = generation_changed,
    name = "foo-controller",
    leader_election
)]
pub struct FooReconciler {
    ledger: Ledger,
}

impl FooReconciler {
    /// A reconciler writing what it does to `ledger`.
    pub fn new(ledger: Ledger) -> Self {
        FooReconciler { ledger }
    }

    /// A Secret labelled `samplecontroller.k8s.io/foo=<name>` reconciles
    /// that Foo in its namespace.
    pub fn secret_to_foos(secret: &Secret) -> Vec<Request> {
        let labels = secret.metadata.labels.as_ref();
        match labels.and_then(|l| l.get(SECRET_LABEL)) {
            Some(foo) => vec![Request::new(secret.metadata.namespace.clone(), foo.clone())],
            None => Vec::new(),
        }
    }
}

/// The resource versions of the Secrets labelled for `foo`, as
/// `name=rv,...` (empty when there are none).
async fn secret_versions(foo: &Foo, ctx: &ObjectContext<Foo>) -> Result<String, FooError> {
    let name = foo.metadata.name.as_deref().unwrap_or_default();
    let mut opts = ListOptions::new();
    if let Some(ns) = ctx.namespace() {
        opts = opts.namespace(ns);
    }
    let mut versions: Vec<String> = ctx
        .cache()
        .list::<Secret>(&opts)
        .await?
        .iter()
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SECRET_LABEL))
                .is_some_and(|v| v == name)
        })
        .map(|s| {
            format!(
                "{}={}",
                s.metadata.name.as_deref().unwrap_or(""),
                s.metadata.resource_version.as_deref().unwrap_or("")
            )
        })
        .collect();
    versions.sort();
    Ok(versions.join(","))
}

/// The Deployment `foo` asks for.
fn desired_deployment(foo: &Foo, secrets: &str) -> Deployment {
    let labels: BTreeMap<String, String> = [
        ("app".to_string(), "nginx".to_string()),
        (
            "controller".to_string(),
            foo.metadata.name.clone().unwrap_or_default(),
        ),
    ]
    .into();
    let owner = foo.controller_owner_ref(&()).map(|mut o: OwnerReference| {
        o.block_owner_deletion = Some(true);
        o
    });
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.metadata.namespace.clone(),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(foo.spec.replicas.unwrap_or(1)),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(
                        [(SECRETS_ANNOTATION.to_string(), secrets.to_string())].into(),
                    ),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some("nginx:latest".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn template_secrets(d: &Deployment) -> Option<&str> {
    d.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(SECRETS_ANNOTATION)
        .map(String::as_str)
}

impl ObjectReconciler<Foo> for FooReconciler {
    type Error = FooError;

    async fn reconcile(&self, foo: Arc<Foo>, ctx: &ObjectContext<Foo>) -> Result<Action, FooError> {
        let foo_name = foo.metadata.name.clone().unwrap_or_default();
        let dep_name = foo.spec.deployment_name.clone();
        let ns = ctx.namespace().map(str::to_string);
        let deployments = ctx.api_for::<Deployment>();
        let secrets = secret_versions(&foo, ctx).await?;
        let desired = desired_deployment(&foo, &secrets);
        let cached = ctx
            .cache()
            .get::<Deployment>(ns.as_deref(), &dep_name)
            .await?;
        let deployment = match cached {
            None => {
                let created = deployments.create(&PostParams::default(), &desired).await?;
                self.ledger
                    .record(format!("foo/{foo_name}: created deployment {dep_name}"));
                ctx.recorder().publish(
                    foo.as_ref(),
                    EventInfo::normal("DeploymentCreated", "Create")
                        .note(format!("created deployment {dep_name}"))
                        .related(&created),
                );
                Arc::new(created)
            }
            Some(d) => d,
        };
        let uid = foo.metadata.uid.as_deref();
        let controlled = deployment
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid);
        if !controlled {
            self.ledger.record(format!(
                "foo/{foo_name}: refused to adopt deployment {dep_name} (not controlled by it)"
            ));
            ctx.recorder().publish(
                foo.as_ref(),
                EventInfo::warning("ErrResourceExists", "Adopt").note(format!(
                    "Resource {dep_name:?} already exists and is not managed by Foo"
                )),
            );
            return Err(FooError::NotControlled(dep_name));
        }
        let want = foo.spec.replicas.unwrap_or(1);
        let have = deployment.spec.as_ref().and_then(|s| s.replicas);
        let secrets_now = template_secrets(&deployment);
        if have != Some(want) || secrets_now != Some(secrets.as_str()) {
            let patch = serde_json::json!({"spec": {
                "replicas": want,
                "template": {"metadata": {"annotations": {SECRETS_ANNOTATION: secrets}}},
            }});
            deployments
                .patch(&dep_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            if have != Some(want) {
                self.ledger.record(format!(
                    "foo/{foo_name}: scaled deployment {dep_name} from {} to {want}",
                    have.unwrap_or(0)
                ));
            }
            if secrets_now.is_some_and(|s| s != secrets) {
                self.ledger.record(format!(
                    "foo/{foo_name}: rolled deployment {dep_name} for secrets [{secrets}]"
                ));
            }
        }
        let available = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        if foo.status.as_ref().map(|s| s.available_replicas) != Some(available) {
            let patch = serde_json::json!({"status": {"availableReplicas": available}});
            ctx.api()
                .patch_status(&foo_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            self.ledger.record(format!(
                "foo/{foo_name}: status.availableReplicas = {available}"
            ));
        }
        Ok(Action::done())
    }
}

impl Cleanup<Foo> for FooReconciler {
    async fn cleanup(&self, foo: Arc<Foo>, ctx: &ObjectContext<Foo>) -> Result<Action, FooError> {
        let foo_name = foo.metadata.name.clone().unwrap_or_default();
        let dep_name = &foo.spec.deployment_name;
        let ns = ctx.namespace().map(str::to_string);
        let ours = ctx
            .cache()
            .get::<Deployment>(ns.as_deref(), dep_name)
            .await?
            .filter(|d| {
                d.metadata.owner_references.iter().flatten().any(|o| {
                    o.controller == Some(true) && Some(&o.uid) == foo.metadata.uid.as_ref()
                })
            });
        if ours.is_some() {
            match ctx
                .api_for::<Deployment>()
                .delete(dep_name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube_client::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.ledger.record(format!(
            "foo/{foo_name}: cleaned up (deployment {dep_name} removed)"
        ));
        Ok(Action::done())
    }
}
