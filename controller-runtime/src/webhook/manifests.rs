//! The objects a manager's webhooks need in the cluster, built from one
//! declaration per kind: the Validating/MutatingWebhookConfigurations
//! pointing at the paths the server serves, the webhook Service, the
//! conversion stanza of a multi-version CRD, the RBAC rules the
//! self-managed certificates need, and the [`WebhookOptions`] naming the
//! same objects.
//!
//! Where the certificates come from is part of the declaration, so the
//! options and the RBAC agree: self-managed (the default) needs `get` and
//! `update` on the certificate Secret and `patch` on the configurations and
//! CRDs whose `caBundle` the manager writes; `cert_dir` (certificates
//! mounted from a directory, e.g. by cert-manager, which also injects the
//! CA) needs none of them, and [`WebhookManifests::permissions`] is then
//! empty. A manager built with [`WebhookOptions::self_managed`] by hand for
//! a `cert_dir` declaration lacks those rules: its certificate keeper fails
//! at start with 403 Forbidden rather than run with rules it does not use. `#[controller(webhooks(...))]` on `#[derive(Controller)]`
//! writes the declaration; everything here is plain code the derive calls.
//!
//! Names follow the Service (`<service>` below, `webhook-service` unless
//! declared): the configurations are `<service>-validating` and
//! `<service>-mutating`, the certificate Secret `<service>-cert` (as
//! [`SecretCerts`](crate::tls::SecretCerts) keeps it), webhooks are
//! `validate-<version>.<plural>.<group>` and `mutate-<version>.<plural>.<group>`
//! (`core` for the core group). Every webhook states its `timeoutSeconds`
//! (10 unless declared, the API server's own default, so the manifest says
//! what applies) and its rule is scoped to the kind: `Namespaced` for a
//! namespaced kind, `Cluster` for a cluster-scoped one.
//!
//! Part of layer 3: uses the RBAC and CRD building blocks, never the
//! manager.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_client::core::Resource;

use super::declared::Declared;
use super::options::WebhookOptions;
use super::server::{CONVERT_PATH, DEFAULT_PORT, mutate_path, validate_path};
use crate::object::ScopeInfo;
use crate::rbac::{Permissions, Verb};

mod declaration;
pub use declaration::{DEFAULT_TIMEOUT_SECONDS, FailurePolicy, WebhookDeclaration};

/// The Service name a declaration uses unless it names another.
pub const DEFAULT_SERVICE: &str = "webhook-service";

/// The port the webhook Service listens on (it forwards to the server's
/// 9443).
pub const SERVICE_PORT: i32 = 443;

/// Why the manifests could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// Two declarations name different Services; one manager has one.
    #[error(
        "one manager serves its webhooks behind one Service, but the declarations name `{0}` and `{1}`"
    )]
    Services(String, String),
    /// Two declarations get their certificates differently (`None`:
    /// self-managed); one manager has one webhook server.
    #[error(
        "one manager's webhook server has one certificate source, but the declarations say {0:?} and {1:?} (None: self-managed)"
    )]
    CertSources(Option<String>, Option<String>),
    /// One kind is declared twice.
    #[error("webhooks for {0} are declared twice")]
    DuplicateKind(String),
    /// A CRD was given for conversion that no declaration converts.
    #[error("no declaration has `conversion` for the CustomResourceDefinition `{0}`")]
    NotDeclared(String),
    /// Conversion was declared for a CRD with one version.
    #[error(
        "`conversion` is declared for `{crd}`, which has one version ({version}); a conversion webhook needs at least two: join the versions with `crd::merge_versions`"
    )]
    SingleVersion {
        /// The CRD's name.
        crd: String,
        /// Its only version.
        version: String,
    },
}

/// One kind's declaration, resolved against its type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KindHooks {
    group: String,
    version: String,
    plural: String,
    kind: String,
    namespaced: bool,
    validate_path: String,
    mutate_path: String,
    decl: WebhookDeclaration,
}

