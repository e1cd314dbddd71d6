//! The Kubernetes sample-controller, written the way a user of this
//! framework would: `controller-runtime` is the only framework dependency
//! (with `tokio`, `serde` and `schemars`), and the tests add `envtest`.
//!
//! A [`Foo`] (`samplecontroller.k8s.io/v1alpha1`) asks for a Deployment
//! named `spec.deploymentName` with `spec.replicas` replicas. The
//! [`FooReconciler`] creates it (controlled by the Foo), keeps its replica
//! count, refuses to adopt a Deployment it does not control (a Warning
//! event), copies the Deployment's available replicas into
//! `status.availableReplicas`, and runs a finalizer so that deleting a Foo
//! records a `CleanedUp` event first. The Deployment goes with its Foo
//! through the garbage collector.
//!
//! `Foo` comes from `#[derive(CustomResource)]` on [`FooSpec`], and the
//! tests install its CustomResourceDefinition from `Foo::crd()`: nothing
//! about the kind is written twice.
//!
//! ```no_run
//! use controller_runtime::prelude::*;
//! # async fn demo(client: Client) -> Result<(), ManagerError> {
//! let mgr = Manager::builder(client).build().await?;
//! framework_test::setup(&mgr)?;
//! mgr.run_until_signal().await?;
//! # Ok(()) }
//! ```

// `Foo` is the sample-controller's kind, so `foo` names a Foo here, not a
// placeholder.
#![allow(clippy::disallowed_names)]
use std::collections::BTreeMap;
use std::fmt;

use controller_runtime::CustomResource;
use controller_runtime::cache::CacheError;
use controller_runtime::finalizer::FinalizerError;
use controller_runtime::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use controller_runtime::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, OwnerReference,
};
use controller_runtime::kube_client;
use controller_runtime::prelude::*;
use serde::{Deserialize, Serialize};

/// The finalizer a Foo carries while this controller may still clean up.
pub const FINALIZER: &str = "samplecontroller.k8s.io/cleanup";
/// The controller's name: its metrics label and its events' reporter.
pub const CONTROLLER: &str = "foo-controller";

/// What a Foo asks for. `#[derive(CustomResource)]` generates the [`Foo`]
/// kind around it: its `Resource` impls, `Foo::new(name, spec)` and
/// `Foo::crd()`, the CustomResourceDefinition the tests install (status
/// subresource, `kubectl get` columns, `replicas >= 0`).
// clippy's `duplicated_attributes` (up to at least 1.95) reads the two
// `type = "integer"` of the Replicas and Available columns as one attribute
// given twice; they are separate `printcolumn(...)` entries. The lint looks
// at these tokens, not at the derive's expansion (it fires on a derive that
// expands to nothing), so only an allow here silences it; a known false
// positive upstream (rust-clippy 12923, 13238). See docs/macros.md.
#[allow(clippy::duplicated_attributes)]
#[derive(
    CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[resource(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
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
    ),
    printcolumn(name = "Age", json_path = ".metadata.creationTimestamp", type = "date")
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// Name of the Deployment to run.
    pub deployment_name: String,
    /// How many replicas it should have.
    #[resource(minimum = 0)]
    pub replicas: i32,
}

/// What the controller observed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// The Deployment's available replicas.
    #[serde(default)]
    pub available_replicas: i32,
}

/// Why a reconcile of a Foo failed.
#[derive(Debug)]
pub enum FooError {
    /// Reading the cache failed.
    Cache(CacheError),
    /// An API call failed.
    Api(kube_client::Error),
    /// The finalizer flow failed.
    Finalizer(Box<FinalizerError<FooError>>),
}

impl fmt::Display for FooError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FooError::Cache(e) => write!(f, "reading the cache: {e}"),
            FooError::Api(e) => write!(f, "API call failed: {e}"),
            FooError::Finalizer(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FooError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FooError::Cache(e) => Some(e),
            FooError::Api(e) => Some(e),
            FooError::Finalizer(e) => Some(e.as_ref()),
        }
    }
}

/// None of these is terminal: all are retried with backoff.
impl Terminal for FooError {}

impl From<kube_client::Error> for FooError {
    fn from(e: kube_client::Error) -> Self {
        FooError::Api(e)
    }
}

impl From<CacheError> for FooError {
    fn from(e: CacheError) -> Self {
        FooError::Cache(e)
    }
}

