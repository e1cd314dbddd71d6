//! Self-managed webhook certificates (the default; no cert-manager): a CA
//! and a serving certificate for the webhook Service kept in a Secret, so
//! that every replica serves the same pair; the CA bundle written into the
//! `caBundle` of the webhook configurations and of the CRDs converted by
//! webhook; the serving certificate and the CA renewed before they expire.
//!
//! [`SecretCerts::ensure`] reads the Secret, creates it if absent (a
//! replica that loses the race re-reads the winner's), advances it if due
//! (an update guarded by `resourceVersion`: on a conflict the other
//! replica's update is read), writes its CA bundle into every `caBundle`
//! and then loads the pair into the [`CertResolver`], which swaps it
//! atomically: connections in progress keep the old certificate, new ones
//! get the new, no request is dropped. What is due, checked in this order:
//!
//! 1. the CA has less than a third of its validity left (or its expiry is
//!    not recorded, a Secret from before CA rotation): a next CA is made
//!    and published beside the current one (`ca.crt` holds both, so does
//!    every `caBundle`); the serving certificate is not changed;
//! 2. the next CA has been published for the overlap
//!    ([`SecretCerts::ca_overlap`], a day by default): it signs a new
//!    serving certificate; the old CA stays published;
//! 3. that has been served for the overlap too: the old CA is dropped;
//! 4. otherwise, less than a third of the serving certificate's validity is
//!    left: it is renewed with the same CA (no `caBundle` changes).
//!
//! A client trusting the published bundle thus trusts whatever any replica
//! serves at every step, as long as the overlap is longer than the check
//! interval of every replica (each reloads the Secret at its checks).
//! [`SecretCerts::run`] checks on an interval (tokio's clock) with the
//! wall-clock time from an injectable [`Clock`], and also watches the
//! Secret: a replica serves a pair another replica wrote within seconds,
//! not at its next check. [`SecretCerts::renew`] renews the serving
//! certificate at once (the manager's
//! [`renew_webhook_certificate`](crate::manager::Manager::renew_webhook_certificate)).
//!
//! Part of the serving certificates ([`crate::tls`]), for the webhook
//! server and the secure metrics server alike; uses only the client.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::api::{Api, PostParams};
use kube_client::{Client, Error as KubeError};
use tokio_util::sync::CancellationToken;

use super::cabundle::BundleTargets;
use super::cert_error::{CertSecretError, api_err};
use super::listener::CertResolver;
use super::selfsigned::{CA_VALIDITY, CertError, NextCa, SelfSigned, service_dns_names};

/// The annotation holding the serving certificate's expiry (Unix seconds).
pub const NOT_AFTER_ANNOTATION: &str = "webhook.informer-rs.io/not-after";

/// The annotation holding the signing CA's expiry (Unix seconds).
pub const CA_NOT_AFTER_ANNOTATION: &str = "webhook.informer-rs.io/ca-not-after";

/// The annotation saying how far a CA rotation is: `published:<unix
/// seconds>` (the next CA is in the bundle, not signing yet) or
/// `switched:<unix seconds>` (it signs, the previous CA is still in the
/// bundle); absent when no rotation is under way.
pub const CA_ROTATION_ANNOTATION: &str = "webhook.informer-rs.io/ca-rotation";

/// How long each step of a CA rotation lasts by default.
pub const DEFAULT_CA_OVERLAP: Duration = Duration::from_secs(24 * 3600);

/// Where a CA rotation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rotation {
    /// The next CA is published since then.
    Published(SystemTime),
    /// The next CA signs since then; the previous one is still published.
    Switched(SystemTime),
}

impl Rotation {
    fn annotation(self) -> String {
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        match self {
            Rotation::Published(t) => format!("published:{}", secs(t)),
            Rotation::Switched(t) => format!("switched:{}", secs(t)),
        }
    }

    fn parse(value: &str) -> Option<Self> {
        let (phase, secs) = value.split_once(':')?;
        let at = UNIX_EPOCH + Duration::from_secs(secs.parse().ok()?);
        match phase {
            "published" => Some(Rotation::Published(at)),
            "switched" => Some(Rotation::Switched(at)),
            _ => None,
        }
    }
}