impl KindHooks {
    fn of<K: Resource<DynamicType = ()>>(decl: WebhookDeclaration) -> Self
    where
        K::Scope: ScopeInfo,
    {
        KindHooks {
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespaced: <K::Scope as ScopeInfo>::NAMESPACED,
            validate_path: validate_path::<K>(),
            mutate_path: mutate_path::<K>(),
            decl,
        }
    }

    fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// `<op>-<version>.<plural>.<group>`: unique per kind and version, a
    /// domain of at least three segments as the API server requires.
    fn webhook_name(&self, op: &str) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        format!("{op}-{}.{}.{group}", self.version, self.plural)
    }

    /// `group/version Kind`, `version Kind` for the core group.
    fn gvk(&self) -> String {
        if self.group.is_empty() {
            format!("{} {}", self.version, self.kind)
        } else {
            format!("{}/{} {}", self.group, self.version, self.kind)
        }
    }

    fn rule(&self, operations: &[&str]) -> RuleWithOperations {
        RuleWithOperations {
            api_groups: Some(vec![self.group.clone()]),
            api_versions: Some(vec![self.version.clone()]),
            resources: Some(vec![self.plural.clone()]),
            operations: Some(operations.iter().map(|o| (*o).to_owned()).collect()),
            scope: Some(
                if self.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }
                .into(),
            ),
        }
    }
}

/// The webhook manifests of one manager, from the declarations of the
/// kinds it serves webhooks for.
///
/// ```
/// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
/// use controller_runtime::webhook::{WebhookDeclaration, WebhookManifests};
///
/// let hooks = WebhookManifests::for_kind::<ConfigMap>(
///     "demo-system",
///     WebhookDeclaration::new().validating().service("demo-webhook-service"),
/// );
/// let config = hooks.validating_configuration().unwrap();
/// assert_eq!(config.metadata.name.as_deref(), Some("demo-webhook-service-validating"));
/// let hook = &config.webhooks.as_ref().unwrap()[0];
/// let service = hook.client_config.service.as_ref().unwrap();
/// assert_eq!(service.path.as_deref(), Some("/validate--v1-configmap"));
/// assert!(hooks.mutating_configuration().is_none());
/// let svc = hooks.service([("app", "demo")]);
/// assert_eq!(svc.metadata.name.as_deref(), Some("demo-webhook-service"));
/// // The options a manager is built with name the same objects.
/// let _options = hooks.options();
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct WebhookManifests {
    namespace: String,
    service: String,
    cert_dir: Option<String>,
    target_port: u16,
    kinds: Vec<KindHooks>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
}

impl WebhookManifests {
    /// The manifests for kind `K` as `decl` declares, the Service in
    /// `namespace`.
    pub fn for_kind<K: Resource<DynamicType = ()>>(
        namespace: impl Into<String>,
        decl: WebhookDeclaration,
    ) -> Self
    where
        K::Scope: ScopeInfo,
    {
        WebhookManifests {
            namespace: namespace.into(),
            service: decl.service.to_owned(),
            cert_dir: decl.cert_dir.map(str::to_owned),
            target_port: DEFAULT_PORT,
            kinds: vec![KindHooks::of::<K>(decl)],
            namespace_selector: None,
            object_selector: None,
        }
    }

