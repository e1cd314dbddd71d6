//! Removing what existing-cluster mode created, by its run label
//! ([`RUN_LABEL`]): a [`TestEnv`](super::TestEnv)'s teardown removes its
//! own run's objects, and [`cleanup_existing_cluster`] (`envtest-server
//! cleanup`) those a killed run left behind. Objects without the label are
//! never touched.

use crate::error::Error;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::api::{Api, DeleteParams, ListParams};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::time::Duration;

/// The label on every object existing-cluster mode creates; its value is
/// the run id of the [`TestEnv`](super::TestEnv) that created it.
pub const RUN_LABEL: &str = "envtest.informer-rs.io/run";
/// How long installing a CRD and removing it may take.
pub(super) const CRD_TIMEOUT: Duration = Duration::from_secs(60);

/// The error of request `what` that failed on the cluster.
pub(super) fn failed(what: impl Into<String>) -> impl FnOnce(kube_client::Error) -> Error {
    let what = what.into();
    move |e| Error::ExistingCluster {
        what,
        message: e.to_string(),
    }
}

/// Puts the run label of run `run` on `meta`.
pub(super) fn label(meta: &mut ObjectMeta, run: &str) {
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(RUN_LABEL.into(), run.into());
}

/// Deletes namespace `name` (gone already is fine), and checks that it is
/// gone or on its way (deleting a namespace takes its contents first).
pub(super) async fn remove_namespace(
    client: &kube_client::Client,
    name: &str,
) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    gone(namespaces.delete(name, &DeleteParams::background()).await)
        .map_err(failed(format!("delete namespace {name}")))?;
    let going = namespaces
        .get_opt(name)
        .await
        .map_err(failed(format!("read namespace {name}")))?
        .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some());
    if going {
        Ok(())
    } else {
        Err(Error::ExistingCluster {
            what: format!("delete namespace {name}"),
            message: "it is still there and not terminating".into(),
        })
    }
}

/// Deletes every object of run `run` (namespaces excepted: see
/// [`remove_namespace`]), the CRDs unless `keep_crds`, and waits until the
/// CRDs `crds` are gone (the next test may install the same ones).
pub(super) async fn remove_run(
    client: &kube_client::Client,
    run: &str,
    keep_crds: bool,
    crds: &[String],
) -> Result<(), Error> {
    let selector = format!("{RUN_LABEL}={run}");
    remove_labelled(client, &selector, keep_crds).await?;
    if keep_crds {
        return Ok(());
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in crds {
        let deadline = tokio::time::Instant::now() + CRD_TIMEOUT;
        while api
            .get_opt(name)
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

/// Deletes the objects matching `selector` of every kind existing-cluster
/// mode creates (and the tests it runs are asked to label), bindings before
/// roles, CRDs last unless `keep_crds`; namespaced kinds in every
/// namespace. Returns `Kind name` (`Kind namespace/name`) of each.
async fn remove_labelled(
    client: &kube_client::Client,
    selector: &str,
    keep_crds: bool,
) -> Result<Vec<String>, Error> {
    let c = client;
    let mut removed = Vec::new();
    removed.extend(remove_all::<ClusterRoleBinding>(c, selector, |_| Api::all(c.clone())).await?);
    removed.extend(remove_all::<ClusterRole>(c, selector, |_| Api::all(c.clone())).await?);
    let namespaced = |ns: &str| Api::namespaced(c.clone(), ns);
    removed.extend(remove_all::<RoleBinding>(c, selector, namespaced).await?);
    let namespaced = |ns: &str| Api::namespaced(c.clone(), ns);
    removed.extend(remove_all::<Role>(c, selector, namespaced).await?);
    let all = |_: &str| Api::all(c.clone());
    removed.extend(remove_all::<ValidatingWebhookConfiguration>(c, selector, all).await?);
    let all = |_: &str| Api::all(c.clone());
    removed.extend(remove_all::<MutatingWebhookConfiguration>(c, selector, all).await?);
    if !keep_crds {
        let all = |_: &str| Api::all(c.clone());
        removed.extend(remove_all::<CustomResourceDefinition>(c, selector, all).await?);
    }
    Ok(removed)
}

/// Deletes every `K` matching `selector` (in every namespace for a
/// namespaced kind), each through `api(its namespace)`.
async fn remove_all<K>(
    client: &kube_client::Client,
    selector: &str,
    api: impl Fn(&str) -> Api<K>,
) -> Result<Vec<String>, Error>
where
    K: kube_client::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let kind = K::kind(&()).to_string();
    let list = Api::<K>::all(client.clone())
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(failed(format!("list {kind}s labelled {selector}")))?;
    let mut removed = Vec::new();
    for obj in list {
        let name = obj.meta().name.clone().unwrap_or_default();
        let ns = obj.meta().namespace.clone().unwrap_or_default();
        let (api, shown) = if ns.is_empty() {
            (api(""), format!("{kind} {name}"))
        } else {
            (api(&ns), format!("{kind} {ns}/{name}"))
        };
        gone(api.delete(&name, &DeleteParams::background()).await)
            .map_err(failed(format!("delete {shown}")))?;
        removed.push(shown);
    }
    Ok(removed)
}

/// A delete's result, where "not found" (someone removed it already) is done.
fn gone<T>(result: Result<T, kube_client::Error>) -> Result<(), kube_client::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube_client::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes from the cluster of `client` what existing-cluster mode left
/// behind (a run killed before its teardown, or CRDs kept with
/// [`keep_crds`](super::TestEnvBuilder::keep_crds)): every namespace,
/// CRD, ClusterRole, ClusterRoleBinding, Role, RoleBinding and webhook
/// configuration carrying [`RUN_LABEL`] — of run `run` only when given,
/// of every run otherwise. Objects without the label are not touched.
/// Returns what it deleted, as `Kind name` or `Kind namespace/name`.
/// `envtest-server cleanup --kubeconfig FILE [--run ID]` runs it.
///
/// Run it when no test runs against that cluster: a running test's objects
/// carry the label too.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube_client::Client::try_default().await?;
/// for removed in envtest::cleanup_existing_cluster(client, None).await? {
///     println!("deleted {removed}");
/// }
/// # Ok(()) }
/// ```
pub async fn cleanup_existing_cluster(
    client: kube_client::Client,
    run: Option<&str>,
) -> Result<Vec<String>, Error> {
    let selector = match run {
        Some(run) => format!("{RUN_LABEL}={run}"),
        None => RUN_LABEL.to_string(),
    };
    let mut removed = remove_labelled(&client, &selector, false).await?;
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(failed(format!("list namespaces labelled {selector}")))?;
    for ns in namespaces {
        let name = ns.metadata.name.unwrap_or_default();
        if ns.metadata.deletion_timestamp.is_none() {
            remove_namespace(&client, &name).await?;
            removed.push(format!("Namespace {name}"));
        }
    }
    Ok(removed)
}
