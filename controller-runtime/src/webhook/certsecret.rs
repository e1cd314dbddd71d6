//! Self-managed webhook certificates (the default; no cert-manager): a CA
//! and a serving certificate for the webhook Service kept in a Secret, so
//! that every replica serves the same pair; the CA written into the
//! `caBundle` of the webhook configurations and of the CRDs converted by
//! webhook; the serving certificate renewed before it expires.
//!
//! [`SecretCerts::ensure`] reads the Secret, creates it if absent (a
//! replica that loses the race re-reads the winner's), renews the serving
//! certificate when less than a third of its validity is left (an update
//! guarded by `resourceVersion`: on a conflict the other replica's renewal
//! is read) and loads the pair into the [`CertResolver`], which swaps it
//! atomically: connections in progress keep the old certificate, new ones
//! get the new, no request is dropped. Renewal keeps the CA, so the
//! `caBundle`s stay valid. [`SecretCerts::run`] does this on an interval
//! (tokio's clock) with the wall-clock time from an injectable [`Clock`].
//!
//! Part of the manager layer's webhook server; uses only the client.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::api::{Api, Patch, PatchParams, PostParams};
use kube_client::{Client, Error as KubeError};
use tokio_util::sync::CancellationToken;

use super::selfsigned::{CertError, SelfSigned, service_dns_names};
use super::tls::{CertResolver, TlsError};

/// The annotation holding the serving certificate's expiry (Unix seconds).
pub const NOT_AFTER_ANNOTATION: &str = "webhook.informer-rs.dev/not-after";

/// How many times a write that lost a race is retried.
const ATTEMPTS: usize = 5;

/// Wall-clock time, injectable for tests (certificate validity is wall
/// time; the check interval runs on tokio's clock).
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Why the certificates could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum CertSecretError {
    /// An API call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The client's error (the API's Status preserved).
        source: KubeError,
    },
    /// Making a certificate failed.
    #[error(transparent)]
    Generate(#[from] CertError),
    /// The stored pair could not be loaded.
    #[error("loading the certificate from Secret {secret}: {source}")]
    Load {
        /// `namespace/name`.
        secret: String,
        /// Why.
        source: TlsError,
    },
    /// Other replicas kept winning the race.
    #[error("Secret {0} kept changing under us")]
    Contended(String),
}

/// Where the certificates live and what gets their CA.
///
/// ```no_run
/// use std::time::Duration;
/// use controller_runtime::webhook::{CertResolver, SecretCerts};
/// # async fn run(client: controller_runtime::kube_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let resolver = CertResolver::new();
/// let certs = SecretCerts::new(client, "system", "webhook-service", resolver.clone())
///     .validating_webhook("demo-validating")
///     .mutating_webhook("demo-mutating")
///     .crd("widgets.demo.example.com");
/// certs.ensure().await?; // the Secret exists, the resolver serves it, every caBundle holds the CA
/// # Ok(()) }
/// ```
#[must_use]
#[derive(Clone)]
pub struct SecretCerts {
    client: Client,
    namespace: String,
    secret: String,
    names: Vec<String>,
    validity: Duration,
    interval: Duration,
    clock: Arc<dyn Clock>,
    resolver: CertResolver,
    validating: Vec<String>,
    mutating: Vec<String>,
    crds: Vec<String>,
}

impl std::fmt::Debug for SecretCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCerts")
            .field("secret", &format!("{}/{}", self.namespace, self.secret))
            .field("names", &self.names)
            .field("validity", &self.validity)
            .finish_non_exhaustive()
    }
}

fn api_err(action: impl Into<String>) -> impl FnOnce(KubeError) -> CertSecretError {
    let action = action.into();
    move |source| CertSecretError::Api { action, source }
}

fn status_code(e: &KubeError) -> Option<u16> {
    match e {
        KubeError::Api(s) => Some(s.code),
        _ => None,
    }
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key)
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

