//! The Kubernetes sample-controller, written with the derives, with its
//! admission and conversion webhooks.
//!
//! A `Foo` asks for a Deployment named `spec.deploymentName` with
//! `spec.replicas` replicas. [`FooReconciler`] creates that Deployment owned
//! (as controller) by the Foo, scales it back when it drifts, refuses to
//! adopt a Deployment of that name that it does not control (a Warning
//! Event, `Ready=False`, and a retry with per-key backoff), reports
//! `status.availableReplicas`, `status.observedGeneration` and a `Ready`
//! condition (with [`controller_runtime::conditions`]), and stamps the pod
//! template with the resource versions of the Secrets labelled
//! `samplecontroller.k8s.io/foo=<foo name>`, so editing such a Secret rolls
//! the Foo's pods. A finalizer lets it remove the Deployment itself, and
//! record it, before the Foo goes.
//!
//! Foo has two versions: [`v1`] (the hub and storage version, what the
//! reconciler reads) and [`v1alpha1`] (the older shape, `spec.deployment`
//! for `spec.deploymentName`), converted through the hub by the manager's
//! conversion webhook. [`webhooks`] holds the defaulter (`spec.replicas`
//! defaults to 1), the validator (`spec.deploymentName` must be a DNS-1123
//! label; a warning above 10 replicas) and the conversion; [`manifests`]
//! the CRD, the RBAC and the webhook Service and configurations that
//! deploy them.
//!
//! Everything it watches, writes, records and serves is declared once, in
//! `#[controller(...)]`: [`FooReconciler::rbac`] is the least-privilege
//! ClusterRole derived from that declaration (the webhook certificates'
//! rules included), and `FooReconciler::webhooks(namespace)` the webhook
//! configurations, Service, CRD conversion and manager options.
//!
//! ```no_run
//! # async fn demo(client: controller_runtime::kube_client::Client) -> anyhow::Result<()> {
//! use controller_runtime::manager::Manager;
//! use informer_examples::sample::{FooReconciler, Ledger, webhooks};
//! let hooks = FooReconciler::webhooks("default");
//! let mgr = Manager::builder(client).webhook_server(hooks.options()).build().await?;
//! let ledger = Ledger::default();
//! FooReconciler::new(ledger.clone()).setup(&mgr)?;
//! webhooks::register(&mgr, ledger)?;
//! println!("{}", controller_runtime::manifests::to_yaml(&FooReconciler::rbac())?);
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex};

pub mod manifests;
mod reconciler;
pub mod v1;
pub mod v1alpha1;
pub mod webhooks;

pub use reconciler::{FooError, FooReconciler, ready_status};
pub use v1::{Foo, FooSpec, FooStatus};

/// Label on a Secret naming the Foo (same namespace) whose pods use it.
pub const SECRET_LABEL: &str = "samplecontroller.k8s.io/foo";
/// Pod-template annotation carrying the used Secrets' resource versions.
pub const SECRETS_ANNOTATION: &str = "samplecontroller.k8s.io/secrets";
/// The finalizer [`FooReconciler`] manages.
pub const FINALIZER: &str = "samplecontroller.k8s.io/cleanup";
/// The condition type a Foo's status reports.
pub const READY: &str = "Ready";

/// What the controller and its webhooks did, in order (the demo prints
/// it; tests read it).
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
