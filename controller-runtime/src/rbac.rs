//! The least-privilege RBAC role a controller needs, derived from its wiring.
//!
//! Layer 1 (building blocks): imports nothing else of this crate; the `Controller` derive builds on it.
//!
//! [`Permissions`] collects what a controller does with each resource — the
//! primary kind it reconciles, the kinds it owns, the kinds it only watches,
//! the Events it records, the Lease it holds for leader election, and any
//! extra rules its reconcile body needs — and merges them into one sorted,
//! deterministic list of `PolicyRule`s. `#[derive(Controller)]` builds one
//! from its attributes, so the role and the code that needs it come from the
//! same declaration.
//!
//! How the rules become roles depends on what the manager watches:
//!
//! - every namespace: one `ClusterRole` of every rule
//!   ([`Permissions::cluster_role`]);
//! - some namespaces (`ManagerBuilder::namespace` or `namespaces`): a
//!   `Role` in each with the rules on namespaced resources
//!   ([`Permissions::role`]), plus a `ClusterRole` with the rules on
//!   cluster-scoped ones (`Namespace`s, CRDs, webhook configurations,
//!   TokenReviews...), which no Role can grant — the API server ignores
//!   such a rule in a Role. [`Permissions::for_namespaces`] makes both, and
//!   [`ScopedRbac::bindings`] binds them to a service account.
//!
//! A resource is cluster-scoped when its typed kind says so (its `Scope`),
//! when it is one of the built-in cluster-scoped resources, or when it was
//! marked with [`Permissions::cluster_scoped`]; a rule given by name on a
//! custom resource is taken as namespaced unless marked.
//!
//! Verbs per resource are merged (a kind both owned and watched gets the
//! union), resources with the same verbs in one API group share a rule, and
//! rules are ordered by API group and resource, so the same wiring always
//! renders byte-for-byte the same manifest.
//!
//! ```
//! use controller_runtime::rbac::Permissions;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//!
//! let perms = Permissions::new()
//!     .primary::<ConfigMap>()
//!     .owns::<Deployment>()
//!     .watches::<Secret>()
//!     .events();
//! let role = perms.cluster_role("configmap-controller");
//! let yaml = controller_runtime::manifests::to_yaml(&role)?;
//! assert!(yaml.contains("kind: ClusterRole"));
//! assert!(perms.allows("apps", "deployments", "create"));
//! assert!(!perms.allows("", "secrets", "update"));
//!
//! // Confined to two namespaces: a Role in each; the rule on Namespaces
//! // (cluster-scoped) goes to a ClusterRole.
//! use k8s_openapi::api::core::v1::Namespace;
//! let scoped = perms.watches::<Namespace>().for_namespaces("configmap-controller", ["a", "b"]);
//! assert_eq!(scoped.roles.len(), 2);
//! assert!(scoped.cluster_role.is_some());
//! # Ok::<(), controller_runtime::manifests::RenderError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::Resource;
pub use namespaces::{ScopedBindings, ScopedRbac};

/// An RBAC verb. Ordered the way people read them (reads, then writes), which
/// is the order rules list them in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// `get` one object.
    Get,
    /// `list` a collection.
    List,
    /// `watch` a collection or an object.
    Watch,
    /// `create` an object.
    Create,
    /// `update` (PUT) an object.
    Update,
    /// `patch` an object.
    Patch,
    /// `delete` one object.
    Delete,
    /// `deletecollection`.
    DeleteCollection,
    /// Any other verb (`bind`, `escalate`, `use`, `impersonate`, `*`...).
    Other(String),
}

