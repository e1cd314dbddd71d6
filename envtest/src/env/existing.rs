//! Existing-cluster mode: with `USE_EXISTING_CLUSTER=true` (controller-runtime's
//! variable), [`TestEnvBuilder::start`](super::TestEnvBuilder::start)
//! connects to the cluster of the current kubeconfig (`KUBECONFIG`, else
//! `~/.kube/config`) instead of starting a server (or to the cluster
//! [`existing_cluster`](super::TestEnvBuilder::existing_cluster) names).
//!
//! It changes nothing it did not create. Every object it creates carries
//! the label [`RUN_LABEL`](super::RUN_LABEL) with the env's run id: a namespace of the
//! test's own (`envtest-<run id>`, the client's default namespace), the
//! builder's CRDs that were not on the cluster, and the ClusterRoles and
//! bindings of
//! [`client_with_cluster_role`](super::TestEnv::client_with_cluster_role),
//! whose cluster-wide names end in `-<run id>`. A CRD that is on the
//! cluster already is used as it is when it serves what the test needs
//! (group, kind, scope, the served versions, their subresources and the
//! test's schema fields); otherwise the start fails naming the difference
//! (or, with
//! [`replace_existing_crds_destructively`](super::TestEnvBuilder::replace_existing_crds_destructively),
//! replaces it). When the [`TestEnv`](super::TestEnv) is dropped, its
//! namespace and every object with its run label are deleted (the CRDs stay
//! with `ENVTEST_KEEP_CRDS=true` or
//! [`keep_crds`](super::TestEnvBuilder::keep_crds)), within
//! [`TEARDOWN_TIMEOUT`]. What a killed run left behind,
//! [`cleanup_existing_cluster`](crate::cleanup_existing_cluster) (or
//! `envtest-server cleanup`) removes by the label.

use super::cleanup::{self, CRD_TIMEOUT, failed};
use super::crd_check;
use crate::error::Error;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, PostParams};
use std::time::Duration;

/// The variable that selects existing-cluster mode (`true` or `1`).
pub const USE_EXISTING_CLUSTER: &str = "USE_EXISTING_CLUSTER";
/// The variable that keeps the installed CRDs on the cluster at teardown.
pub const KEEP_CRDS: &str = "ENVTEST_KEEP_CRDS";
/// The variable naming the local address (`host:port`) where the
/// cluster's webhook calls for a test's Service arrive, in existing-cluster
/// mode (see [`TestEnvBuilder::webhook_server`](super::TestEnvBuilder::webhook_server)).
pub const WEBHOOK_ADDR: &str = "ENVTEST_WEBHOOK_ADDR";
/// The prefix of the namespaces existing-cluster mode creates.
pub const NAMESPACE_PREFIX: &str = "envtest-";
/// The overall deadline of an existing-cluster env's teardown (its `Drop`):
/// past it the drop fails the test, naming the run to clean up.
pub const TEARDOWN_TIMEOUT: Duration = Duration::from_secs(90);

/// Whether `USE_EXISTING_CLUSTER` asks for an existing cluster: `true`,
/// `1` (any case) yes; unset, empty, `false` or `0` no; anything else is
/// an error naming the value.
///
/// ```
/// // Unset in doc tests unless the run sets it.
/// let existing = envtest::use_existing_cluster();
/// assert!(existing.is_ok());
/// ```
pub fn use_existing_cluster() -> Result<bool, Error> {
    flag(USE_EXISTING_CLUSTER)
}

fn flag(name: &'static str) -> Result<bool, Error> {
    parse_flag(name, &std::env::var(name).unwrap_or_default())
}

fn parse_flag(name: &str, value: &str) -> Result<bool, Error> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "" | "false" | "0" => Ok(false),
        _ => Err(Error::ExistingCluster {
            what: format!("read {name}"),
            message: format!("{value:?} is neither true nor false"),
        }),
    }
}

