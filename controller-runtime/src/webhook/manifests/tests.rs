use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::json;

use super::*;
use crate::crd::{CrdVersionInfo, merge_versions, version_crd};

/// A custom kind with a CRD (`widgets.demo.example.com`), written by hand:
/// the derive's paths do not resolve inside this crate.
struct Widget {
    metadata: ObjectMeta,
}

impl k8s_openapi::Resource for Widget {
    const API_VERSION: &'static str = "demo.example.com/v1";
    const GROUP: &'static str = "demo.example.com";
    const KIND: &'static str = "Widget";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "widgets";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Widget {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn all() -> WebhookDeclaration {
    WebhookDeclaration::new()
        .defaulting()
        .validating()
        .conversion()
        .service("demo-webhook-service")
}

fn widget_crd(versions: &[(&'static str, bool)]) -> apiext::CustomResourceDefinition {
    let crds = versions
        .iter()
        .map(|(v, storage)| {
            let mut info = CrdVersionInfo::new("demo.example.com", v, "Widget", "widgets");
            info.storage = *storage;
            version_crd(&info, |g| g.subschema_for::<String>(), None, None).unwrap()
        })
        .collect();
    merge_versions(crds).unwrap()
}

#[test]
fn the_validating_configuration_points_at_the_served_path() {
    let hooks = WebhookManifests::for_kind::<Widget>(
        "demo-system",
        all().failure_policy(FailurePolicy::Ignore),
    )
    .namespace_selector(LabelSelector {
        match_labels: Some([("webhooks".to_owned(), "on".to_owned())].into()),
        ..LabelSelector::default()
    });
    let config = serde_json::to_value(hooks.validating_configuration().unwrap()).unwrap();
    assert_eq!(
        config,
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "demo-webhook-service-validating"},
            "webhooks": [{
                "name": "validate-v1.widgets.demo.example.com",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {
                    "namespace": "demo-system", "name": "demo-webhook-service",
                    "path": "/validate-demo-example-com-v1-widget", "port": 443,
                }},
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"webhooks": "on"}},
                "rules": [{
                    "apiGroups": ["demo.example.com"], "apiVersions": ["v1"],
                    "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["widgets"],
                    "scope": "Namespaced",
                }],
                "sideEffects": "None",
                "timeoutSeconds": 10,
            }],
        })
    );
    assert_eq!(
        config["webhooks"][0]["clientConfig"]["service"]["path"],
        validate_path::<Widget>()
    );
}

#[test]
fn the_mutating_configuration_covers_create_and_update() {
    let hooks =
        WebhookManifests::for_kind::<ConfigMap>("system", WebhookDeclaration::new().defaulting())
            .object_selector(LabelSelector::default());
    assert!(hooks.validating_configuration().is_none());
    let config = hooks.mutating_configuration().unwrap();
    assert_eq!(
        config.metadata.name.as_deref(),
        Some("webhook-service-mutating")
    );
    let hook = &config.webhooks.as_ref().unwrap()[0];
    assert_eq!(hook.name, "mutate-v1.configmaps.core");
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    let rule = &hook.rules.as_ref().unwrap()[0];
    assert_eq!(rule.api_groups.as_deref(), Some(&[String::new()][..]));
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
    );
    let path = hook.client_config.service.as_ref().unwrap().path.as_deref();
    assert_eq!(path, Some("/mutate--v1-configmap"));
    assert!(hook.object_selector.is_some() && hook.namespace_selector.is_none());
}

/// A cluster-scoped custom kind (`gadgets.demo.example.com`).
struct Gadget {
    metadata: ObjectMeta,
}

