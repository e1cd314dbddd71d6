//! The sample-controller's webhooks: a defaulter (`spec.replicas` defaults
//! to 1), a validator (`spec.deploymentName` must be a DNS-1123 label,
//! refused with a field cause; a warning above 10 replicas) and the
//! v1alpha1 <-> v1 conversion, with what installs them: the webhook
//! configurations, the CRD with its conversion webhook, and the manager's
//! [`WebhookOptions`] (certificates self-managed in the Secret
//! `foo-webhook-service-cert`, their CA written into the configurations'
//! and the CRD's `caBundle`s).
//!
//! Each served version has its own admission webhook (`matchPolicy: Exact`)
//! rather than one for the hub with `matchPolicy: Equivalent`: envtest sends
//! a webhook the object in the version it was written in, where
//! kube-apiserver would convert it to the webhook's version first, so a
//! v1-only webhook would be sent v1alpha1 objects it cannot decode. With
//! one webhook per version both servers behave the same.
//!
//! ```
//! use informer_examples::sample::webhooks;
//! let crd = webhooks::crd("default")?;
//! assert_eq!(crd.spec.conversion.unwrap().strategy, "Webhook");
//! let validating = webhooks::validating_configuration("default");
//! assert_eq!(validating.webhooks.unwrap().len(), 2); // v1 and v1alpha1
//! # Ok::<(), controller_runtime::crd::CrdError>(())
//! ```

#![allow(clippy::disallowed_names)]

use controller_runtime::crd::{CrdError, merge_versions};
use controller_runtime::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use controller_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use controller_runtime::kube_client::Resource;
use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::webhook::{
    AdmissionContext, CONVERT_PATH, Conversion, Defaulter, Denial, Operation, Validator, Warnings,
    WebhookOptions, mutate_path, validate_path,
};

use super::{Ledger, v1, v1alpha1};

/// The Service the API server calls the webhooks through.
pub const SERVICE: &str = "foo-webhook-service";
/// The Secret the self-managed certificates are kept in (`<service>-cert`).
pub const CERT_SECRET: &str = "foo-webhook-service-cert";
/// The ValidatingWebhookConfiguration.
pub const VALIDATING: &str = "foo-validating-webhook-configuration";
/// The MutatingWebhookConfiguration.
pub const MUTATING: &str = "foo-mutating-webhook-configuration";
/// The Foo CRD, whose conversion webhook is the manager's `/convert`.
pub const CRD: &str = "foos.samplecontroller.k8s.io";
/// More replicas than this draws a warning.
pub const MANY_REPLICAS: i32 = 10;

/// Sets `spec.replicas` to 1 when absent, in every version.
#[derive(Debug, Clone, Copy, Default)]
pub struct FooDefaulter;

impl Defaulter<v1::Foo> for FooDefaulter {
    async fn default(&self, foo: &mut v1::Foo, _: &AdmissionContext) -> Result<(), Denial> {
        foo.spec.replicas.get_or_insert(1);
        Ok(())
    }
}

impl Defaulter<v1alpha1::Foo> for FooDefaulter {
    async fn default(&self, foo: &mut v1alpha1::Foo, _: &AdmissionContext) -> Result<(), Denial> {
        foo.spec.replicas.get_or_insert(1);
        Ok(())
    }
}

/// Whether `name` is a DNS-1123 label (what a Deployment's name must be):
/// 1 to 63 lower-case letters, digits and `-`, starting and ending with a
/// letter or digit.
///
/// ```
/// use informer_examples::sample::webhooks::is_dns1123_label;
/// assert!(is_dns1123_label("web-1"));
/// assert!(!is_dns1123_label("Web_1"));
/// assert!(!is_dns1123_label("-web"));
/// assert!(!is_dns1123_label(""));
/// ```
pub fn is_dns1123_label(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&name.len())
        && name.chars().all(|c| ok(c) || c == '-')
        && name.starts_with(ok)
        && name.ends_with(ok)
}

