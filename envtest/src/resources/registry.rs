//! The resource registry: which kinds this server serves, under which group,
//! version and plural, whether they are namespaced, have a status
//! subresource, and which field selectors they accept. Built-in kinds are
//! registered at start; a CustomResourceDefinition registers its served
//! versions when it is created and unregisters them when it is deleted.

use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One of a custom resource version's `additionalPrinterColumns`, as its
/// CRD declares it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Header, as kubectl prints it upper-cased.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub ty: String,
    /// An OpenAPI format hint such as `int32` or `byte` (often empty).
    pub format: String,
    /// What the column shows.
    pub description: String,
    /// 0 for default columns; kubectl shows higher ones only with `-o wide`.
    pub priority: i32,
    /// Dotted path of the value (its `jsonPath` without the leading dot).
    pub path: String,
}

/// How an object name is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most kinds).
    Subdomain,
    /// DNS-1123 label (namespaces).
    Label,
    /// DNS-1035 label (services).
    Dns1035,
    /// Any path segment (RBAC kinds allow ':' and more).
    PathSegment,
}

/// Dotted paths behind a `scale` subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// Desired replicas, such as `spec.replicas`.
    pub spec_replicas: String,
    /// Observed replicas, such as `status.replicas`.
    pub status_replicas: String,
    /// A label-selector string, if the resource keeps one; otherwise it is
    /// derived from `spec.selector.matchLabels`.
    pub label_selector: Option<String>,
}

/// One servable resource at one group/version.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// API group, empty for core.
    pub group: String,
    /// Version such as `v1`.
    pub version: String,
    /// Kind such as `ConfigMap`.
    pub kind: String,
    /// Plural resource name such as `configmaps`.
    pub plural: String,
    /// Singular name such as `configmap`.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether the `status` subresource is enabled.
    pub status: bool,
    /// Where the `scale` subresource reads and writes replicas, if enabled.
    pub scale: Option<ScalePaths>,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Field selector name -> dotted JSON path of the value (beyond
    /// `metadata.name` and `metadata.namespace`, which every kind has).
    pub field_selectors: Vec<(String, String)>,
    /// How names are validated.
    pub name_rule: NameRule,
    /// Whether this is a custom resource (PUT without RV is 422).
    pub custom: bool,
    /// Extra printer columns for table output.
    pub printer_columns: Vec<PrinterColumn>,
    /// Categories such as `all` (for `kubectl get all`).
    pub categories: Vec<String>,
    /// A custom resource version's `openAPIV3Schema` (pruning and validation).
    pub schema: Option<Arc<serde_json::Value>>,
}

impl ResourceInfo {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key shared by every version of this resource.
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// `plural.group` or `plural` (how errors name a resource).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// How a custom resource's versions are converted, when its CRD says
/// `spec.conversion.strategy: Webhook`.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    /// The CRD's `spec.conversion.webhook.clientConfig`.
    pub client_config: serde_json::Value,
    /// The version objects are stored in (`storage: true`).
    pub storage_version: String,
}

/// The registry of servable resources (thread-safe).
#[derive(Debug, Default)]
pub struct Registry {
    // key: (group, version, plural)
    resources: RwLock<BTreeMap<(String, String, String), Arc<ResourceInfo>>>,
    // key: (group, plural)
    conversions: RwLock<BTreeMap<(String, String), Arc<Conversion>>>,
}

/// An `rbac.authorization.k8s.io/v1` kind: no status, short names or field
/// selectors, and names that only need to be valid path segments.
fn rbac(kind: &str, plural: &str, namespaced: bool) -> ResourceInfo {
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        kind,
        plural,
        namespaced,
        false,
        &[],
        &[],
        NameRule::PathSegment,
    )
}

/// An `admissionregistration.k8s.io/v1` kind: cluster-scoped, no short
/// names or field selectors; policies have a status subresource.
fn admission(kind: &str, plural: &str, status: bool) -> ResourceInfo {
    builtin(
        "admissionregistration.k8s.io",
        "v1",
        kind,
        plural,
        false,
        status,
        &[],
        &[],
        NameRule::Subdomain,
    )
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    status: bool,
    short: &[&str],
    fields: &[(&str, &str)],
    name_rule: NameRule,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        status,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        field_selectors: fields
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        name_rule,
        custom: false,
        printer_columns: Vec::new(),
        categories: match plural {
            "pods" | "services" | "deployments" | "replicasets" | "statefulsets" | "daemonsets"
            | "jobs" | "cronjobs" => {
                vec!["all".to_string()]
            }
            _ => Vec::new(),
        },
        schema: None,
        scale: matches!(plural, "deployments" | "replicasets" | "statefulsets").then(|| {
            ScalePaths {
                spec_replicas: "spec.replicas".into(),
                status_replicas: "status.replicas".into(),
                label_selector: None,
            }
        }),
    }
}

