//! The RBAC of a manager confined to some namespaces: the rules on
//! namespaced resources as a `Role` in each, the rules on cluster-scoped
//! resources as one `ClusterRole`, and their bindings to the manager's
//! service account.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Permissions, scope};

impl Permissions {
    /// Whether rules on `resource` of `group` can only be granted by a
    /// `ClusterRole`.
    fn is_cluster_scoped(&self, group: &str, resource: &str) -> bool {
        scope::built_in_cluster_scoped(group, resource)
            || self
                .cluster_scoped
                .iter()
                .any(|(g, r)| g == group && r == scope::base(resource))
    }

    /// The part of these permissions on cluster-scoped (or namespaced, when
    /// `cluster` is false) resources.
    fn split(&self, cluster: bool) -> Permissions {
        Permissions {
            rules: self
                .rules
                .iter()
                .filter(|(t, _)| self.is_cluster_scoped(&t.group, &t.resource) == cluster)
                .map(|(t, v)| (t.clone(), v.clone()))
                .collect(),
            cluster_scoped: self.cluster_scoped.clone(),
        }
    }

    /// The rules on namespaced resources: what a `Role` can grant.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// let perms = Permissions::new().events().secure_metrics();
    /// let namespaced = perms.namespaced_rules();
    /// assert!(namespaced.allows("events.k8s.io", "events", "create"));
    /// assert!(!namespaced.allows("authentication.k8s.io", "tokenreviews", "create"));
    /// ```
    pub fn namespaced_rules(&self) -> Permissions {
        self.split(false)
    }

    /// The rules on cluster-scoped resources: what only a `ClusterRole` can
    /// grant.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// let perms = Permissions::new().events().secure_metrics();
    /// let cluster = perms.cluster_scoped_rules();
    /// assert!(cluster.allows("authentication.k8s.io", "tokenreviews", "create"));
    /// assert!(!cluster.allows("events.k8s.io", "events", "create"));
    /// ```
    pub fn cluster_scoped_rules(&self) -> Permissions {
        self.split(true)
    }

    /// The roles, named `name`, of a manager watching `namespaces` (empty
    /// names are skipped; none at all means every namespace, as an empty
    /// `WATCH_NAMESPACE`):
    ///
    /// - every namespace: one `ClusterRole` of every rule, no Role;
    /// - some: a `Role` in each with [`Permissions::namespaced_rules`]
    ///   (none when there are no such rules), and a `ClusterRole` with
    ///   [`Permissions::cluster_scoped_rules`] when there are some.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// let perms = Permissions::new().primary::<ConfigMap>().watches::<Namespace>();
    ///
    /// let scoped = perms.for_namespaces("cm", ["team-a", "team-b"]);
    /// let namespaces: Vec<_> = scoped.roles.iter().map(|r| r.metadata.namespace.clone().unwrap()).collect();
    /// assert_eq!(namespaces, ["team-a", "team-b"]);
    /// let cluster = scoped.cluster_role.expect("namespaces are cluster-scoped");
    /// assert_eq!(cluster.rules.unwrap()[0].resources.as_deref(), Some(&["namespaces".to_string()][..]));
    ///
    /// let everywhere = perms.for_namespaces("cm", Vec::<String>::new());
    /// assert!(everywhere.roles.is_empty());
    /// assert_eq!(everywhere.cluster_role, Some(perms.cluster_role("cm")));
    /// ```
    pub fn for_namespaces<I, S>(&self, name: &str, namespaces: I) -> ScopedRbac
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut seen = std::collections::BTreeSet::new();
        let namespaces: Vec<String> = namespaces
            .into_iter()
            .map(|n| n.as_ref().trim().to_string())
            .filter(|n| !n.is_empty() && seen.insert(n.clone()))
            .collect();
        if namespaces.is_empty() {
            return ScopedRbac {
                roles: Vec::new(),
                cluster_role: (!self.is_empty()).then(|| self.cluster_role(name)),
            };
        }
        let namespaced = self.namespaced_rules();
        let cluster = self.cluster_scoped_rules();
        ScopedRbac {
            roles: if namespaced.is_empty() {
                Vec::new()
            } else {
                namespaces
                    .iter()
                    .map(|ns| namespaced.role(name, ns))
                    .collect()
            },
            cluster_role: (!cluster.is_empty()).then(|| cluster.cluster_role(name)),
        }
    }
}

/// What [`Permissions::for_namespaces`] makes: the Roles of the watched
/// namespaces and the ClusterRole of the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopedRbac {
    /// One Role per watched namespace (none when the manager watches every
    /// namespace).
    pub roles: Vec<Role>,
    /// Every rule (watching every namespace), or the rules on
    /// cluster-scoped resources; `None` when there are none.
    pub cluster_role: Option<ClusterRole>,
}

/// The bindings of a [`ScopedRbac`]: one RoleBinding beside each Role, a
/// ClusterRoleBinding for the ClusterRole, each named as its role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopedBindings {
    /// One per Role, in its namespace.
    pub role_bindings: Vec<RoleBinding>,
    /// For the ClusterRole, if any.
    pub cluster_role_binding: Option<ClusterRoleBinding>,
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    // `api_group` is a `String` up to Kubernetes 1.35 and an
    // `Option<String>` from 1.36: `.into()` is one spelling for both.
    #[allow(clippy::useless_conversion)]
    RoleRef {
        api_group: String::from("rbac.authorization.k8s.io").into(),
        kind: kind.into(),
        name: name.into(),
    }
}

impl ScopedRbac {
    /// Binds every role to the service account `namespace/name`.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// let scoped = Permissions::new()
    ///     .primary::<ConfigMap>()
    ///     .watches::<Namespace>()
    ///     .for_namespaces("cm", ["team-a", "team-b"]);
    /// let bindings = scoped.bindings("system", "cm-manager");
    /// assert_eq!(bindings.role_bindings.len(), 2);
    /// assert_eq!(bindings.role_bindings[1].metadata.namespace.as_deref(), Some("team-b"));
    /// let cluster = bindings.cluster_role_binding.unwrap();
    /// assert_eq!(cluster.role_ref.kind, "ClusterRole");
    /// assert_eq!(cluster.subjects.unwrap()[0].namespace.as_deref(), Some("system"));
    /// ```
    pub fn bindings(&self, namespace: &str, name: &str) -> ScopedBindings {
        let subjects = Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(namespace.into()),
            api_group: None,
        }]);
        let role_bindings = self
            .roles
            .iter()
            .map(|role| {
                let role_name = role.metadata.name.clone().unwrap_or_default();
                RoleBinding {
                    metadata: ObjectMeta {
                        name: Some(role_name.clone()),
                        namespace: role.metadata.namespace.clone(),
                        ..ObjectMeta::default()
                    },
                    role_ref: role_ref("Role", &role_name),
                    subjects: subjects.clone(),
                }
            })
            .collect();
        let cluster_role_binding = self.cluster_role.as_ref().map(|role| {
            let role_name = role.metadata.name.clone().unwrap_or_default();
            ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(role_name.clone()),
                    ..ObjectMeta::default()
                },
                role_ref: role_ref("ClusterRole", &role_name),
                subjects: subjects.clone(),
            }
        });
        ScopedBindings {
            role_bindings,
            cluster_role_binding,
        }
    }
}