    /// Also the kinds of `other` (another reconciler's declarations for
    /// the same manager). Refused when the Services or the certificate
    /// sources differ or a kind is declared twice.
    ///
    /// ```
    /// use controller_runtime::k8s_openapi::api::core::v1::{ConfigMap, Secret};
    /// use controller_runtime::webhook::{WebhookDeclaration, WebhookManifests};
    /// let a = WebhookManifests::for_kind::<ConfigMap>("system", WebhookDeclaration::new().validating());
    /// let b = WebhookManifests::for_kind::<Secret>("system", WebhookDeclaration::new().validating());
    /// let both = a.clone().merge(b).unwrap();
    /// assert_eq!(both.validating_configuration().unwrap().webhooks.unwrap().len(), 2);
    /// assert!(a.clone().merge(a).is_err());
    /// ```
    pub fn merge(mut self, other: WebhookManifests) -> Result<Self, ManifestError> {
        if self.service != other.service {
            return Err(ManifestError::Services(self.service, other.service));
        }
        if self.cert_dir != other.cert_dir {
            return Err(ManifestError::CertSources(self.cert_dir, other.cert_dir));
        }
        for k in other.kinds {
            if self
                .kinds
                .iter()
                .any(|s| (&s.group, &s.version, &s.plural) == (&k.group, &k.version, &k.plural))
            {
                return Err(ManifestError::DuplicateKind(k.gvk()));
            }
            self.kinds.push(k);
        }
        Ok(self)
    }

    /// Only namespaces matching `selector` are sent to the admission
    /// webhooks.
    pub fn namespace_selector(mut self, selector: LabelSelector) -> Self {
        self.namespace_selector = Some(selector);
        self
    }

    /// Only objects matching `selector` are sent to the admission webhooks.
    pub fn object_selector(mut self, selector: LabelSelector) -> Self {
        self.object_selector = Some(selector);
        self
    }

    /// The port the server listens on, the Service's target (9443 unless
    /// the manager binds another).
    pub fn target_port(mut self, port: u16) -> Self {
        self.target_port = port;
        self
    }

    /// The Service's name.
    pub fn service_name(&self) -> &str {
        &self.service
    }

    /// The ValidatingWebhookConfiguration's name, `<service>-validating`.
    pub fn validating_name(&self) -> String {
        format!("{}-validating", self.service)
    }

    /// The MutatingWebhookConfiguration's name, `<service>-mutating`.
    pub fn mutating_name(&self) -> String {
        format!("{}-mutating", self.service)
    }

    /// The certificate Secret's name, `<service>-cert`.
    pub fn secret_name(&self) -> String {
        format!("{}-cert", self.service)
    }

    fn client_config(&self, path: &str) -> WebhookClientConfig {
        WebhookClientConfig {
            ca_bundle: None,
            service: Some(ServiceReference {
                namespace: self.namespace.clone(),
                name: self.service.clone(),
                path: Some(path.to_owned()),
                port: Some(SERVICE_PORT),
            }),
            url: None,
        }
    }

    fn validating(&self) -> impl Iterator<Item = &KindHooks> {
        self.kinds.iter().filter(|k| k.decl.validating)
    }

    fn defaulting(&self) -> impl Iterator<Item = &KindHooks> {
        self.kinds.iter().filter(|k| k.decl.defaulting)
    }

    fn converted(&self) -> impl Iterator<Item = &KindHooks> {
        self.kinds.iter().filter(|k| k.decl.conversion)
    }

    /// One webhook per validating kind (operations CREATE, UPDATE and
    /// DELETE, at `validate_path`), or `None` when no kind validates.
    pub fn validating_configuration(&self) -> Option<ValidatingWebhookConfiguration> {
        let webhooks: Vec<ValidatingWebhook> = self
            .validating()
            .map(|k| ValidatingWebhook {
                name: k.webhook_name("validate"),
                client_config: self.client_config(&k.validate_path),
                rules: Some(vec![k.rule(&["CREATE", "UPDATE", "DELETE"])]),
                failure_policy: Some(k.decl.failure_policy.as_str().to_owned()),
                timeout_seconds: Some(i32::from(k.decl.timeout_seconds)),
                match_policy: Some("Equivalent".into()),
                side_effects: "None".into(),
                admission_review_versions: vec!["v1".into()],
                namespace_selector: self.namespace_selector.clone(),
                object_selector: self.object_selector.clone(),
                ..ValidatingWebhook::default()
            })
            .collect();
        (!webhooks.is_empty()).then(|| ValidatingWebhookConfiguration {
            metadata: named(self.validating_name()),
            webhooks: Some(webhooks),
        })
    }

