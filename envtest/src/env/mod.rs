//! [`TestEnv`]: one running server on a random loopback port, with a ready
//! `kube_client::Client`, its base URL, a kubeconfig, fault controls and the
//! request log. Dropping it stops the server and closes open watches. With
//! `USE_EXISTING_CLUSTER=true` it uses the current kubeconfig's cluster
//! instead (see [`USE_EXISTING_CLUSTER`]).

mod builder;
mod cleanup;
mod crd_check;
mod crds;
mod existing;
mod rbac;

pub use builder::TestEnvBuilder;
pub use cleanup::{RUN_LABEL, cleanup_existing_cluster};
pub use existing::{
    KEEP_CRDS, NAMESPACE_PREFIX, TEARDOWN_TIMEOUT, USE_EXISTING_CLUSTER, WEBHOOK_ADDR,
    skip_on_existing_cluster, skip_without_webhook_route, use_existing_cluster,
};

use crate::error::Error;
use crate::http::faults::{Faults, RequestRecord};
use crate::http::state::Server;
use crate::kubeconfig::kubeconfig_yaml_with_ca;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Default number of events kept for watch resume.
pub const DEFAULT_HISTORY_WINDOW: usize = 4096;
/// Default interval between watch bookmarks.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);
/// Default largest accepted request body (as a real API server: 3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;
/// Default time a request may take before it is answered 504 Timeout (as a
/// real API server's `--request-timeout`: one minute; watches are exempt).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Namespaces that exist from the start.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// A running in-process API server.
///
/// ```no_run
/// # async fn demo() -> Result<(), envtest::Error> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let env = envtest::TestEnv::start().await?;
/// let cms: kube_client::Api<ConfigMap> = kube_client::Api::namespaced(env.client(), "default");
/// let list = cms.list(&Default::default()).await;
/// assert!(list.is_ok());
/// # Ok(()) }
/// ```
pub struct TestEnv {
    base_url: String,
    client: kube_client::Client,
    mode: Mode,
    /// The listener [`TestEnvBuilder::webhook_server`] asked for, until
    /// taken.
    webhook_listener: std::sync::Mutex<Option<std::net::TcpListener>>,
}

/// Where a [`TestEnv`] runs: its own server, or a cluster it only uses.
enum Mode {
    Local(Local),
    Existing(Box<existing::Existing>),
}

/// The in-process server of a [`TestEnv`].
struct Local {
    server: Arc<Server>,
    /// The generated CA's certificate (PEM, DER) when serving HTTPS.
    ca: Option<(String, Vec<u8>)>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// The client configuration [`TestEnv::client`] uses: default namespace
/// `default`, and kube-client's automatic retry of 429/503/504 turned off so
/// that injected faults reach the code under test exactly as configured;
/// with TLS, the generated CA (DER) as the only trusted root.
fn client_config(
    uri: http::Uri,
    token: Option<&str>,
    ca_der: Option<&[u8]>,
) -> kube_client::Config {
    let mut config = kube_client::Config::new(uri);
    config.default_namespace = "default".into();
    config.default_retry = false;
    config.root_cert = ca_der.map(|der| vec![der.to_vec()]);
    if let Some(t) = token {
        // An AuthInfo with only a token always deserializes.
        if let Ok(auth) = serde_json::from_value(json!({ "token": t })) {
            config.auth_info = auth;
        }
    }
    config
}

impl TestEnv {
    /// Start a server with default settings on a random loopback port (or
    /// use an existing cluster: see [`TestEnvBuilder::start`]).
    pub async fn start() -> Result<TestEnv, Error> {
        TestEnv::builder().start().await
    }

    /// A builder for non-default settings.
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder::default()
    }

