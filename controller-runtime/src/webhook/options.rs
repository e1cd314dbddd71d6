//! How a manager serves webhooks: where it listens and where its
//! certificates come from (self-managed in a Secret, the default, or a
//! directory kept by cert-manager). [`WebhookOptions`] is given to the
//! manager's builder; the manager binds the port when it is built and runs
//! the server, and the certificate keeper, on every replica.
//!
//! Part of layer 3 (the manager, one layer up, consumes it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube_client::Client;

use super::declared::Declared;
use super::server::DEFAULT_PORT;
use crate::tls::{CertDir, CertKeeper, CertResolver, Clock, SecretCerts, ServerLimits};

#[derive(Debug, Clone)]
enum Source {
    SelfManaged {
        namespace: String,
        service: String,
        extra_names: Vec<String>,
        validity: Option<Duration>,
        interval: Option<Duration>,
        clock: Option<SharedClock>,
        validating: Vec<String>,
        mutating: Vec<String>,
        crds: Vec<String>,
    },
    Dir(PathBuf),
}

/// A clock shared by the options' clones.
#[derive(Clone)]
struct SharedClock(Arc<dyn Clock>);

impl std::fmt::Debug for SharedClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// Where a manager's webhook server listens and how it gets certificates.
///
/// ```
/// use controller_runtime::webhook::WebhookOptions;
/// let options = WebhookOptions::self_managed("system", "demo-webhook-service")
///     .validating_webhook("demo-validating-webhook-configuration")
///     .mutating_webhook("demo-mutating-webhook-configuration")
///     .crd("widgets.demo.example.com");
/// assert_eq!(options.addr().port(), 9443);
/// ```
#[must_use]
#[derive(Debug)]
pub struct WebhookOptions {
    addr: SocketAddr,
    listener: Option<std::net::TcpListener>,
    source: Source,
    declared: Vec<Declared>,
    limits: ServerLimits,
}

/// What [`WebhookOptions::into_parts`] splits into.
pub(crate) struct Parts {
    pub(crate) addr: SocketAddr,
    pub(crate) listener: Option<std::net::TcpListener>,
    pub(crate) keeper: CertKeeper,
    pub(crate) declared: Vec<Declared>,
    pub(crate) limits: ServerLimits,
}

impl WebhookOptions {
    /// Certificates made by the manager for the Service `service` in
    /// `namespace` and kept in the Secret `<service>-cert` (see
    /// [`SecretCerts`]); listening on `0.0.0.0:9443`.
    pub fn self_managed(namespace: impl Into<String>, service: impl Into<String>) -> Self {
        WebhookOptions {
            addr: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            listener: None,
            declared: Vec::new(),
            limits: ServerLimits::default(),
            source: Source::SelfManaged {
                namespace: namespace.into(),
                service: service.into(),
                extra_names: Vec::new(),
                validity: None,
                interval: None,
                clock: None,
                validating: Vec::new(),
                mutating: Vec::new(),
                crds: Vec::new(),
            },
        }
    }

