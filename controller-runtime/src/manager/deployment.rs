//! The Deployment that runs a manager: one renderer for every manifest that
//! starts one (the scaffold's `deploy/manager.yaml`, a sharded
//! controller's [`ShardedDeployment`](crate::sharding::manifests::ShardedDeployment)),
//! so that they agree with the manager and with each other: probes only on
//! a health port the program is told to serve, a termination grace period
//! longer than the manager's stop bound, `POD_NAME` and `POD_NAMESPACE`
//! from the downward API, and a non-root, read-only container that cannot
//! escalate and has every capability dropped.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT, SHUTDOWN_CLEANUP_TIMEOUT};

/// Seconds a pod is given to stop after a manager with
/// `graceful_shutdown_timeout` has had its whole stop bound, rounded up,
/// plus 5 s for the process to exit.
fn grace_seconds(graceful_shutdown_timeout: Duration) -> i64 {
    let bound = graceful_shutdown_timeout + SHUTDOWN_CLEANUP_TIMEOUT + Duration::from_secs(5);
    i64::try_from(bound.as_secs() + u64::from(bound.subsec_nanos() > 0)).unwrap_or(i64::MAX)
}

/// The Deployment of a manager program; see the [module
/// documentation](self).
///
/// ```
/// use controller_runtime::manager::deployment::ManagerDeployment;
/// let d = ManagerDeployment::new("widgets-manager", "widgets-system", "widgets:1.0")
///     .health_port(8081)
///     .arg("--leader-elect")
///     .env("RUST_LOG", "info")
///     .deployment();
/// let pod = d.spec.unwrap().template.spec.unwrap();
/// let c = &pod.containers[0];
/// assert!(c.readiness_probe.is_some());
/// assert!(c.args.iter().flatten().any(|a| a == "--health-probe-bind-address=0.0.0.0:8081"));
/// // Longer than the manager's default stop bound (30 s + 5 s).
/// assert!(pod.termination_grace_period_seconds.unwrap() > 35);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ManagerDeployment {
    name: String,
    namespace: String,
    image: String,
    replicas: i32,
    labels: BTreeMap<String, String>,
    health_port: Option<i32>,
    metrics_port: Option<i32>,
    args: Vec<String>,
    env: Vec<EnvVar>,
    ports: Vec<ContainerPort>,
    resources: Option<ResourceRequirements>,
    termination_grace_seconds: i64,
}

