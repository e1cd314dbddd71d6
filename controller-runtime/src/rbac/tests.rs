use super::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

fn rule<'a>(rules: &'a [PolicyRule], group: &str, resource: &str) -> &'a PolicyRule {
    rules
        .iter()
        .find(|r| {
            r.api_groups.as_deref() == Some(&[group.to_string()][..])
                && r.resources.iter().flatten().any(|x| x == resource)
        })
        .unwrap_or_else(|| panic!("no rule for {group}/{resource} in {rules:#?}"))
}

#[test]
fn primary_gets_read_write_status_and_finalizers() {
    let rules = Permissions::new().primary::<ConfigMap>().policy_rules();
    assert_eq!(
        rule(&rules, "", "configmaps").verbs,
        ["get", "list", "watch", "update", "patch"]
    );
    assert_eq!(
        rule(&rules, "", "configmaps/status").verbs,
        ["get", "update", "patch"]
    );
    assert_eq!(rule(&rules, "", "configmaps/finalizers").verbs, ["update"]);
    assert_eq!(rules.len(), 3);
}

#[test]
fn owned_and_watched_kinds_get_their_verbs_and_nothing_more() {
    let perms = Permissions::new().owns::<Deployment>().watches::<Secret>();
    let rules = perms.policy_rules();
    assert_eq!(
        rule(&rules, "apps", "deployments").verbs,
        [
            "get", "list", "watch", "create", "update", "patch", "delete"
        ]
    );
    assert_eq!(rule(&rules, "", "secrets").verbs, ["list", "watch"]);
    assert!(!perms.allows("", "secrets", "get"));
    assert!(!perms.allows("apps", "deployments", "deletecollection"));
}

#[test]
fn verbs_merge_per_group_and_resource() {
    // Watched and owned: the owned verbs win (a union, not a second rule).
    let rules = Permissions::new()
        .watches::<Deployment>()
        .owns::<Deployment>()
        .policy_rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].verbs.len(), OWNED_VERBS.len());
}

#[test]
fn resources_with_equal_verbs_in_one_group_share_a_rule() {
    let rules = Permissions::new()
        .watches::<Secret>()
        .watches::<ConfigMap>()
        .policy_rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["configmaps".to_string(), "secrets".to_string()][..])
    );
    // Different groups never share a rule even with equal verbs.
    let rules = Permissions::new()
        .watches::<Secret>()
        .watches::<Deployment>()
        .policy_rules();
    assert_eq!(rules.len(), 2);
}

#[test]
fn named_rules_stay_apart_from_unnamed_ones() {
    let perms = Permissions::new()
        .rule("", "configmaps", ["list"])
        .named_rule("", "configmaps", ["settings"], ["get", "update"]);
    let rules = perms.policy_rules();
    assert_eq!(rules.len(), 2);
    let named = rules
        .iter()
        .find(|r| r.resource_names.is_some())
        .expect("a named rule");
    assert_eq!(
        named.resource_names.as_deref(),
        Some(&["settings".to_string()][..])
    );
    assert_eq!(named.verbs, ["get", "update"]);
}

#[test]
fn events_and_leases() {
    let perms = Permissions::new().events().leases();
    assert!(perms.allows("events.k8s.io", "events", "create"));
    assert!(perms.allows("events.k8s.io", "events", "patch"));
    assert!(!perms.allows("", "events", "create"));
    let lease_group = Lease::group(&()).into_owned();
    assert_eq!(lease_group, "coordination.k8s.io");
    for v in ["get", "create", "update"] {
        assert!(perms.allows(&lease_group, "leases", v), "{v}");
    }
    assert!(!perms.allows(&lease_group, "leases", "delete"));
}

#[test]
fn output_does_not_depend_on_declaration_order() {
    let a = Permissions::new()
        .primary::<ConfigMap>()
        .owns::<Deployment>()
        .watches::<Secret>()
        .events()
        .leases()
        .rule("", "pods", ["get"]);
    let b = Permissions::new()
        .rule("", "pods", ["get"])
        .leases()
        .events()
        .watches::<Secret>()
        .owns::<Deployment>()
        .primary::<ConfigMap>();
    assert_eq!(a, b);
    assert_eq!(
        serde_saphyr::to_string(&a.cluster_role("x")).unwrap(),
        serde_saphyr::to_string(&b.cluster_role("x")).unwrap()
    );
    let merged = Permissions::new()
        .primary::<ConfigMap>()
        .merge(Permissions::new().owns::<Deployment>());
    assert!(merged.allows("apps", "deployments", "delete"));
}

#[test]
fn role_is_namespaced_and_json_round_trips() {
    let role = Permissions::new().watches::<Secret>().role("r", "team-a");
    assert_eq!(role.metadata.namespace.as_deref(), Some("team-a"));
    let json = serde_json::to_string_pretty(&role).unwrap();
    let back: Role = serde_json::from_str(&json).unwrap();
    assert_eq!(back, role);
    assert!(json.contains("\"kind\": \"Role\""));
}

#[test]
fn wildcard_verb_allows_everything() {
    let perms = Permissions::new().rule("", "pods", ["*"]);
    assert!(perms.allows("", "pods", "delete"));
    assert!(Permissions::new().is_empty());
}

