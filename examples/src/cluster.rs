//! Which cluster an example runs against, chosen explicitly.
//!
//! With no choice, every example runs its bounded demo on the embedded API
//! server, even when a kubeconfig exists (`~/.kube/config`, `KUBECONFIG`):
//! a demo never writes to a cluster by accident. A cluster is chosen with
//! `--kubeconfig FILE` and/or `--context NAME` ([`ClusterArgs`]), or by
//! running in a pod (`KUBERNETES_SERVICE_HOST` set and the service
//! account's token mounted). The program then prints which cluster (its
//! server URL) and context it uses ([`Connected::announce`]) before its
//! first request.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser;
//! use informer_examples::cluster::ClusterArgs;
//! let args = ClusterArgs::parse();
//! match args.connect().await? {
//!     None => println!("{}", informer_examples::cluster::demo_banner("http://127.0.0.1:1234")),
//!     Some(cluster) => cluster.announce(),
//! }
//! # Ok(()) }
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use controller_runtime::kube_client::config::{KubeConfigOptions, Kubeconfig};
use controller_runtime::kube_client::{Client, Config};

/// Where a pod's service account token is mounted.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// How the first line of every demo begins: the embedded server is used
/// and the user's kubeconfig is not.
pub const DEMO_BANNER_PREFIX: &str = "embedded demo (no --kubeconfig or --context given; your kubeconfig is not used): started envtest at ";

/// The first line a demo prints, naming the embedded server's URL.
///
/// ```
/// let line = informer_examples::cluster::demo_banner("http://127.0.0.1:1");
/// assert!(line.starts_with(informer_examples::cluster::DEMO_BANNER_PREFIX));
/// ```
pub fn demo_banner(base_url: &str) -> String {
    format!("{DEMO_BANNER_PREFIX}{base_url}")
}

/// The flags that choose a cluster; with neither, the program runs its
/// embedded demo (unless it runs in a pod).
#[derive(Debug, Clone, Default, clap::Parser)]
#[command(
    about = "An informer-rs example: with no --kubeconfig or --context it runs a bounded \
demo on an embedded API server and never touches your cluster."
)]
pub struct ClusterArgs {
    /// Run against the cluster of this kubeconfig file (its current
    /// context unless --context is given).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Run against this context (of --kubeconfig, else of KUBECONFIG, else
    /// of ~/.kube/config).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// What the flags and the environment choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// The bounded demo on the embedded API server.
    Demo,
    /// A context of a kubeconfig: `file` (else `KUBECONFIG`, else
    /// `~/.kube/config`), `context` (else its current context).
    Kubeconfig {
        /// `--kubeconfig`.
        file: Option<PathBuf>,
        /// `--context`.
        context: Option<String>,
    },
    /// The cluster the program runs in, as its pod's service account.
    InCluster,
}

impl ClusterArgs {
    /// What these flags choose, given the environment variable reader
    /// `var` and whether the service account token is mounted. A kubeconfig
    /// alone (`KUBECONFIG`, `~/.kube/config`) chooses nothing.
    ///
    /// ```
    /// use informer_examples::cluster::{Choice, ClusterArgs};
    /// let none = ClusterArgs::default();
    /// let kubeconfig_set = |name: &str| (name == "KUBECONFIG").then(|| "/home/me/.kube/config".into());
    /// assert_eq!(none.choice(kubeconfig_set, false), Choice::Demo);
    /// let ctx = ClusterArgs { context: Some("kind-dev".into()), ..ClusterArgs::default() };
    /// assert_eq!(
    ///     ctx.choice(kubeconfig_set, false),
    ///     Choice::Kubeconfig { file: None, context: Some("kind-dev".into()) }
    /// );
    /// ```
    pub fn choice(&self, var: impl Fn(&str) -> Option<OsString>, token_mounted: bool) -> Choice {
        if self.kubeconfig.is_some() || self.context.is_some() {
            return Choice::Kubeconfig {
                file: self.kubeconfig.clone(),
                context: self.context.clone(),
            };
        }
        let in_pod = var("KUBERNETES_SERVICE_HOST").is_some_and(|h| !h.is_empty());
        if in_pod && token_mounted {
            Choice::InCluster
        } else {
            Choice::Demo
        }
    }