    /// The in-process server, or [`Error::EnvtestOnly`] naming `feature`
    /// against an existing cluster: a test that needs it must say so with
    /// [`skip_on_existing_cluster`] instead of passing without it.
    fn local(&self, feature: &str) -> Result<&Local, Error> {
        match &self.mode {
            Mode::Local(local) => Ok(local),
            Mode::Existing(_) => Err(Error::EnvtestOnly {
                feature: feature.into(),
            }),
        }
    }

    /// This env's run id on an existing cluster: the value of the
    /// [`RUN_LABEL`] on everything it creates there, and the suffix of the
    /// cluster-wide names it gives ([`TestEnv::cluster_scoped_name`]).
    /// `None` on the in-process server.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// assert_eq!(env.run_id().is_some(), env.is_existing_cluster());
    /// # Ok(()) }
    /// ```
    pub fn run_id(&self) -> Option<&str> {
        match &self.mode {
            Mode::Local(_) => None,
            Mode::Existing(e) => Some(&e.run),
        }
    }

    /// The name this env gives a cluster-scoped object named `name` by the
    /// test (a ClusterRole of [`TestEnv::client_with_cluster_role`]):
    /// `name` itself on the in-process server, `name-<run id>` on an
    /// existing cluster, so that no object of the cluster's own is
    /// replaced. A test that creates cluster-scoped objects itself names
    /// them so too, and labels them with [`TestEnv::run_labels`], so that
    /// the teardown (or [`cleanup_existing_cluster`]) removes them.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// let name = env.cluster_scoped_name("cm-reader");
    /// assert_eq!(name == "cm-reader", !env.is_existing_cluster());
    /// # Ok(()) }
    /// ```
    pub fn cluster_scoped_name(&self, name: &str) -> String {
        match &self.mode {
            Mode::Local(_) => name.to_string(),
            Mode::Existing(e) => format!("{name}-{}", e.run),
        }
    }

    /// The labels of this env's run (`{RUN_LABEL: run id}`) for an object
    /// the test creates on an existing cluster outside
    /// [`TestEnv::namespace`]: this env's teardown deletes the
    /// cluster-scoped objects and RBAC objects that carry them. Empty on
    /// the in-process server.
    pub fn run_labels(&self) -> std::collections::BTreeMap<String, String> {
        self.run_id()
            .map(|run| [(RUN_LABEL.to_string(), run.to_string())].into())
            .unwrap_or_default()
    }

    /// Whether this env uses an existing cluster (`USE_EXISTING_CLUSTER=true`)
    /// rather than a server of its own.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// assert_eq!(env.is_existing_cluster(), envtest::use_existing_cluster()?);
    /// # Ok(()) }
    /// ```
    pub fn is_existing_cluster(&self) -> bool {
        matches!(self.mode, Mode::Existing(_))
    }

    /// The namespace a test should put its objects in, and the default
    /// namespace of [`TestEnv::client`]: `default` on the in-process server;
    /// on an existing cluster a namespace of this env's own
    /// (`envtest-<random>`), deleted when the env is dropped.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let env = envtest::TestEnv::start().await?;
    /// let cms: kube_client::Api<ConfigMap> = kube_client::Api::namespaced(env.client(), env.namespace());
    /// # drop(cms); Ok(()) }
    /// ```
    pub fn namespace(&self) -> &str {
        match &self.mode {
            Mode::Local(_) => "default",
            Mode::Existing(e) => &e.namespace,
        }
    }

