//! Writing the webhook CA bundle into the `caBundle` of the webhook
//! configurations and of the CRDs converted by webhook: a JSON patch of
//! those fields only (guarded by a `test` of each webhook's name) or a
//! merge patch of the CRD's conversion `clientConfig`, written only where
//! the bundle differs.
//!
//! Part of the serving certificates ([`crate::tls`]); [`super::certsecret`] calls it
//! at every check.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, Patch, PatchParams};

use super::cert_error::{CertSecretError, api_err};

/// The objects whose `caBundle`s hold the CA bundle, by name.
pub(super) struct BundleTargets<'a> {
    pub(super) validating: &'a [String],
    pub(super) mutating: &'a [String],
    pub(super) crds: &'a [String],
}

impl BundleTargets<'_> {
    /// Writes `ca_pem` (one CA or a bundle) into the configured webhook
    /// configurations and CRDs
    /// (those that do not exist yet are skipped; the next check writes
    /// them). Each write is a JSON patch of the `caBundle` fields only,
    /// guarded by a `test` of the webhook's name, so it cannot conflict
    /// with other writers of the object.
    pub(super) async fn inject(
        &self,
        client: &Client,
        ca_pem: &str,
    ) -> Result<(), CertSecretError> {
        use base64::Engine as _;
        let ca = ByteString(ca_pem.as_bytes().to_vec());
        let encoded = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        for name in self.validating {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            let webhooks = |c: &ValidatingWebhookConfiguration| {
                c.webhooks
                    .iter()
                    .flatten()
                    .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
                    .collect()
            };
            patch_bundles(&api, name, webhooks, &ca, &encoded).await?;
        }
        for name in self.mutating {
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            let webhooks = |c: &MutatingWebhookConfiguration| {
                c.webhooks
                    .iter()
                    .flatten()
                    .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
                    .collect()
            };
            patch_bundles(&api, name, webhooks, &ca, &encoded).await?;
        }
        for name in self.crds {
            let api: Api<CustomResourceDefinition> = Api::all(client.clone());
            let what = format!("CustomResourceDefinition {name}");
            let Some(crd) = api
                .get_opt(name)
                .await
                .map_err(api_err(format!("reading {what}")))?
            else {
                continue;
            };
            let current = crd
                .spec
                .conversion
                .as_ref()
                .filter(|c| c.strategy == "Webhook")
                .and_then(|c| c.webhook.as_ref())
                .map(|w| w.client_config.as_ref().and_then(|c| c.ca_bundle.clone()));
            // Only a CRD converted by webhook has a caBundle to fill.
            if current.is_none() || current == Some(Some(ca.clone())) {
                continue;
            }
            let patch = serde_json::json!({"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": encoded}}}}});
            // A merge patch carries no resourceVersion: the API server
            // retries it internally when it races another write.
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(format!("writing the caBundle of {what}")))?;
            tracing::info!(object = %what, "wrote the webhook CA into caBundle");
        }
        Ok(())
    }
}

/// Patches the `caBundle` of every webhook of the configuration `name`
/// that does not hold `ca` yet; an absent configuration is skipped.
async fn patch_bundles<K>(
    api: &Api<K>,
    name: &str,
    webhooks: impl Fn(&K) -> Vec<(String, Option<ByteString>)>,
    ca: &ByteString,
    encoded: &str,
) -> Result<(), CertSecretError>
where
    K: kube_client::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let what = format!("{} {name}", K::kind(&()));
    let Some(obj) = api
        .get_opt(name)
        .await
        .map_err(api_err(format!("reading {what}")))?
    else {
        tracing::debug!(object = %what, "not there yet; the caBundle is written at the next check");
        return Ok(());
    };
    let mut ops = Vec::new();
    for (i, (hook, bundle)) in webhooks(&obj).into_iter().enumerate() {
        if bundle.as_ref() == Some(ca) {
            continue;
        }
        ops.push(
            serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": hook}),
        );
        ops.push(serde_json::json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": encoded}));
    }
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
        .map_err(|e| CertSecretError::Contended(format!("{what}: {e}")))?;
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map_err(api_err(format!("writing the caBundle of {what}")))?;
    tracing::info!(object = %what, "wrote the webhook CA into caBundle");
    Ok(())
}