impl SecretCerts {
    /// Certificates for the Service `service` in `namespace`, kept in the
    /// Secret `<service>-cert` there, valid for a year, checked hourly.
    pub fn new(
        client: Client,
        namespace: impl Into<String>,
        service: impl Into<String>,
        resolver: CertResolver,
    ) -> Self {
        let namespace = namespace.into();
        let service = service.into();
        SecretCerts {
            client,
            names: service_dns_names(&service, &namespace),
            secret: format!("{service}-cert"),
            namespace,
            validity: Duration::from_secs(365 * 24 * 3600),
            interval: Duration::from_secs(3600),
            clock: Arc::new(SystemClock),
            resolver,
            validating: Vec::new(),
            mutating: Vec::new(),
            crds: Vec::new(),
        }
    }

    /// Keeps the pair in the Secret `name` instead.
    pub fn secret_name(mut self, name: impl Into<String>) -> Self {
        self.secret = name.into();
        self
    }

    /// Also valid for `name` (a DNS name or an IP address, for a local run).
    pub fn extra_name(mut self, name: impl Into<String>) -> Self {
        self.names.push(name.into());
        self
    }

    /// How long a serving certificate is valid (renewed with a third left).
    pub fn validity(mut self, validity: Duration) -> Self {
        self.validity = validity;
        self
    }

    /// How often [`SecretCerts::run`] checks.
    pub fn check_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Reads the wall clock from `clock`.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Writes the CA into the ValidatingWebhookConfiguration `name`.
    pub fn validating_webhook(mut self, name: impl Into<String>) -> Self {
        self.validating.push(name.into());
        self
    }

    /// Writes the CA into the MutatingWebhookConfiguration `name`.
    pub fn mutating_webhook(mut self, name: impl Into<String>) -> Self {
        self.mutating.push(name.into());
        self
    }

    /// Writes the CA into the conversion webhook of the CRD `name`.
    pub fn crd(mut self, name: impl Into<String>) -> Self {
        self.crds.push(name.into());
        self
    }

    fn secret_key(&self) -> String {
        format!("{}/{}", self.namespace, self.secret)
    }

    fn due(&self, pair: &SelfSigned) -> bool {
        let left = pair
            .not_after()
            .duration_since(self.clock.now())
            .unwrap_or_default();
        left < self.validity / 3
    }

    fn to_secret(&self, pair: &SelfSigned, resource_version: Option<String>) -> Secret {
        let not_after = pair
            .not_after()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version,
                annotations: Some(BTreeMap::from([(
                    NOT_AFTER_ANNOTATION.to_owned(),
                    not_after.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                ("ca.crt".to_owned(), bytes(pair.ca_pem())),
                ("ca.key".to_owned(), bytes(pair.ca_key_pem())),
                ("tls.crt".to_owned(), bytes(pair.cert_pem())),
                ("tls.key".to_owned(), bytes(pair.key_pem())),
            ])),
            ..Secret::default()
        }
    }

    fn from_secret(secret: &Secret) -> Option<SelfSigned> {
        let data = secret.data.as_ref()?;
        let not_after = secret
            .metadata
            .annotations
            .as_ref()?
            .get(NOT_AFTER_ANNOTATION)?
            .parse::<u64>()
            .ok()?;
        Some(SelfSigned::from_parts(
            text(data, "ca.crt")?,
            text(data, "ca.key")?,
            text(data, "tls.crt")?,
            text(data, "tls.key")?,
            UNIX_EPOCH + Duration::from_secs(not_after),
        ))
    }