/// The manifest for a typical controller, checked in. Regenerate with
/// `UPDATE_GOLDEN=1 cargo test -p controller-runtime --lib rbac::`.
#[test]
fn golden_cluster_role() {
    let role = Permissions::new()
        .primary::<ConfigMap>()
        .owns::<Deployment>()
        .watches::<Secret>()
        .events()
        .leases()
        .rule("", "pods", ["get", "list"])
        .cluster_role("configmap-controller");
    let yaml = serde_saphyr::to_string(&role).unwrap();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/rbac/testdata/cluster_role.yaml"
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &yaml).unwrap();
    }
    let golden = std::fs::read_to_string(path).unwrap();
    assert_eq!(yaml, golden, "regenerate with UPDATE_GOLDEN=1");
}

/// Every resource the rules of `rules` name.
fn resources(rules: &[PolicyRule]) -> Vec<String> {
    rules
        .iter()
        .flat_map(|r| r.resources.clone().unwrap_or_default())
        .collect()
}

/// A controller confined to namespaces that also needs cluster-scoped
/// resources: a typed one (Namespace), built-in ones by name (TokenReviews,
/// a webhook configuration's `caBundle`), a marked custom one.
fn mixed() -> Permissions {
    use k8s_openapi::api::core::v1::Namespace;
    Permissions::new()
        .primary::<ConfigMap>()
        .owns::<Secret>()
        .watches::<Namespace>()
        .events()
        .secure_metrics()
        .named_rule(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            ["hooks"],
            ["get", "patch"],
        )
        .rule("example.com", "clusterwidgets/status", ["update"])
        .cluster_scoped("example.com", "clusterwidgets")
        .rule("example.com", "widgets", ["get"])
}

#[test]
fn a_role_never_holds_a_cluster_scoped_rule() {
    let role = mixed().role("c", "team-a");
    let in_role = resources(role.rules.as_deref().unwrap_or_default());
    for cluster in [
        "namespaces",
        "tokenreviews",
        "subjectaccessreviews",
        "validatingwebhookconfigurations",
        "clusterwidgets/status",
    ] {
        assert!(
            !in_role.contains(&cluster.to_string()),
            "{cluster} in a Role: {in_role:?}"
        );
    }
    for namespaced in [
        "configmaps",
        "configmaps/status",
        "configmaps/finalizers",
        "secrets",
        "events",
        "widgets",
    ] {
        assert!(
            in_role.contains(&namespaced.to_string()),
            "{namespaced} missing from the Role: {in_role:?}"
        );
    }
}

#[test]
fn namespaced_and_cluster_scoped_rules_split_the_whole() {
    let perms = mixed();
    let (ns, cluster) = (perms.namespaced_rules(), perms.cluster_scoped_rules());
    let mut both = resources(&ns.policy_rules());
    both.extend(resources(&cluster.policy_rules()));
    both.sort();
    let mut all = resources(&perms.policy_rules());
    all.sort();
    assert_eq!(both, all, "each rule in exactly one part");
    assert_eq!(
        resources(&cluster.policy_rules()),
        [
            "namespaces",
            "validatingwebhookconfigurations",
            "tokenreviews",
            "subjectaccessreviews",
            "clusterwidgets/status",
        ]
    );
    // Names narrowing a cluster-scoped rule stay on it.
    let hooks = rule(
        &cluster.policy_rules(),
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    )
    .clone();
    assert_eq!(hooks.resource_names, Some(vec!["hooks".to_string()]));
    // A typed cluster-scoped kind is known by its Scope.
    let typed = Permissions::new().primary::<k8s_openapi::api::core::v1::Node>();
    assert!(typed.namespaced_rules().is_empty());
    assert!(
        typed
            .cluster_scoped_rules()
            .allows("", "nodes/status", "update")
    );
}

#[test]
fn several_namespaces_get_a_role_each_and_one_cluster_role() {
    let scoped = mixed().for_namespaces("c", ["team-b", " team-a ", "", "team-b"]);
    let namespaces: Vec<_> = scoped
        .roles
        .iter()
        .map(|r| r.metadata.namespace.clone().unwrap_or_default())
        .collect();
    assert_eq!(namespaces, ["team-b", "team-a"], "trimmed, deduplicated");
    assert!(
        scoped
            .roles
            .iter()
            .all(|r| r.rules == mixed().role("c", "x").rules)
    );
    let cluster = scoped.cluster_role.clone().unwrap();
    assert_eq!(cluster.metadata.name.as_deref(), Some("c"));
    assert_eq!(
        cluster.rules,
        Some(mixed().cluster_scoped_rules().policy_rules())
    );
    let bindings = scoped.bindings("system", "mgr");
    assert_eq!(bindings.role_bindings.len(), 2);
    for (binding, role) in bindings.role_bindings.iter().zip(&scoped.roles) {
        assert_eq!(binding.metadata.namespace, role.metadata.namespace);
        assert_eq!(binding.role_ref.kind, "Role");
    }
    assert_eq!(
        bindings.cluster_role_binding.unwrap().role_ref.kind,
        "ClusterRole"
    );

    // Every namespace: one ClusterRole of every rule.
    let everywhere = mixed().for_namespaces("c", [""]);
    assert!(everywhere.roles.is_empty());
    assert_eq!(everywhere.cluster_role, Some(mixed().cluster_role("c")));
    // Only namespaced rules: no ClusterRole.
    let plain = Permissions::new()
        .primary::<ConfigMap>()
        .for_namespaces("c", ["a"]);
    assert_eq!(plain.roles.len(), 1);
    assert!(plain.cluster_role.is_none());
}