impl Verb {
    /// The verb as RBAC spells it.
    ///
    /// ```
    /// use controller_runtime::rbac::Verb;
    /// assert_eq!(Verb::DeleteCollection.as_str(), "deletecollection");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other(s) => s,
        }
    }

    /// Parse a verb (anything unknown becomes [`Verb::Other`]).
    ///
    /// ```
    /// use controller_runtime::rbac::Verb;
    /// assert_eq!(Verb::parse("watch"), Verb::Watch);
    /// assert_eq!(Verb::parse("bind"), Verb::Other("bind".into()));
    /// ```
    pub fn parse(s: &str) -> Verb {
        match s {
            "get" => Verb::Get,
            "list" => Verb::List,
            "watch" => Verb::Watch,
            "create" => Verb::Create,
            "update" => Verb::Update,
            "patch" => Verb::Patch,
            "delete" => Verb::Delete,
            "deletecollection" => Verb::DeleteCollection,
            other => Verb::Other(other.to_string()),
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Verbs on the primary kind: read it from the cache and write it back.
pub const PRIMARY_VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Update,
    Verb::Patch,
];
/// Verbs on the primary kind's `status` subresource.
pub const STATUS_VERBS: &[Verb] = &[Verb::Get, Verb::Update, Verb::Patch];
/// Verbs on the primary kind's `finalizers` subresource (needed to set
/// `blockOwnerDeletion` on owner references to it).
pub const FINALIZERS_VERBS: &[Verb] = &[Verb::Update];
/// Verbs on an owned kind: the full life cycle of what the controller makes.
pub const OWNED_VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Patch,
    Verb::Delete,
];
/// Verbs on a watched kind: its informer's list and watch.
pub const WATCHED_VERBS: &[Verb] = &[Verb::List, Verb::Watch];
/// Verbs on `events.k8s.io` events: the recorder creates and patches series.
pub const EVENT_VERBS: &[Verb] = &[Verb::Create, Verb::Patch];
/// Verbs on `coordination.k8s.io` leases: the leader elector's lock.
pub const LEASE_VERBS: &[Verb] = &[Verb::Get, Verb::Create, Verb::Update];
/// Verbs on `coordination.k8s.io` leases of a sharded controller: its own
/// shard Lease (create, update, delete on leaving), the informer on the
/// ring's Leases (list, watch), the sharder's reads, ring-state writes and
/// deletion of expired shard Leases.
pub const SHARD_LEASE_VERBS: &[Verb] = &[
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Delete,
];

/// Verbs on TokenReviews and SubjectAccessReviews of a manager serving
/// `/metrics` securely: it only asks the API server, so `create`.
pub const SECURE_METRICS_VERBS: &[Verb] = &[Verb::Create];

/// Verbs a label-mode sharder needs on each sharded kind: read everything,
/// patch the shard labels.
pub const SHARDER_VERBS: &[Verb] = &[Verb::Get, Verb::List, Verb::Watch, Verb::Patch];

/// Where a rule applies: one resource (or `resource/subresource`) of one API
/// group, optionally narrowed to some object names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Target {
    group: String,
    resource: String,
    names: BTreeSet<String>,
}

/// The permissions a controller needs, merged per API group and resource.
/// Build with the typed methods, render with [`Permissions::cluster_role`],
/// [`Permissions::role`] or [`Permissions::policy_rules`].
///
/// ```
/// use controller_runtime::rbac::{Permissions, Verb};
/// let perms = Permissions::new()
///     .rule("", "configmaps", [Verb::Get, Verb::List])
///     .rule("", "configmaps", [Verb::Watch]);
/// let rules = perms.policy_rules();
/// assert_eq!(rules.len(), 1);
/// assert_eq!(rules[0].verbs, ["get", "list", "watch"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Permissions {
    rules: BTreeMap<Target, BTreeSet<Verb>>,
    /// `(group, resource)` known to be cluster-scoped beyond the built-in
    /// ones: typed cluster-scoped kinds and [`Permissions::cluster_scoped`].
    cluster_scoped: BTreeSet<(String, String)>,
}

/// The API group and plural of a typed resource.
fn group_plural<K: Resource<DynamicType = ()>>() -> (String, String) {
    (K::group(&()).into_owned(), K::plural(&()).into_owned())
}

impl Permissions {
    /// No permissions.
    pub fn new() -> Self {
        Permissions::default()
    }

    /// Allow `verbs` on `resource` (a plural, or `plural/subresource`) of
    /// API `group` (`""` for the core group).
    pub fn rule<V: Into<Verb>>(
        self,
        group: &str,
        resource: &str,
        verbs: impl IntoIterator<Item = V>,
    ) -> Self {
        self.named_rule(group, resource, std::iter::empty::<&str>(), verbs)
    }

    /// Allow `verbs` on the named objects of `resource` only. Names cannot
    /// narrow `create`, `list`, `watch` or `deletecollection` (the server
    /// knows no name for those), so give those verbs with [`Permissions::rule`].
    pub fn named_rule<V: Into<Verb>, N: Into<String>>(
        mut self,
        group: &str,
        resource: &str,
        names: impl IntoIterator<Item = N>,
        verbs: impl IntoIterator<Item = V>,
    ) -> Self {
        let target = Target {
            group: group.to_string(),
            resource: resource.to_string(),
            names: names.into_iter().map(Into::into).collect(),
        };
        self.rules
            .entry(target)
            .or_default()
            .extend(verbs.into_iter().map(Into::into));
        self
    }

    /// The reconciled kind: [`PRIMARY_VERBS`] on it, [`STATUS_VERBS`] on its
    /// `status` and [`FINALIZERS_VERBS`] on its `finalizers`.
    pub fn primary<K: Resource<DynamicType = ()>>(self) -> Self {
        let (group, plural) = group_plural::<K>();
        self.scope_of::<K>()
            .rule(&group, &plural, PRIMARY_VERBS.iter().cloned())
            .rule(
                &group,
                &format!("{plural}/status"),
                STATUS_VERBS.iter().cloned(),
            )
            .rule(
                &group,
                &format!("{plural}/finalizers"),
                FINALIZERS_VERBS.iter().cloned(),
            )
    }