    /// Connects to the chosen cluster; `None` when the demo is chosen.
    /// Nothing is sent to the cluster here.
    pub async fn connect(&self) -> anyhow::Result<Option<Connected>> {
        let choice = self.choice(
            |name| std::env::var_os(name),
            Path::new(SERVICE_ACCOUNT_TOKEN).is_file(),
        );
        match choice {
            Choice::Demo => Ok(None),
            Choice::InCluster => {
                let config =
                    Config::incluster().context("reading the pod's in-cluster configuration")?;
                let server = config.cluster_url.to_string();
                Ok(Some(Connected {
                    client: Client::try_from(config)?,
                    server,
                    context: None,
                    source: "in-cluster (the pod's service account)".into(),
                }))
            }
            Choice::Kubeconfig { file, context } => {
                let (kubeconfig, source) = read_kubeconfig(file.as_deref())?;
                let context = match context.or_else(|| kubeconfig.current_context.clone()) {
                    Some(context) => context,
                    None => bail!("{source} has no current context; name one with --context"),
                };
                let options = KubeConfigOptions {
                    context: Some(context.clone()),
                    ..KubeConfigOptions::default()
                };
                let config = Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("context {context:?} of {source}"))?;
                let server = config.cluster_url.to_string();
                Ok(Some(Connected {
                    client: Client::try_from(config)?,
                    server,
                    context: Some(context),
                    source,
                }))
            }
        }
    }
}

/// The kubeconfig `file`, else `KUBECONFIG`'s (merged), else
/// `~/.kube/config`, with a description of where it came from.
fn read_kubeconfig(file: Option<&Path>) -> anyhow::Result<(Kubeconfig, String)> {
    if let Some(file) = file {
        let config = Kubeconfig::read_from(file)
            .with_context(|| format!("reading the kubeconfig {}", file.display()))?;
        return Ok((config, file.display().to_string()));
    }
    if let Some(config) = Kubeconfig::from_env().context("reading the kubeconfig in KUBECONFIG")? {
        return Ok((config, "the kubeconfig in KUBECONFIG".into()));
    }
    let home = std::env::home_dir().context("no home directory to find ~/.kube/config in")?;
    let path = home.join(".kube").join("config");
    let config = Kubeconfig::read_from(&path)
        .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
    Ok((config, path.display().to_string()))
}

/// A client to the chosen cluster, and what to tell the user about it.
#[derive(Clone)]
pub struct Connected {
    /// The client.
    pub client: Client,
    /// The API server's URL.
    pub server: String,
    /// The kubeconfig context (`None` in a pod).
    pub context: Option<String>,
    /// Where the configuration came from.
    pub source: String,
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("server", &self.server)
            .field("context", &self.context)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Connected {
    /// One line naming the cluster: server, context and source.
    pub fn describe(&self) -> String {
        match &self.context {
            Some(context) => format!(
                "cluster {} (context {context}, from {})",
                self.server, self.source
            ),
            None => format!("cluster {} ({})", self.server, self.source),
        }
    }

    /// Prints [`describe`](Self::describe): call it before the first write.
    pub fn announce(&self) {
        println!("using {}", self.describe());
    }

    /// Checks by discovery that `plural` is served in `group`/`version`
    /// (its CRD is installed), within seconds; otherwise fails with
    /// `install`, the command that installs it.
    pub async fn require_served(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        install: &str,
    ) -> anyhow::Result<()> {
        let crd = format!("{plural}.{group}");
        let group_version = format!("{group}/{version}");
        let request = self.client.list_api_group_resources(&group_version);
        let served = match tokio::time::timeout(Duration::from_secs(10), request).await {
            Ok(Ok(list)) => list.resources.iter().any(|r| r.name == plural),
            Ok(Err(controller_runtime::kube_client::Error::Api(status))) if status.code == 404 => {
                false
            }
            Ok(Err(error)) => {
                return Err(error).with_context(|| {
                    format!("asking {} whether the CRD {crd} is installed", self.server)
                });
            }
            Err(_) => bail!(
                "{} did not answer within 10 s whether the CRD {crd} is installed",
                self.server
            ),
        };
        if !served {
            bail!(
                "the CRD {crd} ({group}/{version}) is not installed in {}; install it first:\n  {install}",
                self.describe()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn a_kubeconfig_alone_chooses_the_demo() {
        let none = ClusterArgs::default();
        assert_eq!(
            none.choice(env(&[("KUBECONFIG", "/k")]), false),
            Choice::Demo
        );
        assert_eq!(none.choice(env(&[]), true), Choice::Demo);
        assert_eq!(
            none.choice(env(&[("KUBERNETES_SERVICE_HOST", "")]), true),
            Choice::Demo
        );
    }

    #[test]
    fn flags_or_a_pod_choose_a_cluster() {
        let file = ClusterArgs {
            kubeconfig: Some("/k".into()),
            context: None,
        };
        assert_eq!(
            file.choice(env(&[]), false),
            Choice::Kubeconfig {
                file: Some("/k".into()),
                context: None
            }
        );
        let pod = env(&[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]);
        assert_eq!(ClusterArgs::default().choice(&pod, true), Choice::InCluster);
        assert_eq!(ClusterArgs::default().choice(&pod, false), Choice::Demo);
        // Flags win in a pod too.
        assert!(matches!(file.choice(&pod, true), Choice::Kubeconfig { .. }));
    }
}