impl ManagerDeployment {
    /// One replica of `image`, named `name` in `namespace` and running as
    /// the ServiceAccount `name`; labelled `app.kubernetes.io/name: <name>`
    /// and `app.kubernetes.io/component: manager`; no health or metrics
    /// port (the manager's defaults); 40 s to stop (the manager's default
    /// 30 s graceful shutdown, its 5 s cleanup, 5 s to exit).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        image: impl Into<String>,
    ) -> Self {
        let name = name.into();
        ManagerDeployment {
            labels: BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), name.clone()),
                (
                    "app.kubernetes.io/component".to_string(),
                    "manager".to_string(),
                ),
            ]),
            name,
            namespace: namespace.into(),
            image: image.into(),
            replicas: 1,
            health_port: None,
            metrics_port: None,
            args: Vec::new(),
            env: Vec::new(),
            ports: Vec::new(),
            resources: None,
            termination_grace_seconds: grace_seconds(DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT),
        }
    }

    /// The name of the Deployment and its ServiceAccount.
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The namespace of the Deployment.
    #[cfg_attr(not(feature = "sharding"), allow(dead_code))]
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Sets the number of replicas.
    pub fn replicas(mut self, n: i32) -> Self {
        self.replicas = n;
        self
    }

    /// Replaces the labels of the Deployment, its selector and its pods.
    pub fn labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// The program serves `/readyz` and `/healthz` on `port`: the pods get
    /// readiness and liveness probes on it, and the argument
    /// `--health-probe-bind-address=0.0.0.0:<port>` (give it to
    /// `ManagerBuilder::health_addr`).
    pub fn health_port(mut self, port: i32) -> Self {
        self.health_port = Some(port);
        self
    }

    /// The program serves `/metrics` on `port`: the pods declare it and get
    /// `--metrics-bind-address=0.0.0.0:<port>` (give it to
    /// `ManagerBuilder::metrics_addr`).
    pub fn metrics_port(mut self, port: i32) -> Self {
        self.metrics_port = Some(port);
        self
    }

    /// Adds an argument after the health and metrics ones.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds an environment variable after `POD_NAME` and `POD_NAMESPACE`.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push(EnvVar {
            name: name.into(),
            value: Some(value.into()),
            ..EnvVar::default()
        });
        self
    }

    /// Declares another container port (a webhook server's, say).
    pub fn port(mut self, name: impl Into<String>, port: i32) -> Self {
        self.ports.push(ContainerPort {
            name: Some(name.into()),
            container_port: port,
            ..ContainerPort::default()
        });
        self
    }

    /// CPU and memory requests and limits (`"10m"`, `"64Mi"`...).
    pub fn resources(mut self, requests: (&str, &str), limits: (&str, &str)) -> Self {
        let quantities = |(cpu, memory): (&str, &str)| {
            BTreeMap::from([
                ("cpu".to_string(), Quantity(cpu.to_string())),
                ("memory".to_string(), Quantity(memory.to_string())),
            ])
        };
        self.resources = Some(ResourceRequirements {
            requests: Some(quantities(requests)),
            limits: Some(quantities(limits)),
            ..ResourceRequirements::default()
        });
        self
    }

    /// The manager's `graceful_shutdown_timeout` (default 30 s): the pods'
    /// termination grace period becomes longer than the manager's stop
    /// bound (this plus its 5 s cleanup, plus 5 s).
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.termination_grace_seconds = grace_seconds(timeout);
        self
    }

    /// The Deployment.
    // `spec` is an `Option<DeploymentSpec>` up to Kubernetes 1.36 and a
    // `DeploymentSpec` from 1.37: `.into()` is one spelling for both.
    #[allow(clippy::useless_conversion)]
    pub fn deployment(&self) -> Deployment {
        let field_env = |name: &str, path: &str| EnvVar {
            name: name.to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: path.to_string(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        };
        let probe = |path: &str| Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.to_string()),
                port: IntOrString::String("health".to_string()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(10),
            ..Probe::default()
        };
        let port = |name: &str, port: i32| ContainerPort {
            name: Some(name.to_string()),
            container_port: port,
            ..ContainerPort::default()
        };
        let mut ports = Vec::new();
        let mut args = Vec::new();
        if let Some(p) = self.health_port {
            ports.push(port("health", p));
            args.push(format!("--health-probe-bind-address=0.0.0.0:{p}"));
        }
        if let Some(p) = self.metrics_port {
            ports.push(port("metrics", p));
            args.push(format!("--metrics-bind-address=0.0.0.0:{p}"));
        }
        ports.extend(self.ports.iter().cloned());
        args.extend(self.args.iter().cloned());
        let mut env = vec![
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
        ];
        env.extend(self.env.iter().cloned());
        let container = Container {
            name: "manager".to_string(),
            image: Some(self.image.clone()),
            args: (!args.is_empty()).then_some(args),
            env: Some(env),
            ports: (!ports.is_empty()).then_some(ports),
            readiness_probe: self.health_port.map(|_| probe("/readyz")),
            liveness_probe: self.health_port.map(|_| probe("/healthz")),
            resources: self.resources.clone(),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".to_string()]),
                    ..Capabilities::default()
                }),
                ..SecurityContext::default()
            }),
            ..Container::default()
        };
        Deployment {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: DeploymentSpec {
                replicas: Some(self.replicas),
                selector: LabelSelector {
                    match_labels: Some(self.labels.clone()),
                    ..LabelSelector::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(self.labels.clone()),
                        ..ObjectMeta::default()
                    }),
                    spec: Some(PodSpec {
                        service_account_name: Some(self.name.clone()),
                        termination_grace_period_seconds: Some(self.termination_grace_seconds),
                        security_context: Some(PodSecurityContext {
                            run_as_non_root: Some(true),
                            seccomp_profile: Some(SeccompProfile {
                                type_: "RuntimeDefault".to_string(),
                                ..SeccompProfile::default()
                            }),
                            ..PodSecurityContext::default()
                        }),
                        containers: vec![container],
                        ..PodSpec::default()
                    }),
                },
                ..DeploymentSpec::default()
            }
            .into(),
            status: None,
        }
    }
}