    /// A kind the controller creates and owns: [`OWNED_VERBS`].
    pub fn owns<K: Resource<DynamicType = ()>>(self) -> Self {
        let (group, plural) = group_plural::<K>();
        self.scope_of::<K>()
            .rule(&group, &plural, OWNED_VERBS.iter().cloned())
    }

    /// A kind the controller only watches: [`WATCHED_VERBS`].
    pub fn watches<K: Resource<DynamicType = ()>>(self) -> Self {
        let (group, plural) = group_plural::<K>();
        self.scope_of::<K>()
            .rule(&group, &plural, WATCHED_VERBS.iter().cloned())
    }

    /// Recording `events.k8s.io/v1` Events: [`EVENT_VERBS`].
    pub fn events(self) -> Self {
        self.rule("events.k8s.io", "events", EVENT_VERBS.iter().cloned())
    }

    /// Holding a `coordination.k8s.io` Lease for leader election:
    /// [`LEASE_VERBS`].
    pub fn leases(self) -> Self {
        self.rule("coordination.k8s.io", "leases", LEASE_VERBS.iter().cloned())
    }

    /// Taking part in a shard ring ([`crate::sharding`]): [`SHARD_LEASE_VERBS`]
    /// on Leases (a superset of leader election's).
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// let perms = Permissions::new().sharded_leases();
    /// assert!(perms.allows("coordination.k8s.io", "leases", "watch"));
    /// assert!(perms.allows("coordination.k8s.io", "leases", "delete"));
    /// ```
    pub fn sharded_leases(self) -> Self {
        self.rule(
            "coordination.k8s.io",
            "leases",
            SHARD_LEASE_VERBS.iter().cloned(),
        )
    }

    /// Serving `/metrics` behind authentication and authorization
    /// (`ManagerBuilder::metrics_secure`): [`SECURE_METRICS_VERBS`] on
    /// `authentication.k8s.io` TokenReviews (who is scraping) and
    /// `authorization.k8s.io` SubjectAccessReviews (may they `get
    /// /metrics`), as kubebuilder's `metrics_auth_role.yaml` grants.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// let perms = Permissions::new().secure_metrics();
    /// assert!(perms.allows("authentication.k8s.io", "tokenreviews", "create"));
    /// assert!(perms.allows("authorization.k8s.io", "subjectaccessreviews", "create"));
    /// ```
    pub fn secure_metrics(self) -> Self {
        self.rule(
            "authentication.k8s.io",
            "tokenreviews",
            SECURE_METRICS_VERBS.iter().cloned(),
        )
        .rule(
            "authorization.k8s.io",
            "subjectaccessreviews",
            SECURE_METRICS_VERBS.iter().cloned(),
        )
    }

    /// The sharder of a label-mode shard ring ([`crate::sharding`]) on kind
    /// `K` (the sharded kind or one it owns): reads every object's metadata
    /// and patches its shard labels ([`SHARDER_VERBS`]).
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let perms = Permissions::new().sharded_labels::<ConfigMap>();
    /// assert!(perms.allows("", "configmaps", "patch"));
    /// assert!(!perms.allows("", "configmaps", "delete"));
    /// ```
    pub fn sharded_labels<K: Resource<DynamicType = ()>>(self) -> Self {
        let (group, plural) = group_plural::<K>();
        self.scope_of::<K>()
            .rule(&group, &plural, SHARDER_VERBS.iter().cloned())
    }

    /// Marks `resource` of `group` cluster-scoped (a custom resource given
    /// by name; typed kinds and built-in resources need no mark), so its
    /// rules go to the `ClusterRole` of [`Permissions::for_namespaces`],
    /// never to a `Role`.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// let perms = Permissions::new()
    ///     .rule("example.com", "clusterwidgets", ["get"])
    ///     .cluster_scoped("example.com", "clusterwidgets");
    /// assert!(perms.namespaced_rules().is_empty());
    /// assert!(perms.cluster_scoped_rules().allows("example.com", "clusterwidgets", "get"));
    /// ```
    pub fn cluster_scoped(mut self, group: &str, resource: &str) -> Self {
        self.cluster_scoped
            .insert((group.to_string(), scope::base(resource).to_string()));
        self
    }

    /// Marks `K`'s resource cluster-scoped when its `Scope` says so.
    fn scope_of<K: Resource<DynamicType = ()>>(self) -> Self {
        if scope::typed_cluster_scoped::<K>() {
            let (group, plural) = group_plural::<K>();
            self.cluster_scoped(&group, &plural)
        } else {
            self
        }
    }