    /// The current pair from the Secret: created if absent, renewed if due.
    async fn current(&self) -> Result<SelfSigned, CertSecretError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for _ in 0..ATTEMPTS {
            let existing = api
                .get_opt(&self.secret)
                .await
                .map_err(api_err(format!("reading Secret {}", self.secret_key())))?;
            let now = self.clock.now();
            match existing {
                None => {
                    let pair = SelfSigned::generate_for(&self.names, now, self.validity)?;
                    match api
                        .create(&PostParams::default(), &self.to_secret(&pair, None))
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(secret = %self.secret_key(), "created the webhook certificate Secret");
                            return Ok(pair);
                        }
                        // Another replica created it first: read theirs.
                        Err(e) if status_code(&e) == Some(409) => continue,
                        Err(e) => {
                            return Err(api_err(format!("creating Secret {}", self.secret_key()))(
                                e,
                            ));
                        }
                    }
                }
                Some(secret) => {
                    let stored = Self::from_secret(&secret);
                    let pair = match &stored {
                        Some(pair) if !self.due(pair) => return Ok(pair.clone()),
                        Some(pair) => pair.renew(&self.names, now, self.validity)?,
                        // Not ours or damaged: start over with a new CA.
                        None => SelfSigned::generate_for(&self.names, now, self.validity)?,
                    };
                    let rv = secret.metadata.resource_version.clone();
                    match api
                        .replace(
                            &self.secret,
                            &PostParams::default(),
                            &self.to_secret(&pair, rv),
                        )
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(secret = %self.secret_key(), "renewed the webhook serving certificate");
                            return Ok(pair);
                        }
                        // Another replica renewed it first: read theirs.
                        Err(e) if status_code(&e) == Some(409) => continue,
                        Err(e) => {
                            return Err(api_err(format!("updating Secret {}", self.secret_key()))(
                                e,
                            ));
                        }
                    }
                }
            }
        }
        Err(CertSecretError::Contended(self.secret_key()))
    }

    /// Makes sure the Secret holds a valid pair, serves it, and writes its
    /// CA into every configured `caBundle`. Returns the pair.
    pub async fn ensure(&self) -> Result<SelfSigned, CertSecretError> {
        let pair = self.current().await?;
        self.resolver
            .load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes())
            .map_err(|source| CertSecretError::Load {
                secret: self.secret_key(),
                source,
            })?;
        self.inject_ca(pair.ca_pem()).await?;
        Ok(pair)
    }

    /// Writes `ca_pem` into the configured webhook configurations and CRDs
    /// (those that do not exist yet are skipped; the next check writes
    /// them). Each write is a JSON patch of the `caBundle` fields only,
    /// guarded by a `test` of the webhook's name, so it cannot conflict
    /// with other writers of the object.
    pub async fn inject_ca(&self, ca_pem: &str) -> Result<(), CertSecretError> {
        use base64::Engine as _;
        let ca = ByteString(ca_pem.as_bytes().to_vec());
        let encoded = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        for name in &self.validating {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
            let webhooks = |c: &ValidatingWebhookConfiguration| {
                c.webhooks
                    .iter()
                    .flatten()
                    .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
                    .collect()
            };
            patch_bundles(&api, name, webhooks, &ca, &encoded).await?;
        }
        for name in &self.mutating {
            let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
            let webhooks = |c: &MutatingWebhookConfiguration| {
                c.webhooks
                    .iter()
                    .flatten()
                    .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
                    .collect()
            };
            patch_bundles(&api, name, webhooks, &ca, &encoded).await?;
        }
        for name in &self.crds {
            let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
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
            let mut attempt = 0;
            loop {
                match api
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => break,
                    // A server that does not retry a patch racing another
                    // write internally: retry it here.
                    Err(e) if status_code(&e) == Some(409) && attempt + 1 < ATTEMPTS => {
                        attempt += 1
                    }
                    Err(e) => return Err(api_err(format!("writing the caBundle of {what}"))(e)),
                }
            }
            tracing::info!(object = %what, "wrote the webhook CA into caBundle");
        }
        Ok(())
    }

    /// Checks every interval until `stop` fires: renews when due, rewrites
    /// `caBundle`s that drifted. A failed check is logged and retried at
    /// the next one; the pair already served stays.
    pub async fn run(self, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if let Err(e) = self.ensure().await {
                tracing::warn!(error = %e, "keeping the webhook certificates failed; retrying at the next check");
            }
        }
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