/// For a test that needs a feature only the in-process server has: `true`
/// (and a line `skipped: <test> needs <feature> (USE_EXISTING_CLUSTER=true)`
/// on stdout, shown by `--nocapture` and counted by `grep 'skipped: '`)
/// when the tests run against an existing cluster, so that the test
/// returns at once; `false` otherwise. Panics when `USE_EXISTING_CLUSTER`
/// holds neither true nor false.
///
/// ```
/// # async fn a_test() {
/// if envtest::skip_on_existing_cluster("faults") {
///     return;
/// }
/// let env = envtest::TestEnv::start().await.unwrap();
/// env.faults().pause();
/// # }
/// ```
pub fn skip_on_existing_cluster(feature: &str) -> bool {
    let existing = use_existing_cluster().unwrap_or_else(|e| panic!("{e}"));
    if existing {
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("a test");
        println!("skipped: {test} needs {feature} ({USE_EXISTING_CLUSTER}=true)");
    }
    existing
}

/// For a test whose webhook server the API server must call: `true` (and
/// a `skipped: ...` line, as [`skip_on_existing_cluster`]) on an existing
/// cluster when `ENVTEST_WEBHOOK_ADDR` ([`WEBHOOK_ADDR`]) is not set, so
/// that the test returns at once; `false` otherwise.
///
/// ```
/// # async fn a_test() {
/// if envtest::skip_without_webhook_route() {
///     return;
/// }
/// let env = envtest::TestEnv::builder()
///     .webhook_server("default/webhook-service")
///     .start()
///     .await
///     .unwrap();
/// # drop(env); }
/// ```
pub fn skip_without_webhook_route() -> bool {
    std::env::var_os(WEBHOOK_ADDR).is_none_or(|v| v.is_empty())
        && skip_on_existing_cluster(&format!(
            "{WEBHOOK_ADDR} (a route from the cluster to the test's webhook server)"
        ))
}

/// The listener for a test's webhook server on an existing cluster: bound
/// to `ENVTEST_WEBHOOK_ADDR`, where the cluster's calls for `service`
/// arrive.
pub(super) fn webhook_listener(service: &str) -> Result<std::net::TcpListener, Error> {
    let addr = std::env::var(WEBHOOK_ADDR).unwrap_or_default();
    if addr.is_empty() {
        return Err(Error::ExistingCluster {
            what: format!("serve the webhooks of Service {service}"),
            message: format!(
                "{WEBHOOK_ADDR} is not set: set it to the local address the cluster sends \
                 that Service's calls to (envtest-server --webhook-service {service}=ADDR does so)"
            ),
        });
    }
    bind(&addr).map(|(listener, _)| listener)
}

/// What a [`TestEnv`](super::TestEnv) on an existing cluster removes when
/// dropped: everything carrying its run label (see [`RUN_LABEL`](super::RUN_LABEL)).
pub(super) struct Existing {
    pub(super) config: kube_client::Config,
    pub(super) namespace: String,
    /// This env's run id: the value of its [`RUN_LABEL`](super::RUN_LABEL), the suffix of
    /// the cluster-scoped names it gives (and of its namespace's name).
    pub(super) run: String,
    /// CRDs this env created (not those that were there before).
    pub(super) crds: Vec<String>,
    pub(super) keep_crds: bool,
    /// The overall deadline of the teardown.
    pub(super) teardown_timeout: Duration,
}

/// How existing-cluster mode treats the builder's CRDs.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CrdPolicy {
    /// Leave the CRDs this env created on the cluster at teardown.
    pub(super) keep: bool,
    /// Replace a CRD on the cluster that does not serve what the test
    /// needs (instead of failing).
    pub(super) replace_existing: bool,
}

/// The kubeconfig's cluster (`KUBECONFIG`, else `~/.kube/config`).
pub(super) async fn kubeconfig_cluster() -> Result<kube_client::Config, Error> {
    let options = kube_client::config::KubeConfigOptions::default();
    kube_client::Config::from_kubeconfig(&options)
        .await
        .map_err(|e| Error::ExistingCluster {
            what: "read the kubeconfig (KUBECONFIG, else ~/.kube/config)".into(),
            message: e.to_string(),
        })
}