    /// Everything in `other` too.
    pub fn merge(mut self, other: Permissions) -> Self {
        for (target, verbs) in other.rules {
            self.rules.entry(target).or_default().extend(verbs);
        }
        self.cluster_scoped.extend(other.cluster_scoped);
        self
    }

    /// Whether some rule allows `verb` on `resource` of `group` (any name).
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// let perms = Permissions::new().events();
    /// assert!(perms.allows("events.k8s.io", "events", "create"));
    /// assert!(!perms.allows("events.k8s.io", "events", "delete"));
    /// ```
    pub fn allows(&self, group: &str, resource: &str, verb: &str) -> bool {
        let verb = Verb::parse(verb);
        self.rules.iter().any(|(t, verbs)| {
            t.group == group
                && t.resource == resource
                && (verbs.contains(&verb) || verbs.contains(&Verb::Other("*".into())))
        })
    }

    /// Whether no rule was added.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The merged rules: one per API group, object-name set and verb set,
    /// listing every resource that shares them; sorted by group, then by
    /// first resource.
    pub fn policy_rules(&self) -> Vec<PolicyRule> {
        // (group, names, verbs) -> resources
        type Shared<'a> = (&'a str, &'a BTreeSet<String>, &'a BTreeSet<Verb>);
        let mut shared: BTreeMap<Shared<'_>, BTreeSet<&str>> = BTreeMap::new();
        for (t, verbs) in &self.rules {
            if verbs.is_empty() {
                continue;
            }
            shared
                .entry((t.group.as_str(), &t.names, verbs))
                .or_default()
                .insert(t.resource.as_str());
        }
        let mut rules: Vec<PolicyRule> = shared
            .into_iter()
            .map(|((group, names, verbs), resources)| PolicyRule {
                api_groups: Some(vec![group.to_string()]),
                resources: Some(resources.into_iter().map(str::to_string).collect()),
                resource_names: (!names.is_empty()).then(|| names.iter().cloned().collect()),
                verbs: verbs.iter().map(|v| v.as_str().to_string()).collect(),
                non_resource_urls: None,
            })
            .collect();
        rules.sort_by(|a, b| {
            let key = |r: &PolicyRule| {
                (
                    r.api_groups.clone().unwrap_or_default(),
                    r.resources.clone().unwrap_or_default(),
                    r.resource_names.clone().unwrap_or_default(),
                )
            };
            key(a).cmp(&key(b))
        });
        rules
    }

    /// A `ClusterRole` named `name` holding [`Permissions::policy_rules`]:
    /// every rule, for a manager watching every namespace.
    pub fn cluster_role(&self, name: &str) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            rules: Some(self.policy_rules()),
            aggregation_rule: None,
        }
    }

    /// A `Role` named `name` in `namespace` holding the rules on namespaced
    /// resources ([`Permissions::namespaced_rules`]), for a manager confined
    /// to some namespaces. The rules on cluster-scoped resources are left
    /// out (a Role cannot grant them): they need the `ClusterRole` of
    /// [`Permissions::cluster_scoped_rules`], which
    /// [`Permissions::for_namespaces`] makes too.
    ///
    /// ```
    /// use controller_runtime::rbac::Permissions;
    /// use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// let perms = Permissions::new().primary::<ConfigMap>().watches::<Namespace>();
    /// let role = perms.role("cm", "team-a");
    /// let rules = role.rules.unwrap_or_default();
    /// assert!(rules.iter().all(|r| r.resources.as_ref().is_some_and(|res| !res.contains(&"namespaces".to_string()))));
    /// ```
    pub fn role(&self, name: &str, namespace: &str) -> Role {
        Role {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            rules: Some(self.namespaced_rules().policy_rules()),
        }
    }
}

/// The `ClusterRole` that lets a scraper read a securely served `/metrics`
/// (`get` on the non-resource URL `/metrics`, kubebuilder's
/// `metrics_reader_role.yaml`): bind it to Prometheus' ServiceAccount with
/// a `ClusterRoleBinding`. Non-resource URLs can only be granted cluster-wide.
///
/// ```
/// let role = controller_runtime::rbac::metrics_reader_cluster_role("demo-metrics-reader");
/// let rule = &role.rules.unwrap()[0];
/// assert_eq!(rule.non_resource_urls.as_deref(), Some(&["/metrics".to_string()][..]));
/// assert_eq!(rule.verbs, ["get"]);
/// ```
pub fn metrics_reader_cluster_role(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".to_string()]),
            verbs: vec![Verb::Get.as_str().to_string()],
            ..PolicyRule::default()
        }]),
        aggregation_rule: None,
    }
}

impl From<&str> for Verb {
    fn from(s: &str) -> Verb {
        Verb::parse(s)
    }
}

mod namespaces;
mod scope;
#[cfg(test)]
mod tests;
