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
//! a rolling update is a scale-up followed by graceful leaves. The manager
//! serves no health or metrics port unless told (`ManagerBuilder::health_addr`,
//! `metrics_addr`), so the Deployment has probes only when given the health
//! port ([`ShardedDeployment::health_port`]), and then passes the program
//! `--health-probe-bind-address=0.0.0.0:<port>` (the scaffold's flag, which
//! the program hands to `health_addr`); likewise metrics with
//! `--metrics-bind-address`. The readiness probe is the manager's `/readyz`,
//! which includes each sharded controller's `shard-<controller>` check. The
//! termination grace period is longer than the manager's stop bound
//! (`graceful_shutdown_timeout` plus
//! [`SHUTDOWN_CLEANUP_TIMEOUT`](crate::manager::SHUTDOWN_CLEANUP_TIMEOUT)),
//! after which the replica has deleted its shard Lease and its objects move
//! at once. Pod and container run non-root, without privilege escalation,
//! on a read-only root filesystem with every capability dropped.
//!
//! ```
//! use controller_runtime::sharding::manifests::ShardedDeployment;
//! let m = ShardedDeployment::new("widgets", "operators", "example.com/widgets:1.0").replicas(4);
//! assert_eq!(m.deployment().spec.unwrap().replicas, Some(4));
//! // No health port given: the manager serves none, so no probes.
//! let pod = m.deployment().spec.unwrap().template.spec.unwrap();
//! assert!(pod.containers[0].readiness_probe.is_none());
//! assert!(pod.termination_grace_period_seconds.unwrap() > 35);
//! let yaml = m.to_yaml()?;
//! assert!(yaml.contains("kind: Deployment") && yaml.contains("kind: RoleBinding"));
//! # Ok::<(), controller_runtime::manifests::RenderError>(())
//! ```

use std::collections::BTreeMap;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::manager::deployment::ManagerDeployment;
#[cfg(feature = "manifests")]
use crate::manifests::{RenderError, to_yaml};
use crate::rbac::{Permissions, Role};

/// The manifests of a sharded controller on N replicas; see the [module
/// documentation](self).
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct ShardedDeployment {
    /// The Deployment's settings, kept where every manager's are; its name
    /// and namespace are those of the ServiceAccount, Role and RoleBinding
    /// too (and the namespace the ring's Leases').
    deployment: ManagerDeployment,
}

