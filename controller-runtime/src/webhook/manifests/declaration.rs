//! The declaration `#[controller(webhooks(...))]` writes for one kind:
//! which webhooks, their failure policy and timeout, the Service and where
//! the certificates come from. [`WebhookManifests`] turns it into objects.

use kube_client::core::Resource;

use super::{DEFAULT_SERVICE, WebhookManifests};
use crate::object::ScopeInfo;
use crate::rbac::Permissions;

/// The `timeoutSeconds` of a declaration that names none: the API
/// server's default, written out.
pub const DEFAULT_TIMEOUT_SECONDS: u8 = 10;

/// What the API server does when the webhook cannot be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Refuse the request (the default, as the API server's).
    #[default]
    Fail,
    /// Let the request through unchecked.
    Ignore,
}

impl FailurePolicy {
    /// `Fail` or `Ignore`, as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// What `#[controller(webhooks(...))]` declares for the reconciled kind:
/// which webhooks, their failure policy and timeout, and the Service they
/// sit behind.
///
/// ```
/// use controller_runtime::webhook::{FailurePolicy, WebhookDeclaration};
/// let decl = WebhookDeclaration::new().validating().failure_policy(FailurePolicy::Ignore);
/// assert!(decl.validating && !decl.defaulting);
/// assert_eq!(decl.service, "webhook-service");
/// assert_eq!(decl.timeout_seconds, 10);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct WebhookDeclaration {
    /// A defaulter, in the MutatingWebhookConfiguration.
    pub defaulting: bool,
    /// A validator, in the ValidatingWebhookConfiguration.
    pub validating: bool,
    /// Conversion between the kind's versions (its CRD converts by webhook).
    pub conversion: bool,
    /// For both admission webhooks.
    pub failure_policy: FailurePolicy,
    /// For both admission webhooks: how long the API server waits for an
    /// answer before the failure policy applies (1 to 30).
    pub timeout_seconds: u8,
    /// The manager's webhook Service.
    pub service: &'static str,
    /// Certificates mounted from this directory (`tls.crt`, `tls.key`)
    /// instead of self-managed ones: no RBAC for them, and
    /// [`WebhookManifests::options`] reads the directory.
    pub cert_dir: Option<&'static str>,
}

impl Default for WebhookDeclaration {
    fn default() -> Self {
        Self::new()
    }
}

impl WebhookDeclaration {
    /// Nothing declared yet, behind [`DEFAULT_SERVICE`], failing closed
    /// after [`DEFAULT_TIMEOUT_SECONDS`].
    pub const fn new() -> Self {
        WebhookDeclaration {
            defaulting: false,
            validating: false,
            conversion: false,
            failure_policy: FailurePolicy::Fail,
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
            service: DEFAULT_SERVICE,
            cert_dir: None,
        }
    }

    /// With a defaulter.
    pub const fn defaulting(mut self) -> Self {
        self.defaulting = true;
        self
    }

    /// With a validator.
    pub const fn validating(mut self) -> Self {
        self.validating = true;
        self
    }

    /// With conversion.
    pub const fn conversion(mut self) -> Self {
        self.conversion = true;
        self
    }

    /// With this failure policy.
    pub const fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Waiting at most `seconds` for an answer.
    ///
    /// # Panics
    ///
    /// When `seconds` is outside 1 to 30, which the API server refuses; in a constant (as the derive writes it) that is
    /// a compile error.
    ///
    /// ```
    /// use controller_runtime::webhook::WebhookDeclaration;
    /// const DECL: WebhookDeclaration = WebhookDeclaration::new().validating().timeout_seconds(5);
    /// assert_eq!(DECL.timeout_seconds, 5);
    /// ```
    pub const fn timeout_seconds(mut self, seconds: u8) -> Self {
        assert!(
            matches!(seconds, 1..=30),
            "a webhook's timeoutSeconds must be between 1 and 30"
        );
        self.timeout_seconds = seconds;
        self
    }

    /// Behind this Service.
    pub const fn service(mut self, name: &'static str) -> Self {
        self.service = name;
        self
    }

    /// With certificates mounted in `dir` (cert-manager's mode) rather than
    /// self-managed: the manager neither keeps a Secret nor writes
    /// `caBundle`s, so the declaration asks no RBAC for them.
    ///
    /// ```
    /// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
    /// use controller_runtime::webhook::WebhookDeclaration;
    /// let decl = WebhookDeclaration::new().validating().cert_dir("/certs");
    /// assert!(decl.permissions::<ConfigMap>().is_empty());
    /// ```
    pub const fn cert_dir(mut self, dir: &'static str) -> Self {
        self.cert_dir = Some(dir);
        self
    }

    /// What the certificates of this declaration need for kind `K` (nothing
    /// with [`cert_dir`](Self::cert_dir)): see
    /// [`WebhookManifests::permissions`].
    ///
    /// ```
    /// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
    /// use controller_runtime::webhook::WebhookDeclaration;
    /// let perms = WebhookDeclaration::new().validating().permissions::<ConfigMap>();
    /// assert!(perms.allows("", "secrets", "create"));
    /// assert!(perms.allows("admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch"));
    /// assert!(!perms.allows("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch"));
    /// ```
    pub fn permissions<K: Resource<DynamicType = ()>>(&self) -> Permissions
    where
        K::Scope: ScopeInfo,
    {
        WebhookManifests::for_kind::<K>("", *self).permissions()
    }
}