impl Registry {
    /// A registry holding the built-in kinds.
    pub fn with_builtins() -> Self {
        use NameRule::*;
        let r = Registry::default();
        let ev_fields: &[(&str, &str)] = &[
            ("involvedObject.kind", "involvedObject.kind"),
            ("involvedObject.name", "involvedObject.name"),
            ("involvedObject.namespace", "involvedObject.namespace"),
            ("involvedObject.uid", "involvedObject.uid"),
            ("reason", "reason"),
            ("type", "type"),
        ];
        let list = [
            builtin(
                "",
                "v1",
                "Namespace",
                "namespaces",
                false,
                true,
                &["ns"],
                &[("status.phase", "status.phase")],
                Label,
            ),
            builtin(
                "",
                "v1",
                "Pod",
                "pods",
                true,
                true,
                &["po"],
                &[
                    ("spec.nodeName", "spec.nodeName"),
                    ("status.phase", "status.phase"),
                    ("spec.serviceAccountName", "spec.serviceAccountName"),
                ],
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "ConfigMap",
                "configmaps",
                true,
                false,
                &["cm"],
                &[],
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "Secret",
                "secrets",
                true,
                false,
                &[],
                &[("type", "type")],
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "Service",
                "services",
                true,
                true,
                &["svc"],
                &[],
                Dns1035,
            ),
            builtin(
                "",
                "v1",
                "ServiceAccount",
                "serviceaccounts",
                true,
                false,
                &["sa"],
                &[],
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "Event",
                "events",
                true,
                false,
                &["ev"],
                ev_fields,
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "Node",
                "nodes",
                false,
                true,
                &["no"],
                &[("spec.unschedulable", "spec.unschedulable")],
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "Endpoints",
                "endpoints",
                true,
                false,
                &["ep"],
                &[],
                Subdomain,
            ),
            builtin(
                "",
                "v1",
                "PersistentVolumeClaim",
                "persistentvolumeclaims",
                true,
                true,
                &["pvc"],
                &[],
                Subdomain,
            ),
            builtin(
                "apps",
                "v1",
                "Deployment",
                "deployments",
                true,
                true,
                &["deploy"],
                &[],
                Subdomain,
            ),
            builtin(
                "apps",
                "v1",
                "ReplicaSet",
                "replicasets",
                true,
                true,
                &["rs"],
                &[],
                Subdomain,
            ),
            builtin(
                "apps",
                "v1",
                "StatefulSet",
                "statefulsets",
                true,
                true,
                &["sts"],
                &[],
                Subdomain,
            ),
            builtin(
                "apps",
                "v1",
                "DaemonSet",
                "daemonsets",
                true,
                true,
                &["ds"],
                &[],
                Subdomain,
            ),
            builtin(
                "apps",
                "v1",
                "ControllerRevision",
                "controllerrevisions",
                true,
                false,
                &[],
                &[],
                Subdomain,
            ),
            builtin(
                "batch",
                "v1",
                "Job",
                "jobs",
                true,
                true,
                &[],
                &[("status.successful", "status.successful")],
                Subdomain,
            ),
            builtin(
                "batch",
                "v1",
                "CronJob",
                "cronjobs",
                true,
                true,
                &["cj"],
                &[],
                Subdomain,
            ),
            builtin(
                "events.k8s.io",
                "v1",
                "Event",
                "events",
                true,
                false,
                &["ev"],
                &[
                    ("reason", "reason"),
                    ("type", "type"),
                    ("regarding.name", "regarding.name"),
                    ("regarding.kind", "regarding.kind"),
                ],
                Subdomain,
            ),
            builtin(
                "coordination.k8s.io",
                "v1",
                "Lease",
                "leases",
                true,
                false,
                &[],
                &[],
                Subdomain,
            ),
            builtin(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
                true,
                &["crd", "crds"],
                &[],
                Subdomain,
            ),
            admission(
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfigurations",
                false,
            ),
            admission(
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfigurations",
                false,
            ),
            admission(
                "ValidatingAdmissionPolicy",
                "validatingadmissionpolicies",
                true,
            ),
            admission(
                "ValidatingAdmissionPolicyBinding",
                "validatingadmissionpolicybindings",
                false,
            ),
            rbac("Role", "roles", true),
            rbac("RoleBinding", "rolebindings", true),
            rbac("ClusterRole", "clusterroles", false),
            rbac("ClusterRoleBinding", "clusterrolebindings", false),
        ];
        for info in list {
            r.register(info);
        }
        r
    }

    /// Add (or replace) a resource.
    pub fn register(&self, info: ResourceInfo) {
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.plural.clone(),
        );
        self.resources.write().insert(key, Arc::new(info));
    }

    /// Set (or, with `None`, clear) how `group`/`plural` is converted
    /// between versions.
    pub fn set_conversion(&self, group: &str, plural: &str, c: Option<Conversion>) {
        let key = (group.to_string(), plural.to_string());
        let mut all = self.conversions.write();
        match c {
            Some(c) => all.insert(key, Arc::new(c)),
            None => all.remove(&key),
        };
    }

    /// The webhook conversion of `group`/`plural`, if its CRD has one.
    pub fn conversion(&self, group: &str, plural: &str) -> Option<Arc<Conversion>> {
        if group.is_empty() || !group.contains('.') {
            return None;
        }
        self.conversions
            .read()
            .get(&(group.to_string(), plural.to_string()))
            .cloned()
    }

    /// Remove every version of `group`/`plural`.
    pub fn unregister(&self, group: &str, plural: &str) {
        self.resources
            .write()
            .retain(|(g, _, p), _| !(g == group && p == plural));
        self.conversions
            .write()
            .remove(&(group.to_string(), plural.to_string()));
    }

    /// Look up by group, version and plural.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.resources
            .read()
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Every registered resource, ordered by group, version, plural.
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.resources.read().values().cloned().collect()
    }

    /// Resources of one group/version.
    pub fn group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.resources
            .read()
            .values()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_registered_with_scope() {
        let r = Registry::with_builtins();
        let cm = r.get("", "v1", "configmaps").unwrap();
        assert!(cm.namespaced);
        assert_eq!(cm.api_version(), "v1");
        let crd = r
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        assert!(!crd.namespaced);
        assert_eq!(
            crd.storage_key(),
            "apiextensions.k8s.io/customresourcedefinitions"
        );
        r.unregister("apps", "deployments");
        assert!(r.get("apps", "v1", "deployments").is_none());
    }
}