impl k8s_openapi::Resource for Gadget {
    const API_VERSION: &'static str = "demo.example.com/v1";
    const GROUP: &'static str = "demo.example.com";
    const KIND: &'static str = "Gadget";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "gadgets";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for Gadget {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The validating rules' scopes, the mutating rules' scopes, and every
/// admission webhook's timeout (validating ones first).
type Observed = (Vec<Option<String>>, Vec<Option<String>>, Vec<Option<i32>>);

fn scopes_and_timeouts(hooks: &WebhookManifests) -> Observed {
    let validating = hooks.validating_configuration().unwrap().webhooks.unwrap();
    let mutating = hooks.mutating_configuration().unwrap().webhooks.unwrap();
    let scopes = |rules: Vec<Option<Vec<RuleWithOperations>>>| {
        rules
            .into_iter()
            .flat_map(|r| r.unwrap())
            .map(|r| r.scope)
            .collect::<Vec<_>>()
    };
    let mut timeouts: Vec<Option<i32>> = validating.iter().map(|h| h.timeout_seconds).collect();
    timeouts.extend(mutating.iter().map(|h| h.timeout_seconds));
    (
        scopes(validating.into_iter().map(|h| h.rules).collect()),
        scopes(mutating.into_iter().map(|h| h.rules).collect()),
        timeouts,
    )
}

#[test]
fn each_rule_is_scoped_to_its_kind() {
    let both = WebhookDeclaration::new().validating().defaulting();
    let hooks = WebhookManifests::for_kind::<Widget>("system", both)
        .merge(WebhookManifests::for_kind::<Gadget>("system", both))
        .unwrap()
        .merge(WebhookManifests::for_kind::<
            k8s_openapi::api::core::v1::Namespace,
        >("system", both))
        .unwrap();
    let (validating, mutating, _) = scopes_and_timeouts(&hooks);
    let want = [Some("Namespaced"), Some("Cluster"), Some("Cluster")].map(|s| s.map(String::from));
    assert_eq!(validating, want);
    assert_eq!(mutating, want);
}

#[test]
fn timeout_seconds_is_written_on_every_admission_webhook() {
    let both = WebhookDeclaration::new().validating().defaulting();
    let default = WebhookManifests::for_kind::<Widget>("system", both);
    assert_eq!(scopes_and_timeouts(&default).2, [Some(10), Some(10)]);
    let declared = WebhookManifests::for_kind::<Widget>("system", both.timeout_seconds(3))
        .merge(WebhookManifests::for_kind::<Gadget>(
            "system",
            both.timeout_seconds(30),
        ))
        .unwrap();
    assert_eq!(
        scopes_and_timeouts(&declared).2,
        [Some(3), Some(30), Some(3), Some(30)]
    );
}

#[test]
fn timeouts_the_api_server_refuses_cannot_be_declared() {
    for bad in [0, 31, 255] {
        let built = std::panic::catch_unwind(|| WebhookDeclaration::new().timeout_seconds(bad));
        assert!(built.is_err(), "{bad} accepted");
    }
    assert_eq!(
        WebhookDeclaration::new().timeout_seconds(1).timeout_seconds,
        1
    );
}

#[test]
fn the_service_forwards_443_to_the_server_port() {
    let hooks =
        WebhookManifests::for_kind::<ConfigMap>("system", WebhookDeclaration::new().validating())
            .target_port(9555);
    let svc = serde_json::to_value(hooks.service([("app", "demo")])).unwrap();
    assert_eq!(
        svc,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "webhook-service", "namespace": "system"},
            "spec": {
                "ports": [{"name": "webhook", "port": 443, "protocol": "TCP", "targetPort": 9555}],
                "selector": {"app": "demo"},
            },
        })
    );
    let default =
        WebhookManifests::for_kind::<ConfigMap>("system", WebhookDeclaration::new().validating());
    let port = &default.service([("a", "b")]).spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.target_port, Some(IntOrString::Int(9443)));
}

#[test]
fn a_declared_multi_version_crd_converts_by_webhook() {
    let hooks = WebhookManifests::for_kind::<Widget>("demo-system", all());
    let crd = hooks
        .conversion_crd(widget_crd(&[("v1alpha1", false), ("v1", true)]))
        .unwrap();
    assert_eq!(
        serde_json::to_value(crd.spec.conversion).unwrap(),
        json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": {
                    "namespace": "demo-system", "name": "demo-webhook-service",
                    "path": "/convert", "port": 443,
                }},
                "conversionReviewVersions": ["v1"],
            },
        })
    );
    assert_eq!(hooks.conversion_crd_names(), ["widgets.demo.example.com"]);
}

