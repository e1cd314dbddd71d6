//! Manifests for running a sharded controller on N replicas: a Deployment
//! of N pods, its ServiceAccount, and the Role and RoleBinding on Leases in
//! the ring's namespace (the shard Leases, the ring state and the sharder's
//! Lease; [`Permissions::sharded_leases`]). The controller's own rules (its
//! kinds, and in label mode [`Permissions::sharded_labels`] on each sharded
//! kind) come from its [`Permissions`] as usual and are bound to the same
//! ServiceAccount.
//!
//! A Deployment, not a StatefulSet: replicas need no stable names (each
//! process joins the ring under a fresh identity, see
//! [`default_shard_identity`](super::config::default_shard_identity)), so
//! a rolling update is a scale-up followed by graceful leaves. The pods'
//! readiness probe is the manager's `/readyz`, which includes each sharded
//! controller's `shard-<controller>` check; the termination grace period
//! leaves room for the manager's graceful shutdown, after which the replica
//! deletes its shard Lease and its objects move at once.
//!
//! ```
//! use controller_runtime::sharding::manifests::ShardedDeployment;
//! let m = ShardedDeployment::new("widgets", "operators", "example.com/widgets:1.0").replicas(4);
//! assert_eq!(m.deployment().spec.unwrap().replicas, Some(4));
//! let yaml = m.to_yaml()?;
//! assert!(yaml.contains("kind: Deployment") && yaml.contains("kind: RoleBinding"));
//! # Ok::<(), controller_runtime::manifests::RenderError>(())
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, PodSpec,
    PodTemplateSpec, Probe, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::manifests::{RenderError, to_yaml};
use crate::rbac::{Permissions, Role};

/// The manifests of a sharded controller on N replicas; see the [module
/// documentation](self).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ShardedDeployment {
    /// Name of the Deployment, ServiceAccount, Role and RoleBinding.
    pub name: String,
    /// Namespace of all of them (and of the ring's Leases).
    pub namespace: String,
    /// The controller's image.
    pub image: String,
    /// How many replicas (shards).
    pub replicas: i32,
    /// The port of the manager's health probes (`/readyz`, `/healthz`).
    pub health_port: i32,
    /// The port of the manager's metrics.
    pub metrics_port: i32,
    /// Seconds a stopping pod is given (longer than the manager's graceful
    /// shutdown).
    pub termination_grace_seconds: i64,
}

