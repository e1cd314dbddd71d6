//! From a member's kubeconfig to its client: what a kubeconfig from
//! outside the manager may use (inline credentials only, unless told
//! otherwise), and how the client behaves (no hidden retries, connect and
//! read timeouts), so that a member's list and watch errors reach its
//! informers at once and a member that stops answering cannot hold a
//! reconcile forever.

use std::time::Duration;

use kube_client::Client;
use kube_client::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use super::fleet::FleetError;
use super::member_transport;

/// How a member cluster's client is made from a kubeconfig (its current
/// context), by the [`SecretProvider`](super::SecretProvider), the
/// [`StaticProvider`](super::StaticProvider) or a provider of your own.
///
/// **Trust.** By default only inline credentials are accepted (`token`,
/// `username`/`password`, `client-certificate-data`/`client-key-data`,
/// `certificate-authority-data`): a kubeconfig in which any user has
/// `exec` or `auth-provider` (the manager would run a program or a
/// plugin), `tokenFile`, `client-certificate` or `client-key` (it would
/// read one of its own files, its service account's token for one, and
/// send it to the kubeconfig's server), or any cluster has a
/// `certificate-authority` file, is refused with a
/// [`ProviderError::Refused`] naming the field, never its value.
/// [`allow_external_credentials`](Self::allow_external_credentials) lifts
/// that.
///
/// **Client.** kube-client's own retry of 429/503/504 answers is off, so
/// an error reaches the informer (whose reflector backs off and relists as
/// client-go's does) instead of being retried for minutes underneath it.
/// Connecting gives up after `connect_timeout` (default 30 s, client-go's
/// dial timeout) and a read after `read_timeout` of silence (default
/// 2 min: above the API server's one-minute watch bookmarks, so a quiet
/// watch lives, while a reconcile waiting on a member that stopped
/// answering fails instead of hanging). Each connection's HTTP/1 read
/// buffer is capped at `read_buffer` (default 64 KiB instead of hyper's
/// 408 KiB, which a member's LIST fills and its watch then keeps for the
/// member's life): a fleet's memory per engaged cluster stays small and
/// constant. The client is otherwise what kube-client's
/// `Client::try_from(Config)` builds (TLS, timeouts, authentication,
/// impersonation headers); a kubeconfig with a proxy URL gets kube-client's
/// own client, uncapped.
///
/// ```no_run
/// # async fn demo(yaml: &str) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use controller_runtime::cluster::MemberClientOptions;
/// use kube_client::config::Kubeconfig;
///
/// let kubeconfig = Kubeconfig::from_yaml(yaml)?;
/// let options = MemberClientOptions::new()
///     .read_timeout(Some(Duration::from_secs(60)))
///     .read_buffer(Some(32 * 1024));
/// let client = options.client_from_kubeconfig("edge-1", kubeconfig).await?;
/// # let _ = client;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberClientOptions {
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    read_buffer: Option<usize>,
    allow_external_credentials: bool,
}

/// Why a provider could not turn a kubeconfig into a client. Its
/// messages quote none of the kubeconfig (they name the cluster and the
/// kind of problem), so it may be logged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The kubeconfig does not parse or names no usable context.
    #[error("cluster {cluster:?}: the kubeconfig {reason}")]
    Kubeconfig {
        /// The cluster it was for.
        cluster: String,
        /// What is wrong with it, quoting none of it.
        reason: String,
    },
    /// The kubeconfig uses credentials from outside it (a program, a
    /// file), which the provider does not allow; see
    /// [`MemberClientOptions`].
    #[error("cluster {cluster:?}: kubeconfig refused: {reason}")]
    Refused {
        /// The cluster it was for.
        cluster: String,
        /// The field refused and why (never its value).
        reason: String,
    },
    /// No client can be made from the kubeconfig (TLS settings, proxy).
    #[error("cluster {cluster:?}: client: {source}")]
    Client {
        /// The cluster it was for.
        cluster: String,
        /// kube-client's error.
        #[source]
        source: kube_client::Error,
    },
    /// The fleet refused the cluster.
    #[error(transparent)]
    Fleet(#[from] FleetError),
}