    /// Certificates mounted in `dir` (`tls.crt`, `tls.key`; cert-manager's
    /// mode, see [`CertDir`]); listening on `0.0.0.0:9443`.
    pub fn cert_dir(dir: impl Into<PathBuf>) -> Self {
        WebhookOptions {
            addr: SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)),
            listener: None,
            declared: Vec::new(),
            limits: ServerLimits::default(),
            source: Source::Dir(dir.into()),
        }
    }

    /// Listens on `addr` (port 0: any free port).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Serves on a socket bound already.
    pub fn listener(mut self, listener: std::net::TcpListener) -> Self {
        if let Ok(addr) = listener.local_addr() {
            self.addr = addr;
        }
        self.listener = Some(listener);
        self
    }

    /// Grants each client `limits` (see [`super::WebhookServer::limits`]).
    pub fn limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The address to listen on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn self_managed_mut(&mut self) -> Option<&mut Source> {
        matches!(self.source, Source::SelfManaged { .. }).then_some(&mut self.source)
    }

    /// Self-managed mode: writes the CA into this ValidatingWebhookConfiguration.
    pub fn validating_webhook(mut self, name: impl Into<String>) -> Self {
        if let Some(Source::SelfManaged { validating, .. }) = self.self_managed_mut() {
            validating.push(name.into());
        }
        self
    }

    /// Self-managed mode: writes the CA into this MutatingWebhookConfiguration.
    pub fn mutating_webhook(mut self, name: impl Into<String>) -> Self {
        if let Some(Source::SelfManaged { mutating, .. }) = self.self_managed_mut() {
            mutating.push(name.into());
        }
        self
    }

    /// Self-managed mode: writes the CA into this CRD's conversion webhook.
    pub fn crd(mut self, name: impl Into<String>) -> Self {
        if let Some(Source::SelfManaged { crds, .. }) = self.self_managed_mut() {
            crds.push(name.into());
        }
        self
    }

    /// Self-managed mode: the certificate is also valid for `name`.
    pub fn extra_name(mut self, name: impl Into<String>) -> Self {
        if let Some(Source::SelfManaged { extra_names, .. }) = self.self_managed_mut() {
            extra_names.push(name.into());
        }
        self
    }

    /// Self-managed mode: how long a serving certificate is valid.
    pub fn validity(mut self, d: Duration) -> Self {
        if let Some(Source::SelfManaged { validity, .. }) = self.self_managed_mut() {
            *validity = Some(d);
        }
        self
    }

    /// Records webhooks the manifests declare (the manager checks each
    /// has a handler before it starts).
    pub(crate) fn declare(mut self, declared: Declared) -> Self {
        self.declared.push(declared);
        self
    }

    /// Self-managed mode: how often the certificates are checked for
    /// renewal and CA rotation (hourly by default; see
    /// [`SecretCerts::check_interval`]). A replica also reloads as soon as
    /// another one changes the Secret, whatever the interval.
    ///
    /// ```
    /// use std::time::Duration;
    /// use controller_runtime::webhook::WebhookOptions;
    /// let options = WebhookOptions::self_managed("system", "demo-webhook-service")
    ///     .check_interval(Duration::from_secs(600));
    /// ```
    pub fn check_interval(mut self, every: Duration) -> Self {
        if let Some(Source::SelfManaged { interval, .. }) = self.self_managed_mut() {
            *interval = Some(every);
        }
        self
    }

    /// Self-managed mode: reads the wall clock (certificate validity) from
    /// `clock` (see [`SecretCerts::clock`]); for tests that move time.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        if let Some(Source::SelfManaged { clock: slot, .. }) = self.self_managed_mut() {
            *slot = Some(SharedClock(Arc::new(clock)));
        }
        self
    }

    /// Splits into the socket (if bound already), the certificate keeper
    /// feeding `resolver` and the declared webhooks.
    pub(crate) fn into_parts(self, client: Client, resolver: CertResolver) -> Parts {
        let keeper = match self.source {
            Source::SelfManaged {
                namespace,
                service,
                extra_names,
                validity,
                interval,
                clock,
                validating,
                mutating,
                crds,
            } => {
                let mut certs = SecretCerts::new(client, namespace, service, resolver);
                if let Some(i) = interval {
                    certs = certs.check_interval(i);
                }
                if let Some(SharedClock(c)) = clock {
                    certs = certs.shared_clock(c);
                }
                for n in extra_names {
                    certs = certs.extra_name(n);
                }
                if let Some(v) = validity {
                    certs = certs.validity(v);
                }
                for n in validating {
                    certs = certs.validating_webhook(n);
                }
                for n in mutating {
                    certs = certs.mutating_webhook(n);
                }
                for n in crds {
                    certs = certs.crd(n);
                }
                CertKeeper::SelfManaged(certs)
            }
            Source::Dir(dir) => CertKeeper::Dir(CertDir::new(dir, resolver)),
        };
        Parts {
            addr: self.addr,
            listener: self.listener,
            keeper,
            declared: self.declared,
            limits: self.limits,
        }
    }
}
