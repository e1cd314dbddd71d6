//! The sample-controller's webhooks: a defaulter (`spec.replicas` defaults
//! to 1), a validator (`spec.deploymentName` must be a DNS-1123 label,
//! refused with a field cause; a warning above 10 replicas) and the
//! v1alpha1 <-> v1 conversion, and [`register`], which hands them to the
//! manager.
//!
//! What installs them is not written here: `webhooks(defaulting,
//! validating, conversion, service = "foo-webhook-service")` in
//! [`FooReconciler`]'s `#[controller(...)]` declares them, and
//! `FooReconciler::webhooks(namespace)` builds the webhook configurations,
//! the Service, the CRD's conversion stanza (see
//! [`super::manifests::crd`]) and the manager's
//! [`WebhookOptions`](controller_runtime::webhook::WebhookOptions)
//! (certificates self-managed in the Secret `foo-webhook-service-cert`,
//! their CA written into the configurations' and the CRD's `caBundle`s).
//!
//! The admission webhooks are declared for the hub, v1, with `matchPolicy:
//! Equivalent`: a Foo written as v1alpha1 is converted to v1 (by the
//! conversion webhook) before the defaulter and the validator see it, and
//! the defaulter's patch is converted back, so one handler per webhook
//! serves both versions, and a denial names the field as v1 spells it.
//!
//! ```
//! use informer_examples::sample::{FooReconciler, webhooks};
//! let hooks = FooReconciler::webhooks("default");
//! assert_eq!(hooks.service_name(), webhooks::SERVICE);
//! let validating = hooks.validating_configuration().unwrap();
//! assert_eq!(validating.webhooks.unwrap().len(), 1); // v1, matching v1alpha1 too
//! ```

#![allow(clippy::disallowed_names)]

use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::webhook::{
    AdmissionContext, Conversion, Defaulter, Denial, Operation, Validator, Warnings,
};

use super::{FooReconciler, Ledger, v1, v1alpha1};

/// The Service the API server calls the webhooks through, as declared on
/// [`FooReconciler`].
pub const SERVICE: &str = FooReconciler::WEBHOOKS.service;
/// More replicas than this draws a warning.
pub const MANY_REPLICAS: i32 = 10;

/// Sets `spec.replicas` to 1 when absent (a v1alpha1 Foo reaches it as v1).
#[derive(Debug, Clone, Copy, Default)]
pub struct FooDefaulter;

impl Defaulter<v1::Foo> for FooDefaulter {
    async fn default(&self, foo: &mut v1::Foo, _: &AdmissionContext) -> Result<(), Denial> {
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

/// The validator's rules on a spec.
fn check(spec: &v1::FooSpec) -> Result<Warnings, Denial> {
    const FIELD: &str = "spec.deploymentName";
    let deployment = &spec.deployment_name;
    if !is_dns1123_label(deployment) {
        // Worded as built-in validation words it: kubectl prints the cause
        // as `The Foo "x" is invalid: <field>: <cause>`.
        let cause = format!(
            "Invalid value: {deployment:?}: a lowercase RFC 1123 label must consist of lower \
             case alphanumeric characters or '-', start and end with an alphanumeric \
             character, and be at most 63 characters"
        );
        return Err(Denial::new(format!("{FIELD}: {cause}")).field(FIELD, cause));
    }
    Ok(match spec.replicas {
        Some(n) if n > MANY_REPLICAS => vec![format!(
            "spec.replicas: {n} replicas is more than {MANY_REPLICAS}; is this intended?"
        )],
        _ => Vec::new(),
    })
}

/// Refuses a Foo whose Deployment name is not a DNS-1123 label, warns above
/// 10 replicas (a v1alpha1 Foo reaches it as v1). Denials and dry runs are
/// written to the [`Ledger`].
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
        self.review(ctx, check(&foo.spec))
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

/// v1alpha1 <-> v1 through the hub v1.
pub fn conversion() -> Conversion<v1::Foo> {
    Conversion::<v1::Foo>::new().spoke::<v1alpha1::Foo>()
}

/// Registers the defaulter, the validator and the conversion with `mgr`
/// (built with `FooReconciler::webhooks(namespace).options()`); denials
/// and dry runs go to `ledger`.
pub fn register(mgr: &Manager, ledger: Ledger) -> Result<(), ManagerError> {
    mgr.webhook::<v1::Foo>()
        .defaulter(FooDefaulter)?
        .validator(FooValidator::new(ledger))?;
    mgr.webhook_conversion(conversion())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(deployment: &str, replicas: i32) -> v1::FooSpec {
        v1::FooSpec {
            deployment_name: deployment.into(),
            replicas: Some(replicas),
        }
    }

    #[test]
    fn a_bad_name_is_refused_with_a_field_cause_and_many_replicas_warn() {
        let denial = check(&spec("Web_1", 1)).unwrap_err();
        assert_eq!(denial.causes()[0].field, "spec.deploymentName");
        assert!(denial.message().contains("\"Web_1\""), "{denial:?}");
        assert_eq!(check(&spec("web", 10)).unwrap(), Vec::<String>::new());
        assert_eq!(check(&spec("web", 11)).unwrap().len(), 1);
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }
}
