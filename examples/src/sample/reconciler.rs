//! [`FooReconciler`]: the sample-controller's reconcile (see the parent
//! module for what it does).

// The kind is `Foo`, as in the Go sample-controller this ports: a `foo` here
// is a Foo object, not a placeholder name.
#![allow(clippy::disallowed_names)]

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_runtime::cache::CacheError;
use controller_runtime::conditions::{
    ConditionExt, ConditionStatus, Conditions, condition, observed_generation,
};
use controller_runtime::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use controller_runtime::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, Secret};
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, OwnerReference,
};
use controller_runtime::kube_client;
use controller_runtime::prelude::*;

use super::v1::Foo;
use super::{Ledger, READY, SECRET_LABEL, SECRETS_ANNOTATION};
use crate::deployment_spec;

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
    leader_election,
    // The kind's webhooks (see `super::webhooks`), behind one Service: the
    // derive builds their configurations, the CRD's conversion stanza, the
    // manager's options and the certificates' RBAC, and puts those rules
    // in `rbac()`.
    webhooks(defaulting, validating, conversion, service = "foo-webhook-service")
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
// A Deployment's `spec` is an `Option` up to Kubernetes 1.36 and not from
// 1.37: `.into()` writes it under every version this crate builds for.
#[allow(clippy::useless_conversion)]
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
        spec: DeploymentSpec {
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
        }
        .into(),
        ..Deployment::default()
    }
}

fn template_secrets(d: &Deployment) -> Option<&str> {
    deployment_spec(d)?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(SECRETS_ANNOTATION)
        .map(String::as_str)
}

/// Puts `ready`, `available` and the observed generation into `status`;
/// whether anything changed (write it only then).
fn set_status(status: &mut super::FooStatus, foo: &Foo, ready: Condition, available: i32) -> bool {
    let generation = observed_generation(foo);
    let mut changed = status
        .conditions
        .set_condition(ready.observed_generation(generation));
    if status.available_replicas != available {
        status.available_replicas = available;
        changed = true;
    }
    if status.observed_generation != generation {
        status.observed_generation = generation;
        changed = true;
    }
    changed
}

/// Writes `status` (a merge patch of the status subresource; the
/// conditions list is replaced whole).
async fn write_status(
    ctx: &ObjectContext<Foo>,
    name: &str,
    status: &super::FooStatus,
) -> Result<(), FooError> {
    let patch = serde_json::json!({ "status": status });
    ctx.api()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// The status of `foo`'s `Ready` condition (`None` before the first
/// reconcile).
pub fn ready_status(foo: &Foo) -> Option<ConditionStatus> {
    let c = foo.status.as_ref()?.conditions.find_condition(READY)?;
    Some(match c.status.as_str() {
        "True" => ConditionStatus::True,
        "False" => ConditionStatus::False,
        _ => ConditionStatus::Unknown,
    })
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
            let message = format!("Resource {dep_name:?} already exists and is not managed by Foo");
            ctx.recorder().publish(
                foo.as_ref(),
                EventInfo::warning("ErrResourceExists", "Adopt").note(message.clone()),
            );
            let not_ready = condition(READY, false, "ErrResourceExists", message);
            let mut status = foo.status.clone().unwrap_or_default();
            let available = status.available_replicas;
            if set_status(&mut status, &foo, not_ready, available) {
                write_status(ctx, &foo_name, &status).await?;
            }
            return Err(FooError::NotControlled(dep_name));
        }
        let want = foo.spec.replicas.unwrap_or(1);
        let have = deployment_spec(&deployment).and_then(|s| s.replicas);
        let secrets_now = template_secrets(&deployment);
        if have != Some(want) || secrets_now != Some(secrets.as_str()) {
            let mut spec = serde_json::json!({
                "template": {"metadata": {"annotations": {SECRETS_ANNOTATION: secrets}}},
            });
            // `replicas` only when it differs: written with the template's
            // annotation from a cache that has not seen a scale yet, it would
            // undo that scale without this reconcile knowing.
            if have != Some(want) {
                spec["replicas"] = serde_json::json!(want);
            }
            let patch = serde_json::json!({ "spec": spec });
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
        let ready = if available >= want {
            condition(
                READY,
                true,
                "DeploymentAvailable",
                format!("{available} of {want} replicas available"),
            )
        } else {
            condition(
                READY,
                false,
                "DeploymentProgressing",
                format!("{available} of {want} replicas available"),
            )
        };
        let mut status = foo.status.clone().unwrap_or_default();
        if set_status(&mut status, &foo, ready, available) {
            write_status(ctx, &foo_name, &status).await?;
            let ready = status.conditions.find_condition(READY);
            self.ledger.record(format!(
                "foo/{foo_name}: status: {available} available, {READY}={}",
                ready.map_or("", |c| c.status.as_str())
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
