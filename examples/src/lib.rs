//! Shared helpers for the examples: deciding whether a cluster is configured
//! and building small demo objects.

pub mod sample;

use std::collections::BTreeMap;

use controller_runtime::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use controller_runtime::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta,
};

/// Whether a cluster is configured: `KUBECONFIG` is set, or `~/.kube/config`
/// exists. Without one the examples run on the embedded API server.
///
/// ```
/// let _ = informer_examples::kubeconfig_present();
/// ```
pub fn kubeconfig_present() -> bool {
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        return true;
    }
    std::env::home_dir().is_some_and(|home| home.join(".kube").join("config").is_file())
}

/// Installs a `tracing` subscriber writing to stderr: `RUST_LOG` if set, else
/// `default_filter`. Colours only when stderr is a terminal, so logs piped to
/// a file stay plain text.
///
/// ```
/// informer_examples::init_tracing("warn");
/// ```
pub fn init_tracing(default_filter: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // A second call (as in doc tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// A minimal valid Deployment `name` in `default` running nginx.
///
/// ```
/// let d = informer_examples::demo_deployment("web", 2);
/// assert_eq!(d.spec.unwrap().replicas, Some(2));
/// ```
pub fn demo_deployment(name: &str, replicas: i32) -> Deployment {
    let labels: BTreeMap<String, String> = [("app".to_string(), name.to_string())].into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
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
                        name: "main".to_string(),
                        image: Some("nginx:1.27".to_string()),
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
