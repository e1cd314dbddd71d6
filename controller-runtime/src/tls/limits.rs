//! What the manager's HTTPS servers (the webhook server and the secure
//! metrics server) grant one client: how long its TLS handshake, its
//! request headers and a review body may take, and how many connections
//! are open at once, so that a client trickling bytes, never finishing a
//! handshake or holding connections idle cannot exhaust the server.
//!
//! Part of [`crate::tls`]: its TLS listener ([`super::listener`]) holds
//! the handshake timeout and the connection cap, [`super::serve`] the
//! header timeout, the webhook server's review route the body timeout.

use std::time::Duration;

/// How long a client may take to finish its TLS handshake by default.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's headers by default (an
/// idle kept-alive connection is closed after it too).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a review body may take to arrive by default: the API server
/// waits 30 s at the most for a webhook (`timeoutSeconds`), so nobody
/// waits for a body slower than that.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections are open at once by default (handshaking or
/// handshaken); more wait in the kernel's accept queue until one closes.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// What one client is granted by the webhook server (`WebhookServer::limits`,
/// `WebhookOptions::limits`, with the `webhook` feature) or the secure
/// metrics server
/// ([`ManagerBuilder::metrics_server_limits`](crate::manager::ManagerBuilder::metrics_server_limits)).
///
/// A handshake or request headers slower than their timeout close the
/// connection; a review body slower than its timeout is a `408`; beyond
/// the connection cap new connections wait until one closes. The size of a
/// review body is capped apart
/// (`WebhookServer::max_body_bytes`).
///
/// ```
/// use std::time::Duration;
/// use controller_runtime::tls::ServerLimits;
/// let limits = ServerLimits::new()
///     .header_timeout(Duration::from_secs(5))
///     .max_connections(512);
/// assert_ne!(limits, ServerLimits::default());
/// ```
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub(crate) handshake_timeout: Duration,
    pub(crate) header_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits::new()
    }
}

impl ServerLimits {
    /// The defaults: [`DEFAULT_HANDSHAKE_TIMEOUT`],
    /// [`DEFAULT_HEADER_TIMEOUT`], [`DEFAULT_BODY_TIMEOUT`],
    /// [`DEFAULT_MAX_CONNECTIONS`].
    pub fn new() -> Self {
        ServerLimits {
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// How long a TLS handshake may take before the connection is closed.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How long a request's headers may take (counted from the end of the
    /// handshake or of the previous answer) before the connection is closed.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// How long a review body may take, from its headers on, before it is
    /// answered `408` (the metrics server reads no bodies).
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// How many connections are open at once (at least one).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }
}