/// What the Secret holds after a step, and what the step did (for the log).
type Step = (SelfSigned, Option<Rotation>, &'static str);

/// The first PEM certificate of `bundle` (the signing CA of a `ca.crt`).
fn first_pem(bundle: &str) -> Option<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let end = bundle.find(END)? + END.len();
    Some(format!("{}\n", &bundle[..end]))
}

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
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Where the certificates live and what gets their CA.
///
/// ```no_run
/// use std::time::Duration;
/// use controller_runtime::tls::{CertResolver, SecretCerts};
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
    ca_validity: Duration,
    ca_overlap: Duration,
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
            ca_validity: CA_VALIDITY,
            ca_overlap: DEFAULT_CA_OVERLAP,
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

    /// How long a new CA is valid ([`CA_VALIDITY`] by default); it is
    /// rotated with a third left.
    pub fn ca_validity(mut self, validity: Duration) -> Self {
        self.ca_validity = validity;
        self
    }

    /// How long a next CA is published before it signs, and the previous
    /// one stays published after ([`DEFAULT_CA_OVERLAP`]). Must be longer
    /// than the check interval of every replica, and than it takes the API
    /// servers to see a new `caBundle`.
    pub fn ca_overlap(mut self, overlap: Duration) -> Self {
        self.ca_overlap = overlap;
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

    /// [`SecretCerts::clock`], shared (as `WebhookOptions::clock` keeps it).
    #[cfg(feature = "webhook")]
    pub(crate) fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
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

    /// Whether the CA should be rotated: less than a third of its validity
    /// left, or its expiry unknown.
    fn ca_due(&self, pair: &SelfSigned) -> bool {
        pair.ca_not_after().is_none_or(|t| {
            t.duration_since(self.clock.now()).unwrap_or_default() < self.ca_validity / 3
        })
    }

    /// What the Secret should hold next, and what changed; `None` when
    /// nothing is due.
    fn advance(
        &self,
        pair: &SelfSigned,
        rotation: Option<Rotation>,
        now: SystemTime,
    ) -> Result<Option<Step>, CertError> {
        let renewed = |p: SelfSigned| -> Result<SelfSigned, CertError> {
            if self.due(&p) {
                p.renew(&self.names, now, self.validity)
            } else {
                Ok(p)
            }
        };
        let over = |since: SystemTime| now >= since + self.ca_overlap;
        Ok(Some(match rotation {
            None if self.ca_due(pair) => (
                renewed(pair.with_next_ca(now, self.ca_validity)?)?,
                Some(Rotation::Published(now)),
                "published a new webhook CA beside the current one",
            ),
            Some(Rotation::Published(since)) if over(since) => (
                pair.switch_to_next_ca(&self.names, now, self.validity, since + self.ca_validity)?,
                Some(Rotation::Switched(now)),
                "the new webhook CA signs the serving certificate; the old one stays in caBundle",
            ),
            Some(Rotation::Switched(since)) if over(since) => (
                renewed(pair.without_previous_ca())?,
                None,
                "dropped the previous webhook CA from caBundle",
            ),
            _ if self.due(pair) => (
                pair.renew(&self.names, now, self.validity)?,
                rotation,
                "renewed the webhook serving certificate",
            ),
            _ => return Ok(None),
        }))
    }

    fn to_secret(
        &self,
        pair: &SelfSigned,
        rotation: Option<Rotation>,
        resource_version: Option<String>,
    ) -> Secret {
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        let mut annotations = BTreeMap::from([(
            NOT_AFTER_ANNOTATION.to_owned(),
            secs(pair.not_after()).to_string(),
        )]);
        if let Some(t) = pair.ca_not_after() {
            annotations.insert(CA_NOT_AFTER_ANNOTATION.to_owned(), secs(t).to_string());
        }
        if let Some(r) = rotation {
            annotations.insert(CA_ROTATION_ANNOTATION.to_owned(), r.annotation());
        }
        let mut data = BTreeMap::from([
            ("ca.crt".to_owned(), bytes(&pair.ca_bundle_pem())),
            ("ca.key".to_owned(), bytes(pair.ca_key_pem())),
            ("tls.crt".to_owned(), bytes(pair.cert_pem())),
            ("tls.key".to_owned(), bytes(pair.key_pem())),
        ]);
        if let Some(next) = pair.next_ca() {
            data.insert("ca-next.crt".to_owned(), bytes(&next.cert_pem));
            data.insert("ca-next.key".to_owned(), bytes(&next.key_pem));
        }
        if let Some(previous) = pair.previous_ca() {
            data.insert("ca-previous.crt".to_owned(), bytes(previous));
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version,
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Secret::default()
        }
    }

    fn from_secret(secret: &Secret) -> Option<(SelfSigned, Option<Rotation>)> {
        let data = secret.data.as_ref()?;
        let annotations = secret.metadata.annotations.as_ref()?;
        let get = |key: &str| annotations.get(key);
        let at = |key: &str| {
            let secs = get(key)?.parse::<u64>().ok()?;
            Some(UNIX_EPOCH + Duration::from_secs(secs))
        };
        let not_after = at(NOT_AFTER_ANNOTATION)?;
        let next = match (text(data, "ca-next.crt"), text(data, "ca-next.key")) {
            (Some(cert_pem), Some(key_pem)) => Some(NextCa { cert_pem, key_pem }),
            _ => None,
        };
        let rotation = get(CA_ROTATION_ANNOTATION).and_then(|v| Rotation::parse(v));
        // The signing CA is the first of the published bundle.
        let pair = SelfSigned::from_parts(
            first_pem(&text(data, "ca.crt")?)?,
            text(data, "ca.key")?,
            text(data, "tls.crt")?,
            text(data, "tls.key")?,
            not_after,
        )
        .with_rotation_state(
            at(CA_NOT_AFTER_ANNOTATION),
            next,
            text(data, "ca-previous.crt"),
        );
        Some((pair, rotation))
    }

    /// The current pair from the Secret: created if absent, renewed if due
    /// (or, with `force`, renewed at once if nothing else is due).
    async fn current(&self, force: bool) -> Result<SelfSigned, CertSecretError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for _ in 0..ATTEMPTS {
            let existing = api
                .get_opt(&self.secret)
                .await
                .map_err(api_err(format!("reading Secret {}", self.secret_key())))?;
            let now = self.clock.now();
            match existing {
                None => {
                    let pair = SelfSigned::generate_with_ca_validity(
                        &self.names,
                        now,
                        self.validity,
                        self.ca_validity,
                    )?;
                    match api
                        .create(&PostParams::default(), &self.to_secret(&pair, None, None))
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
                    let (pair, rotation, what) = match Self::from_secret(&secret) {
                        Some((pair, rotation)) => match self.advance(&pair, rotation, now)? {
                            Some(next) => next,
                            None if force => (
                                pair.renew(&self.names, now, self.validity)?,
                                rotation,
                                "renewed the webhook serving certificate on request",
                            ),
                            None => return Ok(pair),
                        },
                        // Not ours or damaged: start over with a new CA.
                        None => (
                            SelfSigned::generate_with_ca_validity(
                                &self.names,
                                now,
                                self.validity,
                                self.ca_validity,
                            )?,
                            None,
                            "replaced an unreadable webhook certificate Secret",
                        ),
                    };
                    let rv = secret.metadata.resource_version.clone();
                    match api
                        .replace(
                            &self.secret,
                            &PostParams::default(),
                            &self.to_secret(&pair, rotation, rv),
                        )
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(secret = %self.secret_key(), "{what}");
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

    /// Makes sure the Secret holds a valid pair (renewing or rotating what
    /// is due), writes its CA bundle into every configured `caBundle`, then
    /// serves it: a certificate is served only once the CA that signed it
    /// is published. Returns the pair.
    pub async fn ensure(&self) -> Result<SelfSigned, CertSecretError> {
        self.ensure_with(false).await
    }

    /// [`SecretCerts::ensure`], renewing the serving certificate now even
    /// if it is not due (with the same CA, so no `caBundle` changes; a CA
    /// rotation that is due is advanced instead). Every replica serves the
    /// new pair within seconds ([`SecretCerts::run`] watches the Secret).
    /// Returns the pair.
    pub async fn renew(&self) -> Result<SelfSigned, CertSecretError> {
        self.ensure_with(true).await
    }

    async fn ensure_with(&self, force: bool) -> Result<SelfSigned, CertSecretError> {
        let pair = self.current(force).await?;
        self.inject_ca(&pair.ca_bundle_pem()).await?;
        self.resolver
            .load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes())
            .map_err(|source| CertSecretError::Load {
                secret: self.secret_key(),
                source,
            })?;
        Ok(pair)
    }

    /// Writes `ca_pem` (one CA or a bundle) into the configured webhook
    /// configurations and CRDs (those that do not exist yet are skipped;
    /// the next check writes them). Each write is a patch of the
    /// `caBundle` fields only, so it cannot conflict with other writers of
    /// the object.
    pub async fn inject_ca(&self, ca_pem: &str) -> Result<(), CertSecretError> {
        let targets = BundleTargets {
            validating: &self.validating,
            mutating: &self.mutating,
            crds: &self.crds,
        };
        targets.inject(&self.client, ca_pem).await
    }

    /// Checks every interval until `stop` fires: renews or rotates what is
    /// due, rewrites `caBundle`s that drifted. Between checks it watches
    /// the Secret and checks again as soon as it changes (another replica
    /// renewed or rotated), so every replica serves the new pair within
    /// seconds. A failed check is logged and retried at the next one; the
    /// pair already served stays.
    pub async fn run(self, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (changed, mut changes) = tokio::sync::mpsc::channel(1);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let _watcher = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
            super::certwatch::watch(api, self.secret.clone(), changed),
        ));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
                Some(()) = changes.recv() => {}
            }
            if let Err(e) = self.ensure().await {
                tracing::warn!(error = %e, "keeping the webhook certificates failed; retrying at the next check");
            }
        }
    }
}

#[cfg(test)]
mod tests;