/// Connects to the cluster of `config`, checks the CRDs that are there
/// already, creates the test's namespace and installs the missing `crds`,
/// each labelled with a new run id. On a failure what it created is
/// removed again before the error returns.
pub(super) async fn connect(
    mut config: kube_client::Config,
    crds: &[CustomResourceDefinition],
    policy: CrdPolicy,
) -> Result<(Existing, kube_client::Client), Error> {
    let run = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
    let namespace = format!("{NAMESPACE_PREFIX}{run}");
    config.default_namespace = namespace.clone();
    let client = kube_client::Client::try_from(config.clone()).map_err(|e| Error::Client {
        url: config.cluster_url.to_string(),
        message: e.to_string(),
    })?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    // Read-only first: a CRD that is there and does not fit stops the
    // start before anything is written.
    let mut missing = Vec::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api
            .get_opt(&name)
            .await
            .map_err(failed(format!("read CRD {name}")))?
        {
            None => missing.push(crd),
            Some(current) => use_existing_crd(&api, &current, crd, policy).await?,
        }
    }
    let mut existing = Existing {
        config,
        namespace,
        run,
        crds: Vec::new(),
        keep_crds: policy.keep || flag(KEEP_CRDS)?,
        teardown_timeout: TEARDOWN_TIMEOUT,
    };
    if let Err(e) = existing.install(&client, &api, &missing).await {
        // Best effort: the start's error is the one to report.
        let _ = tokio::time::timeout(
            existing.teardown_timeout,
            cleanup::remove_run(&client, &existing.run, existing.keep_crds, &existing.crds),
        )
        .await;
        return Err(e);
    }
    for crd in crds {
        wait_established(&api, crd.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    Ok((existing, client))
}

/// Uses CRD `current`, which was on the cluster before this env, for the
/// test's `wanted`: as it is when it serves what the test needs; replaced
/// by `wanted` when the policy says so; otherwise an error naming every
/// difference.
async fn use_existing_crd(
    api: &Api<CustomResourceDefinition>,
    current: &CustomResourceDefinition,
    wanted: &CustomResourceDefinition,
    policy: CrdPolicy,
) -> Result<(), Error> {
    let name = wanted.metadata.name.clone().unwrap_or_default();
    let differences = crd_check::differences(current, wanted);
    if differences.is_empty() {
        return Ok(());
    }
    if !policy.replace_existing {
        return Err(Error::ExistingCluster {
            what: format!("use CRD {name}, which is on the cluster already"),
            message: format!(
                "it does not serve what the test needs: {}. This run did not create it, so it \
                 is left as it is; TestEnvBuilder::replace_existing_crds_destructively() \
                 replaces it (for everything on the cluster that uses it)",
                differences.join("; ")
            ),
        });
    }
    let mut replaced = current.clone();
    replaced.spec = wanted.spec.clone();
    api.replace(&name, &PostParams::default(), &replaced)
        .await
        .map(drop)
        .map_err(failed(format!("replace CRD {name}")))
}

impl Existing {
    /// Creates the test's namespace and `crds`, each with the run label.
    async fn install(
        &mut self,
        client: &kube_client::Client,
        api: &Api<CustomResourceDefinition>,
        crds: &[&CustomResourceDefinition],
    ) -> Result<(), Error> {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(self.namespace.clone());
        cleanup::label(&mut ns.metadata, &self.run);
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(failed(format!("create namespace {}", self.namespace)))?;
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let mut crd = (*crd).clone();
            cleanup::label(&mut crd.metadata, &self.run);
            api.create(&PostParams::default(), &crd)
                .await
                .map_err(failed(format!("install CRD {name}")))?;
            self.crds.push(name);
        }
        Ok(())
    }
}

