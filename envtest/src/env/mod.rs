//! [`TestEnv`]: one running server on a random loopback port, with a ready
//! `kube_client::Client`, its base URL, a kubeconfig, fault controls and the
//! request log. Dropping it stops the server and closes open watches.

mod rbac;

use crate::error::Error;
use crate::http::faults::{Faults, RequestRecord};
use crate::http::server::router;
use crate::http::state::{Config, Server};
use crate::kubeconfig::kubeconfig_yaml_with_ca;
use crate::resources::registry::Registry;
use crate::storage::Store;
use crate::tls::{Certificates, TlsListener};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
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
    server: Arc<Server>,
    base_url: String,
    /// The generated CA's certificate (PEM, DER) when serving HTTPS.
    ca: Option<(String, Vec<u8>)>,
    client: kube_client::Client,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// Configures a [`TestEnv`] before it starts.
///
/// ```no_run
/// # async fn demo() -> Result<(), envtest::Error> {
/// let env = envtest::TestEnv::builder()
///     .history_window(10)
///     .bookmark_interval(std::time::Duration::from_millis(200))
///     .start()
///     .await?;
/// # drop(env); Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct TestEnvBuilder {
    history_window: usize,
    bookmark_interval: Duration,
    max_body_bytes: usize,
    request_timeout: Duration,
    watch_buffer: usize,
    port: u16,
    bearer_token: Option<String>,
    tls: bool,
    data_dir: Option<std::path::PathBuf>,
    crds: Vec<CustomResourceDefinition>,
    crd_dirs: Vec<std::path::PathBuf>,
    admin: bool,
    webhook_services: std::collections::BTreeMap<String, String>,
}

impl Default for TestEnvBuilder {
    fn default() -> Self {
        TestEnvBuilder {
            history_window: DEFAULT_HISTORY_WINDOW,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            watch_buffer: 8192,
            port: 0,
            bearer_token: None,
            tls: false,
            data_dir: None,
            crds: Vec::new(),
            crd_dirs: Vec::new(),
            admin: false,
            webhook_services: Default::default(),
        }
    }
}