/// The validator's rules on a spec, `field` naming the deployment field as
/// the version spells it.
fn check(field: &str, deployment: &str, replicas: Option<i32>) -> Result<Warnings, Denial> {
    if !is_dns1123_label(deployment) {
        // Worded as built-in validation words it: kubectl prints the cause
        // as `The Foo "x" is invalid: <field>: <cause>`.
        let cause = format!(
            "Invalid value: {deployment:?}: a lowercase RFC 1123 label must consist of lower \
             case alphanumeric characters or '-', start and end with an alphanumeric \
             character, and be at most 63 characters"
        );
        return Err(Denial::new(format!("{field}: {cause}")).field(field, cause));
    }
    Ok(match replicas {
        Some(n) if n > MANY_REPLICAS => vec![format!(
            "spec.replicas: {n} replicas is more than {MANY_REPLICAS}; is this intended?"
        )],
        _ => Vec::new(),
    })
}

/// Refuses a Foo whose Deployment name is not a DNS-1123 label, warns above
/// 10 replicas. Denials and dry runs are written to the [`Ledger`].
#[derive(Debug, Clone, Default)]
pub struct FooValidator {
    ledger: Ledger,
}

impl FooValidator {
    /// A validator recording its denials and dry runs in `ledger`.
    pub fn new(ledger: Ledger) -> Self {
        FooValidator { ledger }
    }

    fn review(
        &self,
        ctx: &AdmissionContext,
        verdict: Result<Warnings, Denial>,
    ) -> Result<Warnings, Denial> {
        let op = match ctx.operation {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
            Operation::Connect => "connect",
        };
        let dry = if ctx.dry_run { "dry-run " } else { "" };
        match &verdict {
            Err(denial) => self.ledger.record(format!(
                "webhook: denied {dry}{op} of foo/{}: {}",
                ctx.name,
                denial.message()
            )),
            Ok(_) if ctx.dry_run => self.ledger.record(format!(
                "webhook: allowed dry-run {op} of foo/{} (nothing is persisted)",
                ctx.name
            )),
            Ok(_) => {}
        }
        verdict
    }
}

impl Validator<v1::Foo> for FooValidator {
    async fn validate_create(
        &self,
        foo: &v1::Foo,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        let s = &foo.spec;
        self.review(
            ctx,
            check("spec.deploymentName", &s.deployment_name, s.replicas),
        )
    }

    async fn validate_update(
        &self,
        _old: &v1::Foo,
        new: &v1::Foo,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        // A Foo being deleted must lose its finalizer whatever its spec.
        if new.metadata.deletion_timestamp.is_some() {
            return Ok(Vec::new());
        }
        self.validate_create(new, ctx).await
    }
}

impl Validator<v1alpha1::Foo> for FooValidator {
    async fn validate_create(
        &self,
        foo: &v1alpha1::Foo,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        let s = &foo.spec;
        self.review(ctx, check("spec.deployment", &s.deployment, s.replicas))
    }

    async fn validate_update(
        &self,
        _old: &v1alpha1::Foo,
        new: &v1alpha1::Foo,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        if new.metadata.deletion_timestamp.is_some() {
            return Ok(Vec::new());
        }
        self.validate_create(new, ctx).await
    }
}

/// v1alpha1 <-> v1 through the hub v1.
pub fn conversion() -> Conversion<v1::Foo> {
    Conversion::<v1::Foo>::new().spoke::<v1alpha1::Foo>()
}

/// Registers the defaulter and validator of both versions and the
/// conversion with `mgr` (built with [`options`]); denials and dry runs go
/// to `ledger`.
pub fn register(mgr: &Manager, ledger: Ledger) -> Result<(), ManagerError> {
    mgr.webhook::<v1::Foo>()
        .defaulter(FooDefaulter)?
        .validator(FooValidator::new(ledger.clone()))?;
    mgr.webhook::<v1alpha1::Foo>()
        .defaulter(FooDefaulter)?
        .validator(FooValidator::new(ledger))?;
    mgr.webhook_conversion(conversion())
}

/// The manager's webhook server: port 9443, certificates self-managed in
/// `namespace`'s Secret [`CERT_SECRET`] for the Service [`SERVICE`], their
/// CA written into [`VALIDATING`], [`MUTATING`] and the [`CRD`].
pub fn options(namespace: &str) -> WebhookOptions {
    WebhookOptions::self_managed(namespace, SERVICE)
        .validating_webhook(VALIDATING)
        .mutating_webhook(MUTATING)
        .crd(CRD)
}