/// The spec of `deployment` (the default if it has none), under every
/// Kubernetes version: the field is an `Option<DeploymentSpec>` up to 1.36
/// and a `DeploymentSpec` from 1.37.
#[cfg(test)]
pub(crate) fn spec_of(deployment: &Deployment) -> DeploymentSpec {
    Option::<&DeploymentSpec>::from(&deployment.spec)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(d: &ManagerDeployment) -> PodSpec {
        spec_of(&d.deployment()).template.spec.unwrap_or_default()
    }

    #[test]
    fn defaults_agree_with_the_manager() {
        // The manager serves no health port by default: no probe may point
        // at one.
        let default = ManagerDeployment::new("w", "ops", "img:1");
        let c = &pod(&default).containers[0];
        assert!(c.readiness_probe.is_none() && c.liveness_probe.is_none());
        assert!(c.ports.is_none() && c.args.is_none());
        // Longer than the manager's stop bound.
        let bound = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT + SHUTDOWN_CLEANUP_TIMEOUT;
        let grace = pod(&default).termination_grace_period_seconds.unwrap_or(0);
        assert!(
            grace > i64::try_from(bound.as_secs()).unwrap_or(i64::MAX),
            "{grace}"
        );
        let slow = default
            .clone()
            .graceful_shutdown_timeout(Duration::from_millis(60_500));
        assert_eq!(pod(&slow).termination_grace_period_seconds, Some(71));
        // Non-root, read-only, nothing to escalate.
        let sc = c.security_context.clone().unwrap_or_default();
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(
            pod(&default)
                .security_context
                .unwrap_or_default()
                .run_as_non_root,
            Some(true)
        );
    }

    #[test]
    fn probes_only_on_the_port_the_program_is_told_to_serve() {
        let d = ManagerDeployment::new("w", "ops", "img:1")
            .health_port(9440)
            .metrics_port(9443)
            .port("webhook", 9444)
            .arg("--leader-elect")
            .env("RUST_LOG", "info")
            .resources(("10m", "64Mi"), ("500m", "256Mi"));
        let c = &pod(&d).containers[0];
        assert_eq!(
            c.args.clone().unwrap_or_default(),
            [
                "--health-probe-bind-address=0.0.0.0:9440",
                "--metrics-bind-address=0.0.0.0:9443",
                "--leader-elect"
            ]
        );
        let ports: Vec<_> = c
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
            .collect();
        assert_eq!(
            ports,
            [
                ("health".to_string(), 9440),
                ("metrics".to_string(), 9443),
                ("webhook".to_string(), 9444)
            ]
        );
        let probe_port = c
            .readiness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .map(|h| h.port.clone());
        assert_eq!(probe_port, Some(IntOrString::String("health".into())));
        let env: Vec<_> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert_eq!(env, ["POD_NAME", "POD_NAMESPACE", "RUST_LOG"]);
        let limits = c.resources.clone().unwrap_or_default().limits;
        assert_eq!(
            limits.and_then(|l| l.get("memory").cloned()),
            Some(Quantity("256Mi".into()))
        );
    }

    #[test]
    fn the_selector_selects_the_pods() {
        let d = ManagerDeployment::new("w", "ops", "img:1")
            .replicas(3)
            .labels(BTreeMap::from([("app".to_string(), "w".to_string())]))
            .deployment();
        let spec = spec_of(&d);
        assert_eq!(spec.replicas, Some(3));
        assert_eq!(
            spec.selector.match_labels,
            spec.template.metadata.and_then(|m| m.labels)
        );
        assert_eq!(
            spec.template
                .spec
                .unwrap_or_default()
                .service_account_name
                .as_deref(),
            Some("w")
        );
    }
}