impl TestEnvBuilder {
    /// How many events of history to keep for watch resume and continue tokens.
    pub fn history_window(mut self, events: usize) -> Self {
        self.history_window = events;
        self
    }

    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// Largest accepted request body (413 beyond).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// How long a request (other than a watch stream) may take, reading its
    /// body included, before it is answered 504 Timeout.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder()
    ///     .request_timeout(std::time::Duration::from_secs(5))
    ///     .start()
    ///     .await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// How many events one watcher may fall behind before it is closed.
    pub fn watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events;
        self
    }

    /// Serve the test-only admin endpoints `POST /envtest/v1/compact` and
    /// `POST /envtest/v1/drop-watches`, so a client in another process can
    /// force a 410 on watch resume (off by default: 404 there, as on a cluster).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().admin_endpoints().start().await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn admin_endpoints(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Send admission and conversion webhooks whose `clientConfig` names
    /// the Service `service` (`namespace/name`, or `namespace/name:port`
    /// for one port only; the port defaults to 443) to `addr` (`host:port`),
    /// as Go's envtest points them at its local webhook server. The webhook
    /// must present a certificate for `name.namespace.svc` signed by the
    /// configuration's `caBundle`, as on a cluster.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder()
    ///     .webhook_service("system/webhook-service", "127.0.0.1:9443")
    ///     .start()
    ///     .await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn webhook_service(mut self, service: impl Into<String>, addr: impl Into<String>) -> Self {
        self.webhook_services.insert(service.into(), addr.into());
        self
    }

    /// Listen on this port (0, the default, picks a free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Require `Authorization: Bearer <token>` on every request but health
    /// checks (401 otherwise). The client and kubeconfig carry the token.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }

    /// Serve HTTPS instead of plain HTTP, with a certificate authority and
    /// a server certificate (for `127.0.0.1`, `::1` and `localhost`)
    /// generated at start. [`TestEnv::client`] and the kubeconfig trust
    /// that CA. Needed for programs on client-go (kubectl, Go controllers)
    /// to send a [bearer token](Self::bearer_token): they never send one
    /// over plain HTTP.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().tls().bearer_token("s3cret").start().await?;
    /// assert!(env.base_url().starts_with("https://"));
    /// assert!(env.kubeconfig_yaml().contains("certificate-authority-data: "));
    /// # Ok(()) }
    /// ```
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Persist state in `dir`: every write is fsync'd before it is
    /// acknowledged, and a server started on the same directory gets it all
    /// back (watch history starts afresh, so earlier RVs resume with 410).
    pub fn data_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Install these CustomResourceDefinitions when the server starts;
    /// [`start`](Self::start) returns once every version they serve
    /// answers (Go envtest's `CRDs`).
    ///
    /// ```no_run
    /// # async fn demo(crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition) -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().crds([crd]).start().await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn crds(mut self, crds: impl IntoIterator<Item = CustomResourceDefinition>) -> Self {
        self.crds.extend(crds);
        self
    }

    /// Install every CustomResourceDefinition found in the `.yaml`, `.yml`
    /// and `.json` files of `dir` (YAML files may hold several documents;
    /// documents of other kinds are skipped), as [`crds`](Self::crds) does
    /// (Go envtest's `CRDDirectoryPaths`). A file that does not parse fails
    /// [`start`](Self::start) with an error naming it.
    pub fn crd_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.crd_dirs.push(dir.into());
        self
    }

    /// Start the server.
    pub async fn start(self) -> Result<TestEnv, Error> {
        let mut crds = self.crds.clone();
        for dir in &self.crd_dirs {
            crds.extend(read_crd_dir(dir)?);
        }
        let addr = format!("127.0.0.1:{}", self.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|source| Error::Bind {
                addr: addr.clone(),
                source,
            })?;
        let local = listener.local_addr().map_err(|source| Error::Bind {
            addr: addr.clone(),
            source,
        })?;
        let store = match &self.data_dir {
            Some(dir) => {
                Store::open(dir, self.history_window, self.watch_buffer).map_err(|source| {
                    Error::Io {
                        path: dir.display().to_string(),
                        source,
                    }
                })?
            }
            None => Store::new(self.history_window, self.watch_buffer),
        };
        let store = Arc::new(store);
        let server = Arc::new(Server {
            faults: Faults::new(store.clone()),
            store,
            registry: Registry::with_builtins(),
            ips: Default::default(),
            authz: Default::default(),
            config: Config {
                bookmark_interval: self.bookmark_interval,
                max_body_bytes: self.max_body_bytes,
                request_timeout: self.request_timeout,
                addr: local.to_string(),
                bearer_token: self.bearer_token.clone(),
                admin: self.admin,
                webhook_services: self.webhook_services.clone(),
            },
        });
        seed_namespaces(&server);
        restore_crds(&server);
        let shutdown = CancellationToken::new();
        let app = router(server.clone());
        let (base_url, ca) = if self.tls {
            let certs = Certificates::generate()?;
            let listener =
                TlsListener::new(listener, certs.server_config()?).map_err(|source| {
                    Error::Bind {
                        addr: addr.clone(),
                        source,
                    }
                })?;
            crate::tls::install_default_provider();
            serve(listener, app, shutdown.clone());
            (
                format!("https://{local}"),
                Some((certs.ca_pem, certs.ca_der)),
            )
        } else {
            serve(listener, app, shutdown.clone());
            (format!("http://{local}"), None)
        };
        let uri: http::Uri =
            base_url
                .parse()
                .map_err(|e: http::uri::InvalidUri| Error::Client {
                    url: base_url.clone(),
                    message: e.to_string(),
                })?;
        let ca_der = ca.as_ref().map(|(_, der)| der.as_slice());
        let config = client_config(uri, self.bearer_token.as_deref(), ca_der);
        let client = kube_client::Client::try_from(config).map_err(|e| Error::Client {
            url: base_url.clone(),
            message: e.to_string(),
        })?;
        tracing::debug!(%base_url, "envtest server started");
        let env = TestEnv {
            server,
            base_url,
            ca,
            client,
            shutdown,
        };
        install_crds(&env, &crds).await?;
        Ok(env)
    }
}

/// Serve `app` on `listener` until `shutdown`, with the HTTP layer's own
/// error answers made into `Status` bodies.
fn serve<L>(listener: L, app: axum::Router, shutdown: CancellationToken)
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    tokio::spawn(async move {
        let listener = crate::http::early_errors::StatusListener(listener);
        let serve = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned());
        if let Err(e) = serve.await {
            tracing::warn!(error = %e, "envtest server stopped with an error");
        }
    });
}

/// How long [`TestEnvBuilder::start`] waits for installed CRDs to be served.
const CRD_SERVED_TIMEOUT: Duration = Duration::from_secs(10);

/// The CRDs in the `.yaml`/`.yml`/`.json` files of `dir`, in file-name order.
fn read_crd_dir(dir: &std::path::Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let io_error = |path: &std::path::Path, source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_error(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        })
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| io_error(&file, e))?;
        let invalid = |message: String| {
            io_error(
                &file,
                std::io::Error::new(std::io::ErrorKind::InvalidData, message),
            )
        };
        let docs: Vec<serde_json::Value> = if file.extension().is_some_and(|e| e == "json") {
            vec![serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?]
        } else {
            serde_saphyr::from_multiple(&text).map_err(|e| invalid(e.to_string()))?
        };
        for doc in docs {
            if doc.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition") {
                continue;
            }
            let crd = serde_json::from_value(doc)
                .map_err(|e| invalid(format!("not a valid CustomResourceDefinition: {e}")))?;
            crds.push(crd);
        }
    }
    Ok(crds)
}

