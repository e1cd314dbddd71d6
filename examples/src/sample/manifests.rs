//! The sample controller's manifests, built from its code so they cannot
//! drift from it, for a manager running in `namespace` as the service
//! account `foo-controller`:
//!
//! | file | what |
//! | --- | --- |
//! | `crd.yaml` | the Foo CRD: v1alpha1 and v1 (storage) joined, converted by the webhook at `/convert` of the Service |
//! | `rbac.yaml` | the ClusterRole [`FooReconciler::rbac`] (the controller's wiring and the rules the self-managed webhook certificates need), the ServiceAccount and the ClusterRoleBinding |
//! | `webhooks.yaml` | the webhook Service (443 to the manager's 9443), the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration |
//!
//! Everything webhook-related comes from `webhooks(...)` in the
//! reconciler's `#[controller(...)]`, through `FooReconciler::webhooks`.
//! The `caBundle`s are left empty: the manager writes its CA there. The
//! sample ships no Deployment: the Service selects pods labelled
//! `app.kubernetes.io/name: foo-controller`, which you run.
//!
//! ```
//! use informer_examples::sample::manifests;
//! let files = manifests::render("default")?;
//! let names: Vec<&str> = files.iter().map(|m| m.file).collect();
//! assert_eq!(names, ["crd.yaml", "rbac.yaml", "webhooks.yaml"]);
//! assert!(files[2].yaml.contains("kind: ValidatingWebhookConfiguration"));
//! # Ok::<(), manifests::ManifestsError>(())
//! ```

use controller_runtime::crd::{CrdError, merge_versions};
use controller_runtime::k8s_openapi::api::core::v1::{Service, ServiceAccount};
use controller_runtime::k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use controller_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use controller_runtime::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use controller_runtime::manifests::{RenderError, to_yaml};
use controller_runtime::webhook::ManifestError;

use super::{FooReconciler, v1, v1alpha1};

/// The service account the manager runs as (the controller's name).
pub const SERVICE_ACCOUNT: &str = FooReconciler::CONTROLLER_NAME;
/// The label the webhook Service selects the manager's pods by.
pub const POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", FooReconciler::CONTROLLER_NAME);

/// Why the manifests could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// A version's CRD could not be derived, or the versions joined.
    #[error("deriving the Foo CRD: {0}")]
    Crd(#[from] CrdError),
    /// The webhook declaration refused the CRD.
    #[error("the CRD's conversion webhook: {0}")]
    Webhooks(#[from] ManifestError),
    /// An object could not be written as YAML.
    #[error("writing {file}: {source}")]
    Yaml {
        /// The file.
        file: &'static str,
        /// The error.
        #[source]
        source: RenderError,
    },
}

/// The Foo CRD: v1alpha1 (served, deprecated) and v1 (storage), converted
/// by the webhook at `/convert` of the Service `foo-webhook-service` in
/// `namespace` (no `caBundle`: the manager writes it).
///
/// ```
/// let crd = informer_examples::sample::manifests::crd("default")?;
/// assert_eq!(crd.spec.versions.len(), 2);
/// assert_eq!(crd.spec.conversion.unwrap().strategy, "Webhook");
/// # Ok::<(), informer_examples::sample::manifests::ManifestsError>(())
/// ```
pub fn crd(namespace: &str) -> Result<CustomResourceDefinition, ManifestsError> {
    let both = merge_versions(vec![v1alpha1::Foo::crd()?, v1::Foo::crd()?])?;
    Ok(FooReconciler::webhooks(namespace).conversion_crd(both)?)
}

/// The webhook Service in `namespace`: port 443 to the manager's 9443 on
/// the pods labelled [`POD_LABEL`].
pub fn webhook_service(namespace: &str) -> Service {
    FooReconciler::webhooks(namespace).service([POD_LABEL])
}

/// The manager's ServiceAccount, [`SERVICE_ACCOUNT`] in `namespace`.
pub fn service_account(namespace: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(SERVICE_ACCOUNT.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    }
}

/// Binds [`FooReconciler::rbac`]'s ClusterRole to the ServiceAccount
/// [`SERVICE_ACCOUNT`] in `namespace`.
pub fn cluster_role_binding(namespace: &str) -> ClusterRoleBinding {
    // `api_group` is a `String` up to Kubernetes 1.35 and an
    // `Option<String>` from 1.36: `.into()` is one spelling for both.
    #[allow(clippy::useless_conversion)]
    let role_ref = RoleRef {
        api_group: String::from("rbac.authorization.k8s.io").into(),
        kind: "ClusterRole".into(),
        name: FooReconciler::CONTROLLER_NAME.into(),
    };
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(FooReconciler::CONTROLLER_NAME.into()),
            ..ObjectMeta::default()
        },
        role_ref,
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: SERVICE_ACCOUNT.into(),
            namespace: Some(namespace.into()),
            api_group: None,
        }]),
    }
}

/// One file of the manifests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The file name.
    pub file: &'static str,
    /// Its YAML documents, separated by `---`.
    pub yaml: String,
}

/// One file of `docs`, each a YAML document (or why one is not).
fn file(
    file: &'static str,
    docs: impl IntoIterator<Item = Result<String, RenderError>>,
) -> Result<Manifest, ManifestsError> {
    let docs = docs
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ManifestsError::Yaml { file, source })?;
    Ok(Manifest {
        file,
        yaml: docs.join("---\n"),
    })
}

/// Every file, for a manager in `namespace` (see the module docs).
pub fn render(namespace: &str) -> Result<Vec<Manifest>, ManifestsError> {
    let hooks = FooReconciler::webhooks(namespace);
    // The declaration has both admission webhooks: both configurations.
    let webhooks = [
        Some(to_yaml(&webhook_service(namespace))),
        hooks.mutating_configuration().map(|c| to_yaml(&c)),
        hooks.validating_configuration().map(|c| to_yaml(&c)),
    ];
    Ok(vec![
        file("crd.yaml", [to_yaml(&crd(namespace)?)])?,
        file(
            "rbac.yaml",
            [
                to_yaml(&FooReconciler::rbac()),
                to_yaml(&service_account(namespace)),
                to_yaml(&cluster_role_binding(namespace)),
            ],
        )?,
        file("webhooks.yaml", webhooks.into_iter().flatten())?,
    ])
}
