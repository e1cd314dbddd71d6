//! What the sample controller's tests share: its manager started on a
//! client (a service account's, RBAC enforced) and stopped, its manifests
//! applied to envtest as the `manifests` binary writes them, waiting on a
//! condition, and the requests envtest refused with 403.

use std::future::Future;
use std::time::Duration;

use controller_runtime::k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use controller_runtime::k8s_openapi::api::core::v1::{Service, ServiceAccount};
use controller_runtime::k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use controller_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use controller_runtime::kube_client::api::{Api, ListParams, PostParams};
use controller_runtime::kube_client::core::NamespaceResourceScope;
use controller_runtime::kube_client::{Client, Resource};
use controller_runtime::leaderelection::LeaderElectionConfig;
use controller_runtime::manager::{Manager, ManagerError};
use controller_runtime::webhook::WebhookOptions;
use informer_examples::sample::manifests::Manifest;
use informer_examples::sample::{Foo, FooReconciler, Ledger, webhooks};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

/// The namespace the sample runs in (its manifests' too).
pub(crate) const NS: &str = "default";
/// How long a condition may take.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// Polls `cond` until it holds; fails the test after [`WAIT`].
pub(crate) async fn wait_until<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Requests answered 403 so far (only the controller's client has a role).
/// An existing cluster keeps no such log: none, with a line saying the
/// check was not made (a 403 then shows as a failed reconcile instead).
pub(crate) fn forbidden(env: &envtest::TestEnv) -> Vec<String> {
    let Ok(log) = env.try_request_log() else {
        println!("not checked: 403 answers (the request log is envtest's only)");
        return Vec::new();
    };
    log.into_iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// Waits until Foos are served (a CRD was just installed).
async fn served(admin: &Client) -> Api<Foo> {
    let foos: Api<Foo> = Api::namespaced(admin.clone(), NS);
    wait_until("the CRD is served", || async {
        foos.list(&ListParams::default()).await.is_ok()
    })
    .await;
    foos
}

/// Every YAML document of `files`, in order, as JSON.
pub(crate) fn documents(files: &[Manifest]) -> Vec<serde_json::Value> {
    files
        .iter()
        .flat_map(|m| {
            serde_saphyr::from_multiple::<serde_json::Value>(&m.yaml)
                .unwrap_or_else(|e| panic!("{} is not YAML: {e}", m.file))
        })
        .collect()
}

/// `doc` decoded as `T`, which its `kind` must name.
pub(crate) fn decode<T: DeserializeOwned + Resource<DynamicType = ()>>(
    doc: &serde_json::Value,
) -> T {
    assert_eq!(doc["kind"], T::kind(&()).as_ref(), "{doc:#}");
    serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{} does not decode: {e}", T::kind(&())))
}

async fn create_cluster<T>(admin: &Client, doc: &serde_json::Value)
where
    T: Clone + std::fmt::Debug + DeserializeOwned + Serialize + Resource<DynamicType = ()>,
{
    let obj: T = decode(doc);
    Api::<T>::all(admin.clone())
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("envtest refused {}: {e}", T::kind(&())));
}

async fn create_namespaced<T>(admin: &Client, doc: &serde_json::Value)
where
    T: Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Serialize
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    let obj: T = decode(doc);
    let ns = obj.meta().namespace.clone().unwrap_or_else(|| NS.into());
    Api::<T>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("envtest refused {}: {e}", T::kind(&())));
}

/// Creates every document of `files` with `admin`, each decoded as its
/// kind (one the sample's manifests hold), and waits until Foos are served.
pub(crate) async fn apply(admin: &Client, files: &[Manifest]) -> Api<Foo> {
    for doc in documents(files) {
        match doc["kind"].as_str().unwrap_or_default() {
            "CustomResourceDefinition" => {
                create_cluster::<CustomResourceDefinition>(admin, &doc).await;
            }
            "ClusterRole" => create_cluster::<ClusterRole>(admin, &doc).await,
            "ClusterRoleBinding" => create_cluster::<ClusterRoleBinding>(admin, &doc).await,
            "ServiceAccount" => create_namespaced::<ServiceAccount>(admin, &doc).await,
            "Service" => create_namespaced::<Service>(admin, &doc).await,
            "MutatingWebhookConfiguration" => {
                create_cluster::<MutatingWebhookConfiguration>(admin, &doc).await;
            }
            "ValidatingWebhookConfiguration" => {
                create_cluster::<ValidatingWebhookConfiguration>(admin, &doc).await;
            }
            other => panic!("the sample's manifests hold a {other:?}"),
        }
    }
    served(admin).await
}

/// The sample's manager, running.
pub(crate) struct Running {
    pub(crate) mgr: Manager,
    pub(crate) ledger: Ledger,
    stop: controller_runtime::CancellationToken,
    run: JoinHandle<Result<(), ManagerError>>,
}

impl Running {
    /// The controller (and with `webhooks`, the webhook server with the
    /// sample's handlers, waited on until ready) on `client`, under leader
    /// election. Fails when `env` answered a request with 403 meanwhile.
    pub(crate) async fn start(
        env: &envtest::TestEnv,
        client: Client,
        webhooks: Option<WebhookOptions>,
    ) -> Running {
        let serve_webhooks = webhooks.is_some();
        let mut builder = Manager::builder(client).leader_election(LeaderElectionConfig::new(
            env.namespace(),
            "foo-controller",
            "test",
        ));
        if let Some(options) = webhooks {
            builder = builder.webhook_server(options);
        }
        // On an existing cluster the manager watches the test's namespace
        // only: Foos elsewhere (a deployed sample's) are not the test's to
        // reconcile, finalize or give Deployments.
        if env.is_existing_cluster() {
            builder = builder.namespaces([env.namespace()]);
        }
        let mgr = builder.build().await.unwrap();
        let ledger = Ledger::default();
        FooReconciler::new(ledger.clone()).setup(&mgr).unwrap();
        if serve_webhooks {
            webhooks::register(&mgr, ledger.clone()).unwrap();
        }
        let stop = controller_runtime::CancellationToken::new();
        let run = tokio::spawn({
            let (mgr, stop) = (mgr.clone(), stop.clone());
            async move { mgr.run(stop).await }
        });
        if serve_webhooks {
            wait_until("the webhook server is ready", || async {
                let forbidden = forbidden(env);
                assert!(forbidden.is_empty(), "outside the role: {forbidden:?}");
                mgr.readyz_checks().run_one("webhook") == Some(Ok(()))
            })
            .await;
        }
        Running {
            mgr,
            ledger,
            stop,
            run,
        }
    }

    /// Stops the manager; it must return cleanly within [`WAIT`].
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(WAIT, self.run)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}