/// client-go's dial timeout.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Twice the API server's watch bookmark period (one minute).
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Room for several LIST chunks' reads (a read takes what has arrived, up
/// to the cap), an eighth of hyper's own 408 KiB.
const DEFAULT_READ_BUFFER: usize = 64 * 1024;

impl Default for MemberClientOptions {
    fn default() -> Self {
        MemberClientOptions {
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            read_timeout: Some(DEFAULT_READ_TIMEOUT),
            read_buffer: Some(DEFAULT_READ_BUFFER),
            allow_external_credentials: false,
        }
    }
}

impl MemberClientOptions {
    /// Inline credentials only, retry off, 30 s to connect, 2 min per
    /// read, 64 KiB read buffer per connection.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long connecting to the member's API server may take (`None`:
    /// no limit).
    #[must_use]
    pub fn connect_timeout(mut self, limit: Option<Duration>) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// How long a read may wait for the member's API server (`None`: no
    /// limit). A watch silent for longer is ended and reopened by its
    /// informer, so keep it above the server's bookmark period.
    #[must_use]
    pub fn read_timeout(mut self, limit: Option<Duration>) -> Self {
        self.read_timeout = limit;
        self
    }

    /// The most a connection's HTTP/1 read buffer may grow to, in bytes
    /// (default 64 KiB; `None`: hyper's own cap, 408 KiB). hyper starts a
    /// buffer at 8 KiB and doubles it while reads fill it; the allocation
    /// is kept for the connection's life, and a member's watch keeps its
    /// connection, so this is what each engaged cluster may hold. Values
    /// below 8 KiB (hyper's minimum) are raised to it. A response's
    /// headers must fit in it (an API server's take well under 1 KiB);
    /// bodies of any size stream through it.
    ///
    /// ```
    /// use controller_runtime::cluster::MemberClientOptions;
    /// let lean = MemberClientOptions::new().read_buffer(Some(16 * 1024));
    /// # let _ = lean;
    /// ```
    #[must_use]
    pub fn read_buffer(mut self, cap: Option<usize>) -> Self {
        self.read_buffer = cap;
        self
    }

    /// **Dangerous.** Accepts kubeconfigs whose users run programs
    /// (`exec`, `auth-provider`) or read files (`tokenFile`,
    /// `client-certificate`, `client-key`) and whose clusters read a
    /// `certificate-authority` file. Whoever writes such a kubeconfig can
    /// then run a program inside the manager, or have it send one of its
    /// files (its service account's token included) to a server of their
    /// choosing. Only for kubeconfigs as trusted as the manager's own
    /// configuration: never for ones that whoever may create a Secret in a
    /// namespace can write.
    #[must_use]
    pub fn allow_external_credentials(mut self) -> Self {
        self.allow_external_credentials = true;
        self
    }

    /// Checks `kubeconfig` against the trust rule: `Err` names the first
    /// field refused (what it would make the manager do), never its value.
    fn check(&self, kubeconfig: &Kubeconfig) -> Result<(), String> {
        if self.allow_external_credentials {
            return Ok(());
        }
        for named in &kubeconfig.auth_infos {
            let Some(user) = &named.auth_info else {
                continue;
            };
            let refused = [
                (user.exec.is_some(), "exec", "runs a program"),
                (
                    user.auth_provider.is_some(),
                    "auth-provider",
                    "runs an auth plugin",
                ),
                (user.token_file.is_some(), "tokenFile", "reads a file"),
                (
                    user.client_certificate.is_some(),
                    "client-certificate",
                    "reads a file",
                ),
                (user.client_key.is_some(), "client-key", "reads a file"),
            ];
            if let Some((_, field, does)) = refused.into_iter().find(|(set, ..)| *set) {
                return Err(refusal("a user", field, does));
            }
        }
        for named in &kubeconfig.clusters {
            if named
                .cluster
                .as_ref()
                .is_some_and(|c| c.certificate_authority.is_some())
            {
                return Err(refusal(
                    "a cluster",
                    "certificate-authority",
                    "reads a file",
                ));
            }
        }
        Ok(())
    }