    /// The listener for this test's webhook server that
    /// [`TestEnvBuilder::webhook_server`] asked for: the server's (or the
    /// cluster's) calls for that Service reach it. `None` when not asked
    /// for, or taken already.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder()
    ///     .webhook_server("default/webhook-service")
    ///     .start()
    ///     .await?;
    /// assert!(env.webhook_listener().is_some());
    /// assert!(env.webhook_listener().is_none(), "taken");
    /// # Ok(()) }
    /// ```
    pub fn webhook_listener(&self) -> Option<std::net::TcpListener> {
        self.webhook_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// A client for this server (cheap to clone), its default namespace
    /// [`TestEnv::namespace`]. On the in-process server it does not retry on
    /// its own (kube-client's default retry of 429/503/504 is off), so
    /// injected faults reach the caller exactly as configured; on an
    /// existing cluster it is the kubeconfig's client, with kube-client's
    /// defaults.
    pub fn client(&self) -> kube_client::Client {
        self.client.clone()
    }

    /// The configuration behind [`TestEnv::client`], to build a client with
    /// other settings (for example `default_retry = true`).
    pub fn client_config(&self) -> kube_client::Config {
        match &self.mode {
            // base_url is generated by us and always a valid URI.
            Mode::Local(local) => client_config(
                self.base_url.parse().unwrap_or_default(),
                local.server.config.bearer_token.as_deref(),
                local.ca_der(),
            ),
            Mode::Existing(e) => e.config.clone(),
        }
    }

    /// A client acting as service account `namespace/name`: its requests
    /// are authorized by the Roles, ClusterRoles and bindings stored in this
    /// server (403 Forbidden for anything no binding grants), while
    /// [`TestEnv::client`] stays unrestricted. See
    /// [`TestEnv::client_with_cluster_role`] to create the role and binding
    /// in one step. On an existing cluster the kubeconfig's user
    /// impersonates the account (it needs the `impersonate` verb, as a
    /// cluster admin has).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::core::v1::Secret;
    /// let env = envtest::TestEnv::start().await?;
    /// let client = env.service_account_client("default", "reader")?;
    /// let secrets: kube_client::Api<Secret> = kube_client::Api::default_namespaced(client);
    /// let denied = secrets.list(&Default::default()).await.unwrap_err();
    /// assert!(matches!(denied, kube_client::Error::Api(s) if s.code == 403));
    /// # Ok(()) }
    /// ```
    pub fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube_client::Client, Error> {
        let config = match &self.mode {
            Mode::Local(local) => {
                let token = self.try_service_account_token(namespace, name)?;
                client_config(
                    self.base_url.parse().unwrap_or_default(),
                    Some(&token),
                    local.ca_der(),
                )
            }
            Mode::Existing(e) => {
                let mut config = e.config.clone();
                config.auth_info.impersonate =
                    Some(format!("system:serviceaccount:{namespace}:{name}"));
                config
            }
        };
        kube_client::Client::try_from(config).map_err(|e| Error::Client {
            url: self.base_url.clone(),
            message: e.to_string(),
        })
    }

    /// A new bearer token of service account `namespace/name`, as a
    /// projected token a Pod mounts: requests carrying it are authorized
    /// like those of [`TestEnv::service_account_client`], and a
    /// `TokenReview` of it names the service account (for code that
    /// authenticates its own clients, such as a guarded metrics endpoint).
    ///
    /// # Panics
    ///
    /// On an existing cluster (envtest mints these tokens itself), with the
    /// error [`TestEnv::try_service_account_token`] returns there.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// let token = env.service_account_token("monitoring", "prometheus");
    /// assert!(!token.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        self.try_service_account_token(namespace, name)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestEnv::service_account_token`], or on an existing cluster
    /// [`Error::EnvtestOnly`] naming `service_account_token`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// match env.try_service_account_token("monitoring", "prometheus") {
    ///     Ok(token) => assert!(!token.is_empty()),
    ///     Err(e) => assert!(env.is_existing_cluster(), "{e}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_service_account_token(&self, namespace: &str, name: &str) -> Result<String, Error> {
        let local = self.local("service_account_token")?;
        let token = format!("sa-{}", uuid::Uuid::new_v4());
        local.server.authz.add_token(
            token.clone(),
            crate::http::authz::UserInfo::service_account(namespace, name),
        );
        Ok(token)
    }

    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` with
    /// [`TestEnvBuilder::tls`]; on an existing cluster, its URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The PEM certificate of the CA that signed this server's certificate
    /// ([`TestEnvBuilder::tls`]); `None` for plain HTTP and on an existing
    /// cluster. Generated at start, so each server has its own.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().tls().start().await?;
    /// let pem = env.ca_pem().unwrap_or_default();
    /// assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    /// # Ok(()) }
    /// ```
    pub fn ca_pem(&self) -> Option<&str> {
        match &self.mode {
            Mode::Local(local) => local.ca.as_ref().map(|(pem, _)| pem.as_str()),
            Mode::Existing(_) => None,
        }
    }