/// Reconciles Foos; see the [crate documentation](crate).
#[derive(Debug, Default)]
pub struct FooReconciler;

impl ObjectReconciler<Foo> for FooReconciler {
    type Error = FooError;

    async fn reconcile(&self, foo: Arc<Foo>, ctx: &ObjectContext<Foo>) -> Result<Action, FooError> {
        ctx.finalizer(FINALIZER, foo, |event| async move {
            match event {
                FinalizerEvent::Apply(foo) => apply(&foo, ctx).await,
                FinalizerEvent::Cleanup(foo) => {
                    ctx.recorder().publish(
                        foo.as_ref(),
                        EventInfo::normal("CleanedUp", "Finalize")
                            .note("the Deployment goes with its Foo"),
                    );
                    Ok(Action::done())
                }
            }
        })
        .await
        .map_err(|e| FooError::Finalizer(Box::new(e)))
    }
}

/// Registers the Foo controller with `mgr`: for Foos, owning Deployments.
pub fn setup(mgr: &Manager) -> Result<controller_runtime::controller::Controller, ManagerError> {
    mgr.controller::<Foo>()
        .named(CONTROLLER)
        .owns::<Deployment>()
        .complete(FooReconciler)
}

fn is_controlled_by(deployment: &Deployment, foo: &Foo) -> bool {
    deployment
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == foo.uid().unwrap_or_default())
}

async fn apply(foo: &Foo, ctx: &ObjectContext<Foo>) -> Result<Action, FooError> {
    let deployments = ctx.api_for::<Deployment>();
    let name = &foo.spec.deployment_name;
    let current = ctx.cache().get::<Deployment>(ctx.namespace(), name).await?;
    let deployment = match current {
        None => {
            let created = deployments
                .create(&PostParams::default(), &desired_deployment(foo))
                .await?;
            ctx.recorder().publish(
                foo,
                EventInfo::normal("Created", "CreateDeployment")
                    .note(format!("created Deployment {name}"))
                    .related(&created),
            );
            Arc::new(created)
        }
        Some(existing) if !is_controlled_by(&existing, foo) => {
            ctx.recorder().publish(
                foo,
                EventInfo::warning("ErrResourceExists", "AdoptDeployment")
                    .note(format!(
                        "Deployment {name} already exists and is not managed by Foo"
                    ))
                    .related(existing.as_ref()),
            );
            return Ok(Action::done());
        }
        Some(existing) => {
            // `spec` is an `Option` up to Kubernetes 1.36 and not from 1.37:
            // `From` makes either an `Option` of a reference.
            let replicas = Option::<&DeploymentSpec>::from(&existing.spec).and_then(|s| s.replicas);
            if replicas == Some(foo.spec.replicas) {
                existing
            } else {
                let patch = ReplicasPatch {
                    spec: ReplicasSpec {
                        replicas: foo.spec.replicas,
                    },
                };
                let updated = deployments
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Arc::new(updated)
            }
        }
    };
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let status = FooStatus {
        available_replicas: available,
    };
    if foo.status.as_ref() != Some(&status) {
        ctx.api()
            .patch_status(
                &foo.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&StatusPatch { status }),
            )
            .await?;
    }
    Ok(Action::done())
}

#[derive(Debug, Serialize)]
struct ReplicasPatch {
    spec: ReplicasSpec,
}

#[derive(Debug, Serialize)]
struct ReplicasSpec {
    replicas: i32,
}

#[derive(Debug, Serialize)]
struct StatusPatch {
    status: FooStatus,
}

/// The Deployment a Foo asks for: nginx pods labelled `app=nginx,
/// controller=<foo>`, controlled by the Foo.
// A Deployment's `spec` is an `Option` up to Kubernetes 1.36 and not from
// 1.37: `.into()` writes it under every version this crate builds for.
#[allow(clippy::useless_conversion)]
pub fn desired_deployment(foo: &Foo) -> Deployment {
    let labels = BTreeMap::from([
        ("app".to_string(), "nginx".to_string()),
        ("controller".to_string(), foo.name_any()),
    ]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.namespace(),
            owner_references: Some(vec![OwnerReference {
                api_version: Foo::api_version(&()).into_owned(),
                kind: "Foo".into(),
                name: foo.name_any(),
                uid: foo.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(foo.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
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
        }
        .into(),
        ..Deployment::default()
    }
}