    /// kube-client's configuration for the current context of
    /// `kubeconfig` (the member `cluster`), checked against the trust
    /// rule, with these options' retry and timeouts: for a provider that
    /// sets more before making the client.
    pub async fn config_from_kubeconfig(
        &self,
        cluster: &str,
        kubeconfig: Kubeconfig,
    ) -> Result<kube_client::Config, ProviderError> {
        self.check(&kubeconfig)
            .map_err(|reason| ProviderError::Refused {
                cluster: cluster.to_string(),
                reason,
            })?;
        let mut config =
            kube_client::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|error| ProviderError::Kubeconfig {
                    cluster: cluster.to_string(),
                    reason: describe(&error).to_string(),
                })?;
        self.apply(&mut config);
        Ok(config)
    }

    /// A client for the current context of `kubeconfig` (the member
    /// `cluster`), checked against the trust rule, with these options'
    /// retry and timeouts.
    pub async fn client_from_kubeconfig(
        &self,
        cluster: &str,
        kubeconfig: Kubeconfig,
    ) -> Result<Client, ProviderError> {
        let config = self.config_from_kubeconfig(cluster, kubeconfig).await?;
        self.client(cluster, config)
    }

    /// A member client for `config` (the member `cluster`, named in its
    /// errors and request spans), with these options' retry, timeouts and
    /// read buffer: for a client handed to
    /// [`StaticProvider::client`](super::StaticProvider::client) or
    /// [`Fleet::engage`](super::Fleet::engage). The configuration is the
    /// program's own, so the trust rule does not apply.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use controller_runtime::cluster::{MemberClientOptions, StaticProvider};
    ///
    /// let config = kube_client::Config::new("https://edge-1.example:6443".parse()?);
    /// let edge = MemberClientOptions::new().client_from_config("edge-1", config)?;
    /// let provider = StaticProvider::new().client("edge-1", edge);
    /// # let _ = provider;
    /// # Ok(()) }
    /// ```
    pub fn client_from_config(
        &self,
        cluster: &str,
        mut config: kube_client::Config,
    ) -> Result<Client, ProviderError> {
        self.apply(&mut config);
        self.client(cluster, config)
    }

    /// The client for `config`, already checked and applied.
    fn client(&self, cluster: &str, config: kube_client::Config) -> Result<Client, ProviderError> {
        member_transport::member_client(cluster, config, self.read_buffer).map_err(|source| {
            ProviderError::Client {
                cluster: cluster.to_string(),
                source,
            }
        })
    }

    /// [`client_from_kubeconfig`](Self::client_from_kubeconfig) of a
    /// kubeconfig's YAML text (a Secret's bytes): text that does not parse
    /// is an error saying so, without any of it (the parser's own message
    /// quotes the text, credentials included).
    pub async fn client_from_yaml(
        &self,
        cluster: &str,
        yaml: &[u8],
    ) -> Result<Client, ProviderError> {
        let kubeconfig = std::str::from_utf8(yaml)
            .map_err(|_| "is not UTF-8")
            .and_then(|text| Kubeconfig::from_yaml(text).map_err(|e| describe(&e)))
            .map_err(|reason| ProviderError::Kubeconfig {
                cluster: cluster.to_string(),
                reason: reason.to_string(),
            })?;
        self.client_from_kubeconfig(cluster, kubeconfig).await
    }

    /// Sets the retry and the timeouts on `config` (the read buffer is the
    /// client's, not the configuration's: see
    /// [`client_from_config`](Self::client_from_config)).
    pub fn apply(&self, config: &mut kube_client::Config) {
        config.default_retry = false;
        config.connect_timeout = self.connect_timeout;
        config.read_timeout = self.read_timeout;
        // The read timeout counts from each request, not from when a
        // pooled connection went idle.
        config.reset_reader_on_write = self.read_timeout.is_some();
    }
}