/// Polls CRD `name` until its `Established` condition is `True`.
async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + CRD_TIMEOUT;
    loop {
        let crd = api
            .get(name)
            .await
            .map_err(failed(format!("read CRD {name}")))?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::ExistingCluster {
                what: format!("install CRD {name}"),
                message: format!("not Established within {CRD_TIMEOUT:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Existing {
    /// Deletes what this env created (its namespace, and every object with
    /// its run label: CRDs unless kept, ClusterRoles, bindings, webhook
    /// configurations) on a thread and runtime of its own (a `Drop` cannot
    /// await, and the test's runtime may be the one blocked in it), within
    /// the teardown deadline: past it, an error naming what was left.
    pub(super) fn teardown(&self) -> Result<(), Error> {
        let config = self.config.clone();
        let (namespace, run, keep, crds) = (
            self.namespace.clone(),
            self.run.clone(),
            self.keep_crds,
            self.crds.clone(),
        );
        let timeout = self.teardown_timeout;
        let (done, result) = std::sync::mpsc::channel();
        let run_id = run.clone();
        let work = move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::ExistingCluster {
                    what: "start the teardown runtime".into(),
                    message: e.to_string(),
                });
            let outcome = runtime.and_then(|rt| {
                rt.block_on(async {
                    let url = config.cluster_url.to_string();
                    let client =
                        kube_client::Client::try_from(config).map_err(|e| Error::Client {
                            url,
                            message: e.to_string(),
                        })?;
                    tokio::time::timeout(timeout, async {
                        cleanup::remove_namespace(&client, &namespace).await?;
                        cleanup::remove_run(&client, &run, keep, &crds).await
                    })
                    .await
                    .unwrap_or_else(|_| Err(overran(&run, timeout)))
                })
            });
            // The receiver is gone only when the deadline passed already.
            let _ = done.send(outcome);
        };
        if let Err(e) = std::thread::Builder::new()
            .name("envtest-teardown".into())
            .spawn(work)
        {
            return Err(Error::ExistingCluster {
                what: "tear down".into(),
                message: format!("could not start the teardown thread: {e}"),
            });
        }
        // A margin over the work's own deadline, for the runtime's start.
        match result.recv_timeout(timeout + Duration::from_secs(5)) {
            Ok(outcome) => outcome,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(overran(&run_id, timeout)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(Error::ExistingCluster {
                what: "tear down".into(),
                message: "the teardown thread panicked".into(),
            }),
        }
    }
}

/// The error of a teardown past its deadline: what is left, and how to
/// remove it.
fn overran(run: &str, timeout: Duration) -> Error {
    Error::ExistingCluster {
        what: format!("tear down run {run}"),
        message: format!(
            "not done within {timeout:?}; remove what is left with \
             `envtest-server cleanup --kubeconfig FILE --run {run}`"
        ),
    }
}

/// A blocking listener on `addr` and the address it got.
pub(super) fn bind(addr: &str) -> Result<(std::net::TcpListener, String), Error> {
    let bound =
        std::net::TcpListener::bind(addr).and_then(|l| l.local_addr().map(|a| (l, a.to_string())));
    bound.map_err(|source| Error::Bind {
        addr: addr.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::{Existing, parse_flag};
    use std::time::{Duration, Instant};

    /// A cluster that accepts connections and never answers: the drop's
    /// teardown gives up at its deadline, naming the run to clean up.
    #[test]
    fn the_teardown_ends_at_its_deadline_on_a_cluster_that_never_answers() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let existing = Existing {
            config: kube_client::Config::new(url.parse().unwrap()),
            namespace: "envtest-abc".into(),
            run: "abc".into(),
            crds: vec!["foos.example.com".into()],
            keep_crds: false,
            teardown_timeout: Duration::from_millis(500),
        };
        let started = Instant::now();
        let e = existing.teardown().unwrap_err();
        // The deadline, plus the margin for the teardown runtime's start.
        assert!(started.elapsed() < Duration::from_secs(5), "{e}");
        assert!(
            e.to_string().contains(
                "could not tear down run abc: not done within 500ms; remove what is left with \
                 `envtest-server cleanup --kubeconfig FILE --run abc`"
            ),
            "{e}"
        );
        drop(listener);
    }

    #[test]
    fn the_flag_is_true_false_or_an_error_naming_the_value() {
        for yes in ["true", "TRUE", "True", "1"] {
            assert!(parse_flag("X", yes).unwrap());
        }
        for no in ["", "false", "FALSE", "0"] {
            assert!(!parse_flag("X", no).unwrap());
        }
        let e = parse_flag("USE_EXISTING_CLUSTER", "yes").unwrap_err();
        assert_eq!(
            e.to_string(),
            "existing cluster: could not read USE_EXISTING_CLUSTER: \"yes\" is neither true nor false"
        );
    }
}
