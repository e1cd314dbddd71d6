//! Certificates the manager makes for itself, without cert-manager: a CA
//! and a serving certificate it signs for the webhook Service's DNS names,
//! both ECDSA P-256 (rcgen on ring).
//!
//! Part of the serving certificates ([`crate::tls`]). [`super::certsecret`] keeps
//! the pair in a Secret so that every replica serves the same one, writes
//! the CA bundle into the `caBundle`s and renews both before they expire;
//! this module only makes them. The CA lives much longer than the serving
//! certificate ([`CA_VALIDITY`]), so a renewal of the serving certificate
//! re-signs with the same CA and no `caBundle` changes. The CA itself is
//! rotated in three steps, each a new [`SelfSigned`]: a next CA is made
//! and published beside the signing one ([`SelfSigned::with_next_ca`]),
//! later it signs a new serving certificate while the old CA stays
//! published ([`SelfSigned::switch_to_next_ca`]), and last the old CA is
//! dropped ([`SelfSigned::without_previous_ca`]). A client trusting the
//! published bundle trusts the served certificate at every step.

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
#[non_exhaustive]
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
/// use controller_runtime::tls::service_dns_names;
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

/// A CA that is published but does not sign yet (the first step of a CA
/// rotation).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct NextCa {
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

/// A CA, and a serving certificate it signed, in PEM, with the serving
/// certificate's expiry; during a CA rotation also the other CA that is
/// published with it (the next one, or the previous one).
#[derive(Clone)]
pub struct SelfSigned {
    ca_cert_pem: String,
    ca_key_pem: String,
    ca_not_after: Option<SystemTime>,
    cert_pem: String,
    key_pem: String,
    not_after: SystemTime,
    /// Published, not signing yet.
    next_ca: Option<NextCa>,
    /// Published, no longer signing.
    previous_ca: Option<String>,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a private key.
        f.debug_struct("SelfSigned")
            .field("not_after", &self.not_after)
            .field("ca_not_after", &self.ca_not_after)
            .field("next_ca", &self.next_ca.is_some())
            .field("previous_ca", &self.previous_ca.is_some())
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

/// A new CA, valid `validity` from `now`.
fn new_ca(now: SystemTime, validity: Duration) -> Result<NextCa, CertError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = ca_params()?;
    ca.not_before = offset(now - BACKDATE)?;
    ca.not_after = offset(now + validity)?;
    let ca_cert = ca.self_signed(&ca_key)?;
    Ok(NextCa {
        cert_pem: ca_cert.pem(),
        key_pem: ca_key.serialize_pem(),
    })
}