fn refusal(whose: &str, field: &str, does: &str) -> String {
    format!(
        "{whose} sets `{field}`, which {does} in the manager; only inline credentials are \
         accepted unless the provider allows external credentials"
    )
}

/// What is wrong with a kubeconfig, in words that quote none of it.
fn describe(error: &KubeconfigError) -> &'static str {
    match error {
        KubeconfigError::Parse(_) => "does not parse as a kubeconfig",
        KubeconfigError::CurrentContextNotSet => "names no current context",
        KubeconfigError::LoadContext(_) => "lacks its current context",
        KubeconfigError::LoadClusterOfContext(_) => "lacks the cluster of its current context",
        KubeconfigError::MissingClusterUrl => "names no server",
        KubeconfigError::ParseClusterUrl(_) => "has a server URL that does not parse",
        KubeconfigError::ParseProxyUrl(_) => "has a proxy URL that does not parse",
        KubeconfigError::LoadCertificateAuthority(_) => {
            "has a certificate authority that does not load"
        }
        KubeconfigError::LoadClientCertificate(_) => "has a client certificate that does not load",
        KubeconfigError::LoadClientKey(_) => "has a client key that does not load",
        KubeconfigError::ParseCertificates(_) => "has certificates that do not parse as PEM",
        _ => "cannot be used",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str, cluster: &str) -> Kubeconfig {
        let yaml = format!(
            "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1{cluster}\n\
             users:\n- name: u\n  user:\n{user}\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        );
        Kubeconfig::from_yaml(&yaml).unwrap()
    }

    #[test]
    fn only_inline_credentials_pass_by_default() {
        let strict = MemberClientOptions::new();
        let inline = kubeconfig("    token: abc\n    client-key-data: a2V5", "");
        assert_eq!(strict.check(&inline), Ok(()));
        let refused = [
            (
                "    exec:\n      command: /bin/steal\n      apiVersion: v1",
                "",
                "`exec`",
            ),
            ("    auth-provider:\n      name: gcp", "", "`auth-provider`"),
            ("    tokenFile: /etc/shadow", "", "`tokenFile`"),
            (
                "    client-certificate: /etc/cert",
                "",
                "`client-certificate`",
            ),
            ("    client-key: /etc/key", "", "`client-key`"),
            (
                "    token: t",
                "\n    certificate-authority: /etc/ca",
                "`certificate-authority`",
            ),
        ];
        for (user, cluster, field) in refused {
            let kc = kubeconfig(user, cluster);
            let reason = strict.check(&kc).unwrap_err();
            assert!(reason.contains(field), "{reason}");
            assert!(
                !reason.contains("/etc") && !reason.contains("/bin"),
                "{reason}"
            );
            assert_eq!(
                strict.clone().allow_external_credentials().check(&kc),
                Ok(())
            );
        }
    }

    #[tokio::test]
    async fn member_configs_have_no_retry_and_both_timeouts() {
        let kc = kubeconfig("    token: abc", "");
        let config = MemberClientOptions::new()
            .config_from_kubeconfig("m", kc.clone())
            .await
            .unwrap();
        assert!(!config.default_retry);
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(30)));
        assert_eq!(config.read_timeout, Some(Duration::from_secs(120)));
        let none = MemberClientOptions::new()
            .connect_timeout(None)
            .read_timeout(None)
            .config_from_kubeconfig("m", kc)
            .await
            .unwrap();
        assert_eq!((none.connect_timeout, none.read_timeout), (None, None));
    }

    #[tokio::test]
    async fn text_that_does_not_parse_is_not_quoted() {
        let yaml =
            b"users:\n- name: u\n  user:\n    token: sekrit-token\n    password: hunter2\n  ]]bad";
        let Err(error) = MemberClientOptions::new().client_from_yaml("m", yaml).await else {
            panic!("the text does not parse");
        };
        let (display, debug) = (error.to_string(), format!("{error:?}"));
        assert!(display.contains("does not parse"), "{display}");
        for text in [display, debug] {
            assert!(
                !text.contains("sekrit") && !text.contains("hunter2"),
                "{text}"
            );
        }
    }
}