    /// A kubeconfig pointing at this server (on an existing cluster: the
    /// kubeconfig in use).
    pub fn kubeconfig(&self) -> kube_client::config::Kubeconfig {
        // The YAML is generated here and always parses; fall back to an empty config defensively.
        kube_client::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml()).unwrap_or_default()
    }

    /// The kubeconfig as YAML (what `envtest-server --kubeconfig` writes):
    /// the server, its CA with TLS, and the bearer token if there is one.
    /// On an existing cluster: the kubeconfig in use (`KUBECONFIG`, else
    /// `~/.kube/config`), merged and re-serialized; empty if it no longer
    /// reads.
    pub fn kubeconfig_yaml(&self) -> String {
        match &self.mode {
            Mode::Local(local) => kubeconfig_yaml_with_ca(
                &self.base_url,
                local.server.config.bearer_token.as_deref(),
                self.ca_pem(),
            ),
            Mode::Existing(_) => kube_client::config::Kubeconfig::read()
                .ok()
                .and_then(|k| serde_saphyr::to_string(&k).ok())
                .unwrap_or_default(),
        }
    }

    /// Fault injection controls.
    ///
    /// # Panics
    ///
    /// On an existing cluster (see [`skip_on_existing_cluster`]), with the
    /// error [`TestEnv::try_faults`] returns there.
    pub fn faults(&self) -> &Faults {
        self.try_faults().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestEnv::faults`], or on an existing cluster [`Error::EnvtestOnly`]
    /// naming `faults`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// if let Ok(faults) = env.try_faults() {
    ///     faults.pause();
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_faults(&self) -> Result<&Faults, Error> {
        Ok(&self.local("faults")?.server.faults)
    }

    /// Every request answered so far.
    ///
    /// # Panics
    ///
    /// On an existing cluster (see [`skip_on_existing_cluster`]), with the
    /// error [`TestEnv::try_request_log`] returns there.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.try_request_log().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestEnv::request_log`], or on an existing cluster
    /// [`Error::EnvtestOnly`] naming `request_log`.
    pub fn try_request_log(&self) -> Result<Vec<RequestRecord>, Error> {
        Ok(self.local("request_log")?.server.faults.request_log())
    }

    /// The current global revision (the RV the next LIST would report).
    ///
    /// # Panics
    ///
    /// On an existing cluster (see [`skip_on_existing_cluster`]), with the
    /// error [`TestEnv::try_current_revision`] returns there.
    pub fn current_revision(&self) -> u64 {
        self.try_current_revision()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestEnv::current_revision`], or on an existing cluster
    /// [`Error::EnvtestOnly`] naming `current_revision`.
    pub fn try_current_revision(&self) -> Result<u64, Error> {
        Ok(self.local("current_revision")?.server.store.rev())
    }
}

impl Local {
    fn ca_der(&self) -> Option<&[u8]> {
        self.ca.as_ref().map(|(_, der)| der.as_slice())
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        match &self.mode {
            Mode::Local(local) => {
                local.shutdown.cancel();
                local.server.faults.drop_watches();
            }
            Mode::Existing(existing) => {
                // A failed cleanup leaves the cluster dirty for the next
                // test: fail this one (unless it fails already).
                if let Err(e) = existing.teardown()
                    && !std::thread::panicking()
                {
                    panic!("envtest teardown on the existing cluster: {e}");
                }
            }
        }
    }
}