#[test]
fn conversion_of_a_single_version_or_undeclared_crd_is_refused() {
    let hooks = WebhookManifests::for_kind::<Widget>("demo-system", all());
    let err = hooks
        .conversion_crd(widget_crd(&[("v1", true)]))
        .unwrap_err();
    assert!(matches!(err, ManifestError::SingleVersion { .. }), "{err}");
    assert!(err.to_string().contains("merge_versions"), "{err}");
    let no_conversion =
        WebhookManifests::for_kind::<Widget>("demo-system", WebhookDeclaration::new().validating());
    let err = no_conversion
        .conversion_crd(widget_crd(&[("v1alpha1", false), ("v1", true)]))
        .unwrap_err();
    assert!(matches!(err, ManifestError::NotDeclared(ref n) if n == "widgets.demo.example.com"));
}

#[test]
fn permissions_match_what_the_certificate_keeper_calls() {
    let perms = WebhookManifests::for_kind::<Widget>("demo-system", all()).permissions();
    let rules = serde_json::to_value(perms.policy_rules()).unwrap();
    assert_eq!(
        rules,
        json!([
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["demo-webhook-service-cert"], "verbs": ["get", "watch", "update"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
             "resourceNames": ["demo-webhook-service-mutating"], "verbs": ["get", "patch"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
             "resourceNames": ["demo-webhook-service-validating"], "verbs": ["get", "patch"]},
            {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
             "resourceNames": ["widgets.demo.example.com"], "verbs": ["get", "patch"]},
        ])
    );
    // Only what is declared.
    let only = WebhookDeclaration::new()
        .defaulting()
        .permissions::<ConfigMap>();
    assert!(!only.allows(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "get"
    ));
    assert!(!only.allows("apiextensions.k8s.io", "customresourcedefinitions", "get"));
}

#[test]
fn manifests_of_several_kinds_share_one_service() {
    let a = WebhookManifests::for_kind::<Widget>("system", WebhookDeclaration::new().validating());
    let b = WebhookManifests::for_kind::<ConfigMap>(
        "system",
        WebhookDeclaration::new().validating().defaulting(),
    );
    let both = a.clone().merge(b).unwrap();
    assert_eq!(
        both.validating_configuration()
            .unwrap()
            .webhooks
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        both.mutating_configuration()
            .unwrap()
            .webhooks
            .unwrap()
            .len(),
        1
    );
    let other = WebhookManifests::for_kind::<ConfigMap>(
        "system",
        WebhookDeclaration::new().service("other"),
    );
    assert!(matches!(
        a.clone().merge(other),
        Err(ManifestError::Services(..))
    ));
    assert!(matches!(
        a.clone().merge(a),
        Err(ManifestError::DuplicateKind(_))
    ));
}

#[test]
fn options_name_the_same_objects() {
    let hooks = WebhookManifests::for_kind::<Widget>("demo-system", all());
    let debug = format!("{:?}", hooks.options());
    for name in [
        "demo-webhook-service-validating",
        "demo-webhook-service-mutating",
        "widgets.demo.example.com",
        "demo-system",
    ] {
        assert!(debug.contains(name), "{name} missing from {debug}");
    }
}

#[test]
fn certificates_from_a_directory_need_no_rbac_and_are_served_from_it() {
    let hooks = WebhookManifests::for_kind::<Widget>("demo-system", all().cert_dir("/certs"));
    assert!(
        hooks.permissions().is_empty(),
        "cert-dir mode manages no Secret and writes no caBundle: {:?}",
        hooks.permissions().policy_rules()
    );
    assert!(all().cert_dir("/certs").permissions::<Widget>().is_empty());
    let debug = format!("{:?}", hooks.options());
    assert!(debug.contains("Dir(\"/certs\")"), "{debug}");
    assert!(
        !debug.contains("demo-webhook-service-validating"),
        "{debug}"
    );
    // One webhook server, one certificate source.
    let self_managed = WebhookManifests::for_kind::<ConfigMap>("demo-system", all().validating());
    assert!(matches!(
        hooks.merge(self_managed),
        Err(ManifestError::CertSources(Some(_), None))
    ));
}