/// Creates `crds` through the API (so they are validated as any client's
/// would be) and waits until every served version lists.
async fn install_crds(env: &TestEnv, crds: &[CustomResourceDefinition]) -> Result<(), Error> {
    let api: kube_client::Api<CustomResourceDefinition> = kube_client::Api::all(env.client());
    let failed = |message: String| Error::Client {
        url: env.base_url.clone(),
        message,
    };
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.create(&Default::default(), crd)
            .await
            .map_err(|e| failed(format!("installing CRD {name}: {e}")))?;
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let path = format!(
                "/apis/{}/{}/{}",
                crd.spec.group, version.name, crd.spec.names.plural
            );
            let deadline = tokio::time::Instant::now() + CRD_SERVED_TIMEOUT;
            loop {
                let request = http::Request::get(&path)
                    .body(Vec::new())
                    .map_err(|e| failed(e.to_string()))?;
                match env.client.request_text(request).await {
                    Ok(_) => break,
                    Err(e) if tokio::time::Instant::now() >= deadline => {
                        return Err(failed(format!(
                            "CRD {name} version {} not served within {CRD_SERVED_TIMEOUT:?}: {e}",
                            version.name
                        )));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }
    }
    Ok(())
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

/// Serve the custom resources of CRDs loaded from a data directory.
fn restore_crds(server: &Server) {
    let mut crds = Vec::new();
    // Reading the latest state cannot be out of the window.
    let _ = server.store.scan(
        crate::resources::crd::STORAGE_KEY,
        None,
        None,
        None,
        |_, o| {
            crds.push(o.clone());
            true
        },
    );
    for crd in crds {
        crate::resources::crd::register(&server.registry, &crd.value);
    }
}

fn seed_namespaces(server: &Server) {
    server.store.txn(|txn| {
        for ns in DEFAULT_NAMESPACES {
            if txn.get("/namespaces", &(String::new(), ns.to_string())).is_some() {
                continue;
            }
            let obj = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": crate::resources::objects::now_rfc3339(), "generation": 1, "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {}, "status": {"phase": "Active"},
            });
            txn.put("/namespaces", (String::new(), ns.to_string()), obj);
        }
    });
}

impl TestEnv {
    /// Start a server with default settings on a random loopback port.
    pub async fn start() -> Result<TestEnv, Error> {
        TestEnv::builder().start().await
    }

    /// A builder for non-default settings.
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder::default()
    }

    /// A client for this server (cheap to clone). It does not retry on its
    /// own (kube-client's default retry of 429/503/504 is off), so injected
    /// faults reach the caller exactly as configured.
    pub fn client(&self) -> kube_client::Client {
        self.client.clone()
    }

    /// The configuration behind [`TestEnv::client`], to build a client with
    /// other settings (for example `default_retry = true`).
    pub fn client_config(&self) -> kube_client::Config {
        // base_url is generated by us and always a valid URI.
        client_config(
            self.base_url.parse().unwrap_or_default(),
            self.server.config.bearer_token.as_deref(),
            self.ca_der(),
        )
    }

    /// A client acting as service account `namespace/name`: its requests
    /// are authorized by the Roles, ClusterRoles and bindings stored in this
    /// server (403 Forbidden for anything no binding grants), while
    /// [`TestEnv::client`] stays unrestricted. See
    /// [`TestEnv::client_with_cluster_role`] to create the role and binding
    /// in one step.
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
        let token = self.service_account_token(namespace, name);
        let config = client_config(
            self.base_url.parse().unwrap_or_default(),
            Some(&token),
            self.ca_der(),
        );
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
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::start().await?;
    /// let token = env.service_account_token("monitoring", "prometheus");
    /// assert!(!token.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let token = format!("sa-{}", uuid::Uuid::new_v4());
        self.server.authz.add_token(
            token.clone(),
            crate::http::authz::UserInfo::service_account(namespace, name),
        );
        token
    }

    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` with
    /// [`TestEnvBuilder::tls`].
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The PEM certificate of the CA that signed this server's certificate
    /// ([`TestEnvBuilder::tls`]); `None` for plain HTTP. Generated at start,
    /// so each server has its own.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().tls().start().await?;
    /// let pem = env.ca_pem().unwrap_or_default();
    /// assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    /// # Ok(()) }
    /// ```
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca.as_ref().map(|(pem, _)| pem.as_str())
    }

    fn ca_der(&self) -> Option<&[u8]> {
        self.ca.as_ref().map(|(_, der)| der.as_slice())
    }

    /// A kubeconfig pointing at this server.
    pub fn kubeconfig(&self) -> kube_client::config::Kubeconfig {
        // The YAML is generated here and always parses; fall back to an empty config defensively.
        kube_client::config::Kubeconfig::from_yaml(&self.kubeconfig_yaml()).unwrap_or_default()
    }

    /// The kubeconfig as YAML (what `envtest-server --kubeconfig` writes):
    /// the server, its CA with TLS, and the bearer token if there is one.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml_with_ca(
            &self.base_url,
            self.server.config.bearer_token.as_deref(),
            self.ca_pem(),
        )
    }

    /// Fault injection controls.
    pub fn faults(&self) -> &Faults {
        &self.server.faults
    }

    /// Every request answered so far.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        self.server.faults.request_log()
    }

    /// The current global revision (the RV the next LIST would report).
    pub fn current_revision(&self) -> u64 {
        self.server.store.rev()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.server.faults.drop_watches();
    }
}
