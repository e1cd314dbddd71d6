//! [`TestEnvBuilder`]: the settings of a [`TestEnv`], and starting it (its
//! own server, or an existing cluster).

use super::{
    DEFAULT_BOOKMARK_INTERVAL, DEFAULT_HISTORY_WINDOW, DEFAULT_MAX_BODY_BYTES, DEFAULT_NAMESPACES,
    DEFAULT_REQUEST_TIMEOUT, Local, Mode, TestEnv, client_config, crds, existing,
};
use crate::error::Error;
use crate::http::faults::Faults;
use crate::http::server::router;
use crate::http::state::{Config, Server};
use crate::resources::registry::Registry;
use crate::storage::Store;
use crate::tls::{Certificates, TlsListener};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
    /// The Service this test's webhook server answers for (see
    /// [`TestEnvBuilder::webhook_server`]).
    webhook_server: Option<String>,
    keep_crds: bool,
    replace_existing_crds: bool,
    json_only: bool,
    /// The cluster [`existing_cluster`](Self::existing_cluster) names.
    existing_cluster: Option<kube_client::Config>,
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
            webhook_server: None,
            keep_crds: false,
            replace_existing_crds: false,
            json_only: false,
            existing_cluster: None,
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

    /// This test serves the webhooks whose `clientConfig` names the
    /// Service `service` (`namespace/name[:port]`, as in
    /// [`webhook_service`](Self::webhook_service)):
    /// [`TestEnv::webhook_listener`] then hands out a listener that the
    /// API server's calls for that Service reach. On the in-process server
    /// it is a free local port, mapped to the Service. On an existing
    /// cluster it is bound to the address in `ENVTEST_WEBHOOK_ADDR`
    /// ([`WEBHOOK_ADDR`](crate::WEBHOOK_ADDR)), where whoever runs the
    /// tests routed that Service (`envtest-server --webhook-service
    /// SERVICE=ADDR` does; on kind, a Service without a selector and an
    /// EndpointSlice pointing at the host); without the variable
    /// [`start`](Self::start) fails naming it, and
    /// [`skip_without_webhook_route`](crate::skip_without_webhook_route)
    /// lets a test say it was skipped instead.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder()
    ///     .webhook_server("default/webhook-service")
    ///     .start()
    ///     .await?;
    /// let listener = env.webhook_listener().expect("asked for at start");
    /// // ... serve the webhooks on `listener` (WebhookOptions::listener)
    /// # drop(listener); Ok(()) }
    /// ```
    pub fn webhook_server(mut self, service: impl Into<String>) -> Self {
        self.webhook_server = Some(service.into());
        self
    }

    /// Serve JSON only, as a server without protobuf would: protobuf is
    /// passed over in `Accept` (`application/vnd.kubernetes.protobuf,
    /// application/json` gets JSON; protobuf alone gets 406 Not Acceptable)
    /// and a protobuf request body is 415. For testing clients' fallback.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().json_only().start().await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn json_only(mut self) -> Self {
        self.json_only = true;
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

    /// With `USE_EXISTING_CLUSTER=true`, leave the CRDs this env installed
    /// on the cluster when it is dropped (as `ENVTEST_KEEP_CRDS=true` does);
    /// no effect on the in-process server.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder().keep_crds().start().await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn keep_crds(mut self) -> Self {
        self.keep_crds = true;
        self
    }

    /// In existing-cluster mode, replace a CRD that is on the cluster
    /// already and does not serve what the test needs with the test's
    /// definition, instead of failing the start. **Destructive**: the CRD
    /// is the cluster's, shared with whatever else uses it (a deployed
    /// operator, its objects of a version the test's CRD drops); it stays
    /// replaced after the test, as this run did not create it. Use it on a
    /// disposable cluster only. No effect on the in-process server.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), envtest::Error> {
    /// let env = envtest::TestEnv::builder()
    ///     .replace_existing_crds_destructively()
    ///     .start()
    ///     .await?;
    /// # drop(env); Ok(()) }
    /// ```
    pub fn replace_existing_crds_destructively(mut self) -> Self {
        self.replace_existing_crds = true;
        self
    }

    /// Use the cluster `config` reaches, as `USE_EXISTING_CLUSTER=true`
    /// uses the kubeconfig's: existing-cluster mode whatever the variable
    /// says (see [`TestEnvBuilder::start`]). [`TestEnv::client_config`] is
    /// then `config` (its default namespace the env's);
    /// [`TestEnv::kubeconfig_yaml`] still reads the kubeconfig files.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = kube_client::Config::infer().await?;
    /// let env = envtest::TestEnv::builder().existing_cluster(config).start().await?;
    /// assert!(env.is_existing_cluster());
    /// # Ok(()) }
    /// ```
    pub fn existing_cluster(mut self, config: kube_client::Config) -> Self {
        self.existing_cluster = Some(config);
        self
    }

    /// The settings only the in-process server has that differ from the
    /// defaults, by method name.
    fn local_only_settings(&self) -> Vec<&'static str> {
        let d = TestEnvBuilder::default();
        [
            (self.history_window != d.history_window, "history_window"),
            (
                self.bookmark_interval != d.bookmark_interval,
                "bookmark_interval",
            ),
            (self.max_body_bytes != d.max_body_bytes, "max_body_bytes"),
            (self.request_timeout != d.request_timeout, "request_timeout"),
            (self.watch_buffer != d.watch_buffer, "watch_buffer"),
            (self.port != d.port, "port"),
            (self.bearer_token.is_some(), "bearer_token"),
            (self.tls, "tls"),
            (self.data_dir.is_some(), "data_dir"),
            (self.admin, "admin_endpoints"),
            (!self.webhook_services.is_empty(), "webhook_service"),
            (self.json_only, "json_only"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }

    /// Start the server; or, with `USE_EXISTING_CLUSTER=true` (or
    /// [`existing_cluster`](Self::existing_cluster)), use the current
    /// kubeconfig's cluster instead: a namespace of this env's own
    /// ([`TestEnv::namespace`]), the CRDs that are not there installed and
    /// waited on until `Established`, those that are used as they are
    /// when they serve what the test needs (else an error naming the
    /// difference), everything created labelled with the env's run and
    /// removed again on drop (see [`RUN_LABEL`](crate::RUN_LABEL) and the
    /// book's "Running your tests against a cluster"). A setting only the in-process server has
    /// (faults, TLS, a token, `json_only`, ...) is then an
    /// [`Error::EnvtestOnly`] naming it.
    pub async fn start(self) -> Result<TestEnv, Error> {
        let mut crds = self.crds.clone();
        for dir in &self.crd_dirs {
            crds.extend(crds::read_crd_dir(dir)?);
        }
        let cluster = match &self.existing_cluster {
            Some(config) => Some(config.clone()),
            None if existing::use_existing_cluster()? => {
                Some(existing::kubeconfig_cluster().await?)
            }
            None => None,
        };
        if let Some(config) = cluster {
            if let Some(feature) = self.local_only_settings().first() {
                return Err(Error::EnvtestOnly {
                    feature: (*feature).into(),
                });
            }
            let webhook_listener = match &self.webhook_server {
                Some(service) => Some(existing::webhook_listener(service)?),
                None => None,
            };
            let policy = existing::CrdPolicy {
                keep: self.keep_crds,
                replace_existing: self.replace_existing_crds,
            };
            let (existing, client) = existing::connect(config, &crds, policy).await?;
            return Ok(TestEnv {
                base_url: existing.config.cluster_url.to_string(),
                client,
                mode: Mode::Existing(Box::new(existing)),
                webhook_listener: Mutex::new(webhook_listener),
            });
        }
        let mut webhook_services = self.webhook_services.clone();
        let webhook_listener = match &self.webhook_server {
            Some(service) => {
                let (listener, addr) = existing::bind("127.0.0.1:0")?;
                webhook_services.insert(service.clone(), addr);
                Some(listener)
            }
            None => None,
        };
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
                webhook_services,
                json_only: self.json_only,
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
            base_url,
            client,
            mode: Mode::Local(Local {
                server,
                ca,
                shutdown,
            }),
            webhook_listener: Mutex::new(webhook_listener),
        };
        crds::install_crds(&env, &crds).await?;
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