    /// One webhook per defaulting kind (operations CREATE and UPDATE, at
    /// `mutate_path`), or `None` when no kind defaults.
    pub fn mutating_configuration(&self) -> Option<MutatingWebhookConfiguration> {
        let webhooks: Vec<MutatingWebhook> = self
            .defaulting()
            .map(|k| MutatingWebhook {
                name: k.webhook_name("mutate"),
                client_config: self.client_config(&k.mutate_path),
                rules: Some(vec![k.rule(&["CREATE", "UPDATE"])]),
                failure_policy: Some(k.decl.failure_policy.as_str().to_owned()),
                timeout_seconds: Some(i32::from(k.decl.timeout_seconds)),
                match_policy: Some("Equivalent".into()),
                side_effects: "None".into(),
                admission_review_versions: vec!["v1".into()],
                namespace_selector: self.namespace_selector.clone(),
                object_selector: self.object_selector.clone(),
                ..MutatingWebhook::default()
            })
            .collect();
        (!webhooks.is_empty()).then(|| MutatingWebhookConfiguration {
            metadata: named(self.mutating_name()),
            webhooks: Some(webhooks),
        })
    }

    /// The webhook Service: port 443 to the server's port (9443), selecting
    /// the manager's pods by `selector`.
    pub fn service<K: Into<String>, V: Into<String>>(
        &self,
        selector: impl IntoIterator<Item = (K, V)>,
    ) -> Service {
        let selector: BTreeMap<String, String> = selector
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Service {
            metadata: ObjectMeta {
                name: Some(self.service.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort {
                    name: Some("webhook".into()),
                    port: SERVICE_PORT,
                    target_port: Some(IntOrString::Int(i32::from(self.target_port))),
                    protocol: Some("TCP".into()),
                    ..ServicePort::default()
                }]),
                selector: (!selector.is_empty()).then_some(selector),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    /// `crd` converted by the manager's `/convert` webhook (`strategy:
    /// Webhook`, `conversionReviewVersions: ["v1"]`), when a declaration
    /// has `conversion` for it. Refused for a CRD no declaration converts
    /// and for one with a single version.
    ///
    /// ```
    /// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
    /// use controller_runtime::webhook::{ManifestError, WebhookDeclaration, WebhookManifests};
    /// # use controller_runtime::crd::{CrdVersionInfo, version_crd};
    /// # let info = CrdVersionInfo::new("example.com", "v1", "Widget", "widgets");
    /// # let single = version_crd(&info, |g| g.subschema_for::<String>(), None, None).unwrap();
    /// let hooks = WebhookManifests::for_kind::<ConfigMap>("system", WebhookDeclaration::new().conversion());
    /// assert!(matches!(hooks.conversion_crd(single), Err(ManifestError::NotDeclared(_))));
    /// ```
    pub fn conversion_crd(
        &self,
        mut crd: apiext::CustomResourceDefinition,
    ) -> Result<apiext::CustomResourceDefinition, ManifestError> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if !self.converted().any(|k| k.crd_name() == name) {
            return Err(ManifestError::NotDeclared(name));
        }
        if let [only] = crd.spec.versions.as_slice() {
            return Err(ManifestError::SingleVersion {
                crd: name,
                version: only.name.clone(),
            });
        }
        crd.spec.conversion = Some(apiext::CustomResourceConversion {
            strategy: "Webhook".into(),
            webhook: Some(apiext::WebhookConversion {
                client_config: Some(apiext::WebhookClientConfig {
                    ca_bundle: None,
                    service: Some(apiext::ServiceReference {
                        namespace: self.namespace.clone(),
                        name: self.service.clone(),
                        path: Some(CONVERT_PATH.into()),
                        port: Some(SERVICE_PORT),
                    }),
                    url: None,
                }),
                conversion_review_versions: vec!["v1".into()],
            }),
        });
        Ok(crd)
    }

    /// The names of the CRDs converted by webhook (`plural.group`).
    pub fn conversion_crd_names(&self) -> Vec<String> {
        self.converted().map(KindHooks::crd_name).collect()
    }

    /// The webhook server's options: self-managed certificates for the
    /// Service in its namespace, writing their CA into exactly the
    /// configurations and CRDs built here; or, when the declaration has
    /// `cert_dir`, the certificates of that directory.
    ///
    /// ```
    /// use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
    /// use controller_runtime::webhook::{WebhookDeclaration, WebhookManifests};
    /// let decl = WebhookDeclaration::new().validating().cert_dir("/certs");
    /// let hooks = WebhookManifests::for_kind::<ConfigMap>("system", decl);
    /// assert_eq!(hooks.options().addr().port(), 9443);
    /// ```
    ///
    /// The options also carry the webhooks declared here: the manager
    /// built with them refuses to start ([`crate::manager::ManagerError::Webhook`],
    /// naming the path) while one of them has no handler registered, since
    /// the API server would send every write of that kind to a path that
    /// answers 404 (and refuse it, with `failurePolicy: Fail`).
    pub fn options(&self) -> WebhookOptions {
        let mut options = match &self.cert_dir {
            Some(dir) => WebhookOptions::cert_dir(dir),
            None => self.self_managed_options(),
        };
        for k in &self.kinds {
            let admission = |path: &str, handler| Declared::Admission {
                path: path.to_owned(),
                kind: k.gvk(),
                handler,
            };
            if k.decl.validating {
                options = options.declare(admission(&k.validate_path, "validator"));
            }
            if k.decl.defaulting {
                options = options.declare(admission(&k.mutate_path, "defaulter"));
            }
            if k.decl.conversion {
                options = options.declare(Declared::Conversion {
                    group: k.group.clone(),
                    kind: k.kind.clone(),
                    crd: k.crd_name(),
                });
            }
        }
        options
    }

    fn self_managed_options(&self) -> WebhookOptions {
        let mut options = WebhookOptions::self_managed(&self.namespace, &self.service);
        if self.validating().next().is_some() {
            options = options.validating_webhook(self.validating_name());
        }
        if self.defaulting().next().is_some() {
            options = options.mutating_webhook(self.mutating_name());
        }
        for crd in self.conversion_crd_names() {
            options = options.crd(crd);
        }
        options
    }

    /// What the self-managed certificates do, as RBAC: `get`, `update` and
    /// `watch` on the Secret `<service>-cert` and `create` on Secrets (a create
    /// cannot be narrowed to a name); `get` and `patch` on the
    /// configurations built here and on the converted CRDs. Nothing when
    /// the certificates come from a directory (`cert_dir`).
    pub fn permissions(&self) -> Permissions {
        if self.cert_dir.is_some() {
            return Permissions::new();
        }
        let mut perms = Permissions::new()
            .named_rule(
                "",
                "secrets",
                [self.secret_name()],
                [Verb::Get, Verb::Update, Verb::Watch],
            )
            .rule("", "secrets", [Verb::Create]);
        let read_patch = [Verb::Get, Verb::Patch];
        const ADMISSION: &str = "admissionregistration.k8s.io";
        if self.validating().next().is_some() {
            perms = perms.named_rule(
                ADMISSION,
                "validatingwebhookconfigurations",
                [self.validating_name()],
                read_patch.clone(),
            );
        }
        if self.defaulting().next().is_some() {
            perms = perms.named_rule(
                ADMISSION,
                "mutatingwebhookconfigurations",
                [self.mutating_name()],
                read_patch.clone(),
            );
        }
        let crds = self.conversion_crd_names();
        if !crds.is_empty() {
            perms = perms.named_rule(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                crds,
                read_patch,
            );
        }
        perms
    }
}

fn named(name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests;