fn client_config(namespace: &str, path: String) -> WebhookClientConfig {
    WebhookClientConfig {
        service: Some(ServiceReference {
            namespace: namespace.into(),
            name: SERVICE.into(),
            path: Some(path),
            port: Some(443),
        }),
        ..WebhookClientConfig::default()
    }
}

fn rules(version: &str) -> Option<Vec<RuleWithOperations>> {
    let strings = |s: &[&str]| Some(s.iter().map(|s| s.to_string()).collect());
    Some(vec![RuleWithOperations {
        api_groups: strings(&["samplecontroller.k8s.io"]),
        api_versions: strings(&[version]),
        operations: strings(&["CREATE", "UPDATE"]),
        resources: strings(&["foos"]),
        scope: Some("Namespaced".into()),
    }])
}

/// Both versions, each with its path and version.
fn versions() -> [(String, String, String); 2] {
    [
        (
            v1::Foo::version(&()).into_owned(),
            validate_path::<v1::Foo>(),
            mutate_path::<v1::Foo>(),
        ),
        (
            v1alpha1::Foo::version(&()).into_owned(),
            validate_path::<v1alpha1::Foo>(),
            mutate_path::<v1alpha1::Foo>(),
        ),
    ]
}

/// [`VALIDATING`]: one webhook per served version, calling the Service
/// [`SERVICE`] in `namespace` (no `caBundle`: the manager writes it).
pub fn validating_configuration(namespace: &str) -> ValidatingWebhookConfiguration {
    let webhooks = versions()
        .into_iter()
        .map(|(version, path, _)| ValidatingWebhook {
            name: format!("vfoo-{version}.samplecontroller.k8s.io"),
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(namespace, path),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Exact".into()),
            rules: rules(&version),
            side_effects: "None".into(),
            timeout_seconds: Some(10),
            ..ValidatingWebhook::default()
        })
        .collect();
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(VALIDATING.into()),
            ..ObjectMeta::default()
        },
        webhooks: Some(webhooks),
    }
}

/// [`MUTATING`]: one webhook per served version, calling the Service
/// [`SERVICE`] in `namespace` (no `caBundle`: the manager writes it).
pub fn mutating_configuration(namespace: &str) -> MutatingWebhookConfiguration {
    let webhooks = versions()
        .into_iter()
        .map(|(version, _, path)| MutatingWebhook {
            name: format!("mfoo-{version}.samplecontroller.k8s.io"),
            admission_review_versions: vec!["v1".into()],
            client_config: client_config(namespace, path),
            failure_policy: Some("Fail".into()),
            match_policy: Some("Exact".into()),
            rules: rules(&version),
            side_effects: "None".into(),
            timeout_seconds: Some(10),
            ..MutatingWebhook::default()
        })
        .collect();
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(MUTATING.into()),
            ..ObjectMeta::default()
        },
        webhooks: Some(webhooks),
    }
}

/// The Foo CRD: v1alpha1 (served, deprecated) and v1 (storage), converted by
/// the webhook at [`CONVERT_PATH`] of the Service [`SERVICE`] in
/// `namespace` (no `caBundle`: the manager writes it).
pub fn crd(namespace: &str) -> Result<apiext::CustomResourceDefinition, CrdError> {
    let mut crd = merge_versions(vec![v1alpha1::Foo::crd()?, v1::Foo::crd()?])?;
    crd.spec.conversion = Some(apiext::CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(apiext::WebhookConversion {
            client_config: Some(apiext::WebhookClientConfig {
                service: Some(apiext::ServiceReference {
                    namespace: namespace.into(),
                    name: SERVICE.into(),
                    path: Some(CONVERT_PATH.into()),
                    port: Some(443),
                }),
                ..apiext::WebhookClientConfig::default()
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    });
    Ok(crd)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_bad_name_is_refused_with_a_field_cause_and_many_replicas_warn() {
        let denial = check("spec.deploymentName", "Web_1", Some(1)).unwrap_err();
        assert_eq!(denial.causes()[0].field, "spec.deploymentName");
        assert!(denial.message().contains("\"Web_1\""), "{denial:?}");
        assert_eq!(
            check("spec.deploymentName", "web", Some(10)).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            check("spec.deploymentName", "web", Some(11)).unwrap().len(),
            1
        );
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }
}