impl ShardedDeployment {
    /// Two replicas of `image` named `name` in `namespace`; no health or
    /// metrics port (the manager's defaults), 40 s to stop (the manager's
    /// default 30 s graceful shutdown, its 5 s cleanup, 5 s to exit).
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        image: impl Into<String>,
    ) -> Self {
        let name = name.into();
        let deployment = ManagerDeployment::new(&name, namespace, image)
            .replicas(2)
            .labels(labels(&name));
        ShardedDeployment { deployment }
    }

    /// Sets the number of replicas.
    pub fn replicas(mut self, n: i32) -> Self {
        self.deployment = self.deployment.replicas(n);
        self
    }

    /// The program serves `/readyz` and `/healthz` on `port`: the pods get
    /// readiness and liveness probes on it, and the argument
    /// `--health-probe-bind-address=0.0.0.0:<port>` (give it to
    /// `ManagerBuilder::health_addr`).
    ///
    /// ```
    /// use controller_runtime::sharding::manifests::ShardedDeployment;
    /// let d = ShardedDeployment::new("w", "ops", "img:1").health_port(8081).deployment();
    /// let c = &d.spec.unwrap().template.spec.unwrap().containers[0];
    /// assert!(c.readiness_probe.is_some());
    /// assert!(c.args.iter().flatten().any(|a| a == "--health-probe-bind-address=0.0.0.0:8081"));
    /// ```
    pub fn health_port(mut self, port: i32) -> Self {
        self.deployment = self.deployment.health_port(port);
        self
    }

    /// The program serves `/metrics` on `port`: the pods declare it and
    /// get `--metrics-bind-address=0.0.0.0:<port>` (give it to
    /// `ManagerBuilder::metrics_addr`).
    pub fn metrics_port(mut self, port: i32) -> Self {
        self.deployment = self.deployment.metrics_port(port);
        self
    }

    /// The manager's `graceful_shutdown_timeout` (default 30 s): the pods'
    /// termination grace period becomes longer than the manager's stop
    /// bound (this plus its 5 s cleanup, plus 5 s).
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.deployment = self.deployment.graceful_shutdown_timeout(timeout);
        self
    }

    fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.deployment.name().to_string()),
            namespace: Some(self.deployment.namespace().to_string()),
            labels: Some(labels(self.deployment.name())),
            ..Default::default()
        }
    }

    /// The Deployment: N pods, `POD_NAME` and `POD_NAMESPACE` from the
    /// downward API, readiness on `/readyz` and liveness on `/healthz` when
    /// the health port is set, non-root and read-only (the manager's
    /// [`ManagerDeployment`] with these settings).
    pub fn deployment(&self) -> Deployment {
        self.deployment.deployment()
    }

    /// The [`ManagerDeployment`] behind [`deployment`](Self::deployment),
    /// to add what this type does not set (resources, arguments,
    /// environment).
    ///
    /// ```
    /// use controller_runtime::sharding::manifests::ShardedDeployment;
    /// let d = ShardedDeployment::new("w", "ops", "img:1")
    ///     .manager_deployment()
    ///     .resources(("10m", "64Mi"), ("500m", "256Mi"))
    ///     .deployment();
    /// assert!(d.spec.unwrap().template.spec.unwrap().containers[0].resources.is_some());
    /// ```
    pub fn manager_deployment(&self) -> ManagerDeployment {
        self.deployment.clone()
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
        let mut role = Permissions::new().sharded_leases().role(
            &format!("{}-sharding", self.deployment.name()),
            self.deployment.namespace(),
        );
        role.metadata.labels = Some(labels(self.deployment.name()));
        role
    }

    /// Binds [`lease_role`](Self::lease_role) to the ServiceAccount.
    pub fn lease_role_binding(&self) -> RoleBinding {
        let name = format!("{}-sharding", self.deployment.name());
        // `api_group` is a `String` up to Kubernetes 1.35 and an
        // `Option<String>` from 1.36: `.into()` is one spelling for both.
        #[allow(clippy::useless_conversion)]
        let role_ref = RoleRef {
            api_group: String::from("rbac.authorization.k8s.io").into(),
            kind: "Role".to_string(),
            name: name.clone(),
        };
        RoleBinding {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(self.deployment.namespace().to_string()),
                labels: Some(labels(self.deployment.name())),
                ..Default::default()
            },
            role_ref,
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_string(),
                name: self.deployment.name().to_string(),
                namespace: Some(self.deployment.namespace().to_string()),
                ..Default::default()
            }]),
        }
    }

    /// All four as one YAML stream (`---` between documents): the
    /// ServiceAccount, the Role, the RoleBinding and the Deployment (feature
    /// `manifests`).
    #[cfg(feature = "manifests")]
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

/// The labels of every manifest of the sharded controller `name`.
fn labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), name.to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            "sharded-controller".to_string(),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::deployment::spec_of;

    #[test]
    fn defaults_agree_with_the_managers() {
        let pod =
            |m: &ShardedDeployment| spec_of(&m.deployment()).template.spec.unwrap_or_default();
        // The manager serves no health port by default: no probe may point
        // at one.
        let default = ShardedDeployment::new("w", "ops", "img:1");
        let c = &pod(&default).containers[0];
        assert!(c.readiness_probe.is_none() && c.ports.is_none() && c.args.is_none());
        // Longer than the manager's stop bound (30 s + 5 s), and following
        // a longer graceful shutdown.
        assert_eq!(pod(&default).termination_grace_period_seconds, Some(40));
        let slow = default
            .clone()
            .graceful_shutdown_timeout(Duration::from_millis(60_500));
        assert_eq!(pod(&slow).termination_grace_period_seconds, Some(71));
        // A probe only with the port the program is told to serve it on.
        let served = default.health_port(9440).metrics_port(9443);
        let c = &pod(&served).containers[0];
        assert_eq!(
            c.args.clone().unwrap_or_default(),
            [
                "--health-probe-bind-address=0.0.0.0:9440",
                "--metrics-bind-address=0.0.0.0:9443"
            ]
        );
        assert!(c.readiness_probe.is_some() && c.liveness_probe.is_some());
        // Non-root, read-only, nothing to escalate (as the scaffold's).
        let sc = c.security_context.clone().unwrap_or_default();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
    }

    #[test]
    fn n_replicas_with_lease_rbac_bound_to_their_service_account() {
        let m = ShardedDeployment::new("widgets", "ops", "img:1")
            .replicas(5)
            .health_port(8081);
        let d = m.deployment();
        let spec = spec_of(&d);
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
