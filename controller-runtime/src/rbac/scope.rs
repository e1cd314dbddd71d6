//! Which resources are cluster-scoped: a namespaced `Role` cannot grant
//! them (the API server ignores such a rule), so [`super::Permissions`]
//! sends their rules to a `ClusterRole`. Typed kinds say it with their
//! `Scope`; for rules given by name, the built-in cluster-scoped resources
//! are listed here.

use kube_core::Resource;

/// The cluster-scoped resources of the built-in API groups (Kubernetes
/// 1.35), by group.
const BUILT_IN: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "componentstatuses",
            "namespaces",
            "nodes",
            "persistentvolumes",
        ],
    ),
    (
        "admissionregistration.k8s.io",
        &[
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
            "mutatingwebhookconfigurations",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
            "validatingwebhookconfigurations",
        ],
    ),
    ("apiextensions.k8s.io", &["customresourcedefinitions"]),
    ("apiregistration.k8s.io", &["apiservices"]),
    (
        "authentication.k8s.io",
        &["selfsubjectreviews", "tokenreviews"],
    ),
    (
        "authorization.k8s.io",
        &[
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews",
        ],
    ),
    (
        "certificates.k8s.io",
        &["certificatesigningrequests", "clustertrustbundles"],
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        &["flowschemas", "prioritylevelconfigurations"],
    ),
    ("internal.apiserver.k8s.io", &["storageversions"]),
    (
        "networking.k8s.io",
        &["ingressclasses", "ipaddresses", "servicecidrs"],
    ),
    ("node.k8s.io", &["runtimeclasses"]),
    (
        "rbac.authorization.k8s.io",
        &["clusterrolebindings", "clusterroles"],
    ),
    ("resource.k8s.io", &["deviceclasses", "resourceslices"]),
    ("scheduling.k8s.io", &["priorityclasses"]),
    (
        "storage.k8s.io",
        &[
            "csidrivers",
            "csinodes",
            "storageclasses",
            "volumeattachments",
            "volumeattributesclasses",
        ],
    ),
];

/// `plural` of `plural/subresource`: a subresource has its parent's scope.
pub(super) fn base(resource: &str) -> &str {
    resource.split_once('/').map_or(resource, |(base, _)| base)
}

/// Whether `resource` (or `resource/subresource`) of `group` is one of the
/// built-in cluster-scoped resources.
pub(super) fn built_in_cluster_scoped(group: &str, resource: &str) -> bool {
    let resource = base(resource);
    BUILT_IN
        .iter()
        .any(|(g, resources)| *g == group && resources.contains(&resource))
}

/// Whether kind `K` is cluster-scoped, from its `Scope` type. Compared by
/// type name rather than `TypeId` so that no `'static` (or other) bound is
/// asked of `K::Scope`; the name of k8s-openapi's cluster scope is the same
/// whichever version of it `K` was built with, which is what is meant.
pub(super) fn typed_cluster_scoped<K: Resource>() -> bool {
    std::any::type_name::<K::Scope>() == std::any::type_name::<k8s_openapi::ClusterResourceScope>()
}
