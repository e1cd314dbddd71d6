//! Certificates the manager makes for itself, without cert-manager: a CA
//! and a serving certificate it signs for the webhook Service's DNS names,
//! both ECDSA P-256 (rcgen on ring).
//!
//! Part of the manager layer's webhook server. [`super::certsecret`] keeps
//! the pair in a Secret so that every replica serves the same one, writes
//! the CA into the `caBundle`s and rotates the serving certificate before it
//! expires; this module only makes and parses them. The CA lives much longer
//! than the serving certificate ([`CA_VALIDITY`]), so a rotation re-signs
//! with the same CA and no `caBundle` changes.

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// How long a generated CA is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How far back a new certificate's validity starts, for clocks slightly
/// behind ours.
const BACKDATE: Duration = Duration::from_secs(3600);

/// Why a certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// rcgen refused to make or parse a key or certificate.
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A date outside what X.509 (or this platform) can express.
    #[error("certificate validity out of range: {0}")]
    Date(String),
}

/// The DNS names of a Service, as a client in the cluster may address it:
/// `svc`, `svc.ns`, `svc.ns.svc` and `svc.ns.svc.cluster.local`.
///
/// ```
/// use controller_runtime::webhook::service_dns_names;
/// assert_eq!(service_dns_names("hooks", "system")[2], "hooks.system.svc");
/// ```
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A CA, and a serving certificate it signed, in PEM, with the serving
/// certificate's expiry.
#[derive(Clone)]
pub struct SelfSigned {
    ca_cert_pem: String,
    ca_key_pem: String,
    cert_pem: String,
    key_pem: String,
    not_after: SystemTime,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a private key.
        f.debug_struct("SelfSigned")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

fn offset(t: SystemTime) -> Result<time::OffsetDateTime, CertError> {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|e| CertError::Date(e.to_string()))?
        .as_secs();
    let secs = i64::try_from(secs).map_err(|e| CertError::Date(e.to_string()))?;
    time::OffsetDateTime::from_unix_timestamp(secs).map_err(|e| CertError::Date(e.to_string()))
}

/// The CA's parameters (subject, constraints, usages), the same every time.
fn ca_params() -> Result<CertificateParams, CertError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "controller-runtime-webhook-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca)
}

impl SelfSigned {
    /// A new CA and a serving certificate for `service` in `namespace`
    /// (its [`service_dns_names`]), valid from `now` for `validity`.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use controller_runtime::webhook::SelfSigned;
    /// let now = SystemTime::now();
    /// let pair = SelfSigned::generate("hooks", "system", now, Duration::from_secs(3600)).unwrap();
    /// assert!(pair.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    /// assert!(pair.not_after() > now);
    /// ```
    pub fn generate(
        service: &str,
        namespace: &str,
        now: SystemTime,
        validity: Duration,
    ) -> Result<Self, CertError> {
        Self::generate_for(&service_dns_names(service, namespace), now, validity)
    }

    /// A new CA and a serving certificate for `names` (DNS names or IP
    /// addresses), valid from `now` for `validity`.
    pub fn generate_for(
        names: &[String],
        now: SystemTime,
        validity: Duration,
    ) -> Result<Self, CertError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = ca_params()?;
        ca.not_before = offset(now - BACKDATE)?;
        ca.not_after = offset(now + CA_VALIDITY)?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let ca_cert_pem = ca_cert.pem();
        let ca_key_pem = ca_key.serialize_pem();
        Self::sign(ca_cert_pem, ca_key_pem, names, now, validity)
    }

    /// A new serving certificate for `names`, signed by this pair's CA
    /// (what a rotation does: the `caBundle`s stay valid).
    pub fn renew(
        &self,
        names: &[String],
        now: SystemTime,
        validity: Duration,
    ) -> Result<Self, CertError> {
        Self::sign(
            self.ca_cert_pem.clone(),
            self.ca_key_pem.clone(),
            names,
            now,
            validity,
        )
    }

    fn sign(
        ca_cert_pem: String,
        ca_key_pem: String,
        names: &[String],
        now: SystemTime,
        validity: Duration,
    ) -> Result<Self, CertError> {
        let ca_key = KeyPair::from_pem(&ca_key_pem)?;
        // The issuer is named by the CA's subject and identified by its key,
        // both rebuilt from what is stored: no certificate parsing needed.
        let issuer = Issuer::new(ca_params()?, ca_key);
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names.to_vec())?;
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().map_or("webhook", String::as_str),
        );
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let not_after = now + validity;
        params.not_before = offset(now - BACKDATE)?;
        params.not_after = offset(not_after)?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(SelfSigned {
            // The chain: leaf, then the CA.
            cert_pem: format!("{}{}", cert.pem(), ca_cert_pem),
            key_pem: key.serialize_pem(),
            ca_cert_pem,
            ca_key_pem,
            not_after,
        })
    }

    /// Rebuilds a pair from its stored parts (a Secret's data).
    pub fn from_parts(
        ca_cert_pem: String,
        ca_key_pem: String,
        cert_pem: String,
        key_pem: String,
        not_after: SystemTime,
    ) -> Self {
        SelfSigned {
            ca_cert_pem,
            ca_key_pem,
            cert_pem,
            key_pem,
            not_after,
        }
    }

    /// The CA certificate, PEM: what goes into every `caBundle`.
    pub fn ca_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The CA's private key, PEM.
    pub fn ca_key_pem(&self) -> &str {
        &self.ca_key_pem
    }

    /// The serving chain (leaf, then the CA), PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The serving certificate's private key, PEM.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// When the serving certificate expires.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn renewing_keeps_the_ca_and_changes_the_leaf() {
        let now = SystemTime::now();
        let names = service_dns_names("hooks", "system");
        let a = SelfSigned::generate_for(&names, now, Duration::from_secs(60)).unwrap();
        let b = a
            .renew(
                &names,
                now + Duration::from_secs(30),
                Duration::from_secs(60),
            )
            .unwrap();
        assert_eq!(a.ca_pem(), b.ca_pem());
        assert_ne!(a.cert_pem(), b.cert_pem());
        assert!(b.not_after() > a.not_after());
        assert!(b.cert_pem().ends_with(a.ca_pem()));
        assert!(!format!("{a:?}").contains("PRIVATE"));
    }
}