impl SelfSigned {
    /// A new CA and a serving certificate for `service` in `namespace`
    /// (its [`service_dns_names`]), valid from `now` for `validity`.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use controller_runtime::tls::SelfSigned;
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
        Self::generate_with_ca_validity(names, now, validity, CA_VALIDITY)
    }

    /// As [`SelfSigned::generate_for`], the CA valid for `ca_validity`.
    pub(crate) fn generate_with_ca_validity(
        names: &[String],
        now: SystemTime,
        validity: Duration,
        ca_validity: Duration,
    ) -> Result<Self, CertError> {
        let ca = new_ca(now, ca_validity)?;
        let unsigned = SelfSigned {
            ca_cert_pem: ca.cert_pem,
            ca_key_pem: ca.key_pem,
            ca_not_after: Some(now + ca_validity),
            cert_pem: String::new(),
            key_pem: String::new(),
            not_after: now,
            next_ca: None,
            previous_ca: None,
        };
        unsigned.renew(names, now, validity)
    }

    /// A new serving certificate for `names`, signed by this pair's CA
    /// (what a renewal does: the `caBundle`s stay valid). It expires after
    /// `validity`, or with the CA if that comes first.
    pub fn renew(
        &self,
        names: &[String],
        now: SystemTime,
        validity: Duration,
    ) -> Result<Self, CertError> {
        let ca_key = KeyPair::from_pem(&self.ca_key_pem)?;
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
        let mut not_after = now + validity;
        if let Some(ca_not_after) = self.ca_not_after {
            not_after = not_after.min(ca_not_after);
        }
        params.not_before = offset(now - BACKDATE)?;
        params.not_after = offset(not_after)?;
        let cert = params.signed_by(&key, &issuer)?;
        Ok(SelfSigned {
            // The chain: leaf, then the CA.
            cert_pem: format!("{}{}", cert.pem(), self.ca_cert_pem),
            key_pem: key.serialize_pem(),
            not_after,
            ..self.clone()
        })
    }

    /// The first step of a CA rotation: a new CA, valid `ca_validity`
    /// from `now`, published beside the signing one; nothing is signed with
    /// it yet.
    pub(crate) fn with_next_ca(
        &self,
        now: SystemTime,
        ca_validity: Duration,
    ) -> Result<Self, CertError> {
        Ok(SelfSigned {
            next_ca: Some(new_ca(now, ca_validity)?),
            previous_ca: None,
            ..self.clone()
        })
    }

    /// The second step: the next CA signs a new serving certificate for
    /// `names` (its expiry `ca_not_after`); the old CA stays published.
    /// Without a next CA, a renewal.
    pub(crate) fn switch_to_next_ca(
        &self,
        names: &[String],
        now: SystemTime,
        validity: Duration,
        ca_not_after: SystemTime,
    ) -> Result<Self, CertError> {
        let Some(next) = &self.next_ca else {
            return self.renew(names, now, validity);
        };
        SelfSigned {
            ca_cert_pem: next.cert_pem.clone(),
            ca_key_pem: next.key_pem.clone(),
            ca_not_after: Some(ca_not_after),
            next_ca: None,
            previous_ca: Some(self.ca_cert_pem.clone()),
            ..self.clone()
        }
        .renew(names, now, validity)
    }

    /// The last step: the previous CA is no longer published.
    pub(crate) fn without_previous_ca(&self) -> Self {
        SelfSigned {
            previous_ca: None,
            ..self.clone()
        }
    }

    /// Rebuilds a pair from its stored parts (a Secret's data); the CA's
    /// expiry is not known.
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
            ca_not_after: None,
            cert_pem,
            key_pem,
            not_after,
            next_ca: None,
            previous_ca: None,
        }
    }

    /// The same pair with the CA rotation state read back from storage.
    pub(crate) fn with_rotation_state(
        mut self,
        ca_not_after: Option<SystemTime>,
        next_ca: Option<NextCa>,
        previous_ca: Option<String>,
    ) -> Self {
        self.ca_not_after = ca_not_after;
        self.next_ca = next_ca;
        self.previous_ca = previous_ca;
        self
    }

    /// The CA that signs the serving certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// Every CA a client should trust now, PEM: the signing CA, then, while
    /// the CA is being rotated, the next or the previous one. What goes
    /// into every `caBundle` (and the Secret's `ca.crt`).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use controller_runtime::tls::SelfSigned;
    /// let pair = SelfSigned::generate("hooks", "system", SystemTime::now(), Duration::from_secs(3600)).unwrap();
    /// assert_eq!(pair.ca_bundle_pem(), pair.ca_pem());
    /// ```
    pub fn ca_bundle_pem(&self) -> String {
        let mut bundle = self.ca_cert_pem.clone();
        for other in [
            self.next_ca.as_ref().map(|n| &n.cert_pem),
            self.previous_ca.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if !bundle.ends_with('\n') {
                bundle.push('\n');
            }
            bundle.push_str(other);
        }
        bundle
    }

    /// When the signing CA expires, if known (a pair rebuilt with
    /// [`SelfSigned::from_parts`] does not know it).
    pub fn ca_not_after(&self) -> Option<SystemTime> {
        self.ca_not_after
    }

    /// The CA published but not signing yet, during a rotation.
    pub(crate) fn next_ca(&self) -> Option<&NextCa> {
        self.next_ca.as_ref()
    }

    /// The CA published but no longer signing, during a rotation.
    pub(crate) fn previous_ca(&self) -> Option<&str> {
        self.previous_ca.as_deref()
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

    #[test]
    fn a_ca_rotation_publishes_the_next_ca_before_it_signs() {
        let now = SystemTime::now();
        let names = service_dns_names("hooks", "system");
        let day = Duration::from_secs(24 * 3600);
        let old = SelfSigned::generate_for(&names, now, day).unwrap();
        let published = old.with_next_ca(now, CA_VALIDITY).unwrap();
        let next = published.next_ca().unwrap().cert_pem.clone();
        // Still signed by the old CA; both published.
        assert_eq!(published.cert_pem(), old.cert_pem());
        assert_eq!(published.ca_bundle_pem(), format!("{}{next}", old.ca_pem()));
        let switched = published
            .switch_to_next_ca(&names, now, day, now + CA_VALIDITY)
            .unwrap();
        assert_eq!(switched.ca_pem(), next);
        assert!(switched.cert_pem().ends_with(&next));
        assert_eq!(switched.previous_ca(), Some(old.ca_pem()));
        assert_eq!(switched.ca_bundle_pem(), format!("{next}{}", old.ca_pem()));
        let done = switched.without_previous_ca();
        assert_eq!(done.ca_bundle_pem(), next);
        // A serving certificate never outlives its CA.
        let short = SelfSigned::generate_for(&names, now, CA_VALIDITY * 2).unwrap();
        assert_eq!(short.not_after(), now + CA_VALIDITY);
    }
}