impl ShardedDeployment {
    /// Two replicas of `image` named `name` in `namespace`; probes on 8081,
    /// metrics on 8080, 30 s to stop.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        image: impl Into<String>,
    ) -> Self {
        ShardedDeployment {
            name: name.into(),
            namespace: namespace.into(),
            image: image.into(),
            replicas: 2,
            health_port: 8081,
            metrics_port: 8080,
            termination_grace_seconds: 30,
        }
    }

    /// Sets the number of replicas.
    pub fn replicas(mut self, n: i32) -> Self {
        self.replicas = n;
        self
    }

    /// Sets the health and metrics ports.
    pub fn ports(mut self, health: i32, metrics: i32) -> Self {
        self.health_port = health;
        self.metrics_port = metrics;
        self
    }

    fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            ..Default::default()
        }
    }

    fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), self.name.clone()),
            (
                "app.kubernetes.io/component".to_string(),
                "sharded-controller".to_string(),
            ),
        ])
    }

    /// The Deployment: N pods, `POD_NAME` and `POD_NAMESPACE` from the
    /// downward API, readiness on `/readyz`, liveness on `/healthz`.
    pub fn deployment(&self) -> Deployment {
        let field_env = |name: &str, path: &str| EnvVar {
            name: name.to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: path.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let probe = |path: &str| Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.to_string()),
                port: IntOrString::String("health".to_string()),
                ..Default::default()
            }),
            period_seconds: Some(5),
            ..Default::default()
        };
        let port = |name: &str, port: i32| ContainerPort {
            name: Some(name.to_string()),
            container_port: port,
            ..Default::default()
        };
        Deployment {
            metadata: self.meta(),
            spec: Some(DeploymentSpec {
                replicas: Some(self.replicas),
                selector: LabelSelector {
                    match_labels: Some(self.labels()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(self.labels()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        service_account_name: Some(self.name.clone()),
                        termination_grace_period_seconds: Some(self.termination_grace_seconds),
                        containers: vec![Container {
                            name: "controller".to_string(),
                            image: Some(self.image.clone()),
                            env: Some(vec![
                                field_env("POD_NAME", "metadata.name"),
                                field_env("POD_NAMESPACE", "metadata.namespace"),
                            ]),
                            ports: Some(vec![
                                port("health", self.health_port),
                                port("metrics", self.metrics_port),
                            ]),
                            readiness_probe: Some(probe("/readyz")),
                            liveness_probe: Some(probe("/healthz")),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The ServiceAccount the pods run as.
    pub fn service_account(&self) -> ServiceAccount {
        ServiceAccount {
            metadata: self.meta(),
            ..Default::default()
        }
    }

    /// The Role on Leases in the namespace: shard Leases, the ring state
    /// and the sharder's election.
    pub fn lease_role(&self) -> Role {
        let mut role = Permissions::new()
            .sharded_leases()
            .role(&format!("{}-sharding", self.name), &self.namespace);
        role.metadata.labels = Some(self.labels());
        role
    }

    /// Binds [`lease_role`](Self::lease_role) to the ServiceAccount.
    pub fn lease_role_binding(&self) -> RoleBinding {
        let name = format!("{}-sharding", self.name);
        RoleBinding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.labels()),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_string(),
                kind: "Role".to_string(),
                name,
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_string(),
                name: self.name.clone(),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            }]),
        }
    }

    /// All four as one YAML stream (`---` between documents): the
    /// ServiceAccount, the Role, the RoleBinding and the Deployment.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        Ok([
            to_yaml(&self.service_account())?,
            to_yaml(&self.lease_role())?,
            to_yaml(&self.lease_role_binding())?,
            to_yaml(&self.deployment())?,
        ]
        .join("---\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_replicas_with_lease_rbac_bound_to_their_service_account() {
        let m = ShardedDeployment::new("widgets", "ops", "img:1").replicas(5);
        let d = m.deployment();
        let spec = d.spec.clone().unwrap_or_default();
        assert_eq!(spec.replicas, Some(5));
        // The selector selects the template's pods.
        assert_eq!(
            spec.selector.match_labels,
            spec.template.metadata.and_then(|m| m.labels)
        );
        let pod = spec.template.spec.unwrap_or_default();
        assert_eq!(pod.service_account_name.as_deref(), Some("widgets"));
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("img:1"));
        let ready = c.readiness_probe.as_ref().and_then(|p| p.http_get.as_ref());
        assert_eq!(ready.and_then(|h| h.path.as_deref()), Some("/readyz"));
        assert!(
            c.env
                .iter()
                .flatten()
                .any(|e| e.name == "POD_NAME" && e.value_from.is_some())
        );

        let role = m.lease_role();
        assert_eq!(role.metadata.namespace.as_deref(), Some("ops"));
        let rules = role.rules.unwrap_or_default();
        let leases = rules
            .iter()
            .find(|r| r.resources.iter().flatten().any(|x| x == "leases"))
            .expect("a rule on leases");
        for verb in ["get", "list", "watch", "create", "update", "delete"] {
            assert!(leases.verbs.iter().any(|v| v == verb), "{verb}");
        }
        let binding = m.lease_role_binding();
        assert_eq!(
            binding.role_ref.name,
            role.metadata.name.unwrap_or_default()
        );
        let subject = &binding.subjects.unwrap_or_default()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("widgets", Some("ops"))
        );

        let yaml = m.to_yaml().unwrap_or_default();
        assert_eq!(yaml.matches("---\n").count(), 3);
        assert!(yaml.contains("replicas: 5"), "{yaml}");
    }
}
