//! Existing-cluster mode: with `USE_EXISTING_CLUSTER=true` (controller-runtime's
//! variable), [`TestEnvBuilder::start`](super::TestEnvBuilder::start)
//! connects to the cluster of the current kubeconfig (`KUBECONFIG`, else
//! `~/.kube/config`) instead of starting a server. It installs the
//! builder's CRDs and waits until they are `Established`, creates a
//! namespace of the test's own (a unique name, the client's default
//! namespace), and removes both when the [`TestEnv`](super::TestEnv) is
//! dropped (the CRDs stay with `ENVTEST_KEEP_CRDS=true` or
//! [`keep_crds`](super::TestEnvBuilder::keep_crds)). ClusterRoles and
//! ClusterRoleBindings that
//! [`client_with_cluster_role`](super::TestEnv::client_with_cluster_role)
//! created (not those that were there before) are removed with them.

use crate::error::Error;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::api::{Api, DeleteParams, PostParams};
use std::sync::Mutex;
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
/// How long installing a CRD and removing it may take.
const CRD_TIMEOUT: Duration = Duration::from_secs(60);

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

/// What a [`TestEnv`](super::TestEnv) on an existing cluster removes when dropped.
pub(super) struct Existing {
    pub(super) config: kube_client::Config,
    pub(super) namespace: String,
    /// CRDs this env created (not those that were there before).
    pub(super) crds: Vec<String>,
    pub(super) keep_crds: bool,
    /// ClusterRoles (and their ClusterRoleBindings, of the same name) this
    /// env created.
    pub(super) cluster_roles: Mutex<Vec<String>>,
}

fn failed(what: impl Into<String>) -> impl FnOnce(kube_client::Error) -> Error {
    let what = what.into();
    move |e| Error::ExistingCluster {
        what,
        message: e.to_string(),
    }
}

/// Connects to the current kubeconfig's cluster, installs `crds`, and
/// creates the test's namespace.
pub(super) async fn connect(
    crds: &[CustomResourceDefinition],
    keep_crds: bool,
) -> Result<(Existing, kube_client::Client), Error> {
    let options = kube_client::config::KubeConfigOptions::default();
    let mut config = kube_client::Config::from_kubeconfig(&options)
        .await
        .map_err(|e| Error::ExistingCluster {
            what: "read the kubeconfig (KUBECONFIG, else ~/.kube/config)".into(),
            message: e.to_string(),
        })?;
    let namespace = format!(
        "{NAMESPACE_PREFIX}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    config.default_namespace = namespace.clone();
    let client = kube_client::Client::try_from(config.clone()).map_err(|e| Error::Client {
        url: config.cluster_url.to_string(),
        message: e.to_string(),
    })?;
    let mut existing = Existing {
        config,
        namespace,
        crds: Vec::new(),
        keep_crds: keep_crds || flag(KEEP_CRDS)?,
        cluster_roles: Mutex::new(Vec::new()),
    };
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": existing.namespace, "labels": {"envtest.io/test-namespace": "true"}}
    }))
    .map_err(|e| Error::ExistingCluster {
        what: "build the test namespace".into(),
        message: e.to_string(),
    })?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(failed(format!("create namespace {}", existing.namespace)))?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => existing.crds.push(name.clone()),
            // There before the test (installed by hand or kept): replace
            // it with this definition and leave it there afterwards.
            Err(kube_client::Error::Api(s)) if s.code == 409 => {
                let mut current = api
                    .get(&name)
                    .await
                    .map_err(failed(format!("read CRD {name}")))?;
                current.spec = crd.spec.clone();
                api.replace(&name, &PostParams::default(), &current)
                    .await
                    .map_err(failed(format!("replace CRD {name}")))?;
            }
            Err(e) => return Err(failed(format!("install CRD {name}"))(e)),
        }
        wait_established(&api, &name).await?;
    }
    Ok((existing, client))
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
    /// Deletes the test's namespace and the CRDs this env created, on a
    /// runtime of its own (a `Drop` cannot await, and the test's runtime
    /// may be the one blocked in it), and checks that the namespace is
    /// going and the CRDs are gone.
    pub(super) fn teardown(&self) -> Result<(), Error> {
        let config = self.config.clone();
        let namespace = self.namespace.clone();
        let crds = if self.keep_crds {
            Vec::new()
        } else {
            self.crds.clone()
        };
        let cluster_roles = self
            .cluster_roles
            .lock()
            .map(|names| names.clone())
            .unwrap_or_default();
        let run = move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::ExistingCluster {
                    what: "start the teardown runtime".into(),
                    message: e.to_string(),
                })?;
            runtime.block_on(remove(config, namespace, crds, cluster_roles))
        };
        std::thread::spawn(run).join().unwrap_or_else(|_| {
            Err(Error::ExistingCluster {
                what: "tear down".into(),
                message: "the teardown thread panicked".into(),
            })
        })
    }
}

async fn remove(
    config: kube_client::Config,
    namespace: String,
    crds: Vec<String>,
    cluster_roles: Vec<String>,
) -> Result<(), Error> {
    let url = config.cluster_url.to_string();
    let client = kube_client::Client::try_from(config).map_err(|e| Error::Client {
        url,
        message: e.to_string(),
    })?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(&namespace, &DeleteParams::background())
        .await
        .map_err(failed(format!("delete namespace {namespace}")))?;
    // Deleting a namespace takes its contents first: it must be gone or
    // on its way (deletionTimestamp set).
    let going = namespaces
        .get_opt(&namespace)
        .await
        .map_err(failed(format!("read namespace {namespace}")))?
        .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some());
    if !going {
        return Err(Error::ExistingCluster {
            what: format!("delete namespace {namespace}"),
            message: "it is still there and not terminating".into(),
        });
    }
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for name in cluster_roles {
        gone(bindings.delete(&name, &DeleteParams::default()).await)
            .map_err(failed(format!("delete ClusterRoleBinding {name}")))?;
        gone(roles.delete(&name, &DeleteParams::default()).await)
            .map_err(failed(format!("delete ClusterRole {name}")))?;
    }
    let api: Api<CustomResourceDefinition> = Api::all(client);
    for name in crds {
        api.delete(&name, &DeleteParams::background())
            .await
            .map_err(failed(format!("delete CRD {name}")))?;
        // The next test may install the same CRD: wait until it is gone.
        let deadline = tokio::time::Instant::now() + CRD_TIMEOUT;
        while api
            .get_opt(&name)
            .await
            .map_err(failed(format!("read CRD {name}")))?
            .is_some()
        {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::ExistingCluster {
                    what: format!("delete CRD {name}"),
                    message: format!("still there after {CRD_TIMEOUT:?}"),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// A delete's result, where "not found" (someone removed it already) is done.
fn gone<T>(result: Result<T, kube_client::Error>) -> Result<(), kube_client::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube_client::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
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
    use super::parse_flag;

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
