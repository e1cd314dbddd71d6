//! The sample-controller story: create, scale, refuse to adopt, report
//! status, finalize, and let the garbage collector take the Deployment.

use std::time::Duration;

use controller_runtime::k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStatus,
};
use controller_runtime::k8s_openapi::api::events::v1::Event;
use controller_runtime::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use controller_runtime::kube_client;
use controller_runtime::prelude::*;
use framework_test::{CONTROLLER, FINALIZER, Foo, FooSpec, FooStatus, desired_deployment, setup};

use crate::wait_until;

const NS: &str = "default";
const LONG: Duration = Duration::from_secs(20);

/// `d`'s spec, under every Kubernetes version: `Deployment::spec` is an
/// `Option` up to 1.36 and not from 1.37.
fn spec_of(d: &Deployment) -> Option<&DeploymentSpec> {
    Option::from(&d.spec)
}

/// A Foo `name` in [`NS`] asking for `replicas` of `deployment`.
fn new_foo(name: &str, deployment: &str, replicas: i32) -> Foo {
    let mut foo = Foo::new(
        name,
        FooSpec {
            deployment_name: deployment.into(),
            replicas,
        },
    );
    foo.metadata.namespace = Some(NS.into());
    foo
}

struct Running {
    _env: envtest::TestEnv,
    client: Client,
    mgr: Manager,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ManagerError>>,
}

impl Running {
    async fn start() -> Running {
        let env = envtest::TestEnv::builder()
            .crds([Foo::crd().unwrap()])
            .start()
            .await
            .unwrap();
        let client = env.client();
        let mgr = Manager::builder(client.clone()).build().await.unwrap();
        setup(&mgr).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn({
            let mgr = mgr.clone();
            async move {
                mgr.run_until(async {
                    let _ = stopped.await;
                })
                .await
            }
        });
        Running {
            _env: env,
            client,
            mgr,
            stop,
            task,
        }
    }

    fn foos(&self) -> Api<Foo> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn events(&self, reason: &str) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    async fn replicas(&self, name: &str) -> Option<i32> {
        self.deployments()
            .get_opt(name)
            .await
            .unwrap()
            .and_then(|d| spec_of(&d)?.replicas)
    }

    /// Stops the manager and waits for it; the server stays up while the
    /// returned handle lives.
    async fn stop(self) -> envtest::TestEnv {
        self.stop.send(()).unwrap();
        tokio::time::timeout(LONG, self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        self._env
    }
}

#[tokio::test]
async fn foo_gets_its_deployment_scaled_status_and_finalized() {
    let t = Running::start().await;
    t.foos()
        .create(
            &PostParams::default(),
            &new_foo("example-foo", "example-web", 1),
        )
        .await
        .unwrap();
    wait_until(LONG, "the Deployment is created with 1 replica", || async {
        t.replicas("example-web").await == Some(1)
    })
    .await;
    let foo = t.foos().get("example-foo").await.unwrap();
    assert_eq!(foo.finalizers(), [FINALIZER]);
    let web = t.deployments().get("example-web").await.unwrap();
    let owner = &web.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Foo", Some(true)));
    assert_eq!(Some(owner.uid.clone()), foo.uid());

    // Scale through the Foo.
    let patch = Foo {
        spec: FooSpec {
            deployment_name: "example-web".into(),
            replicas: 3,
        },
        ..new_foo("example-foo", "example-web", 1)
    };
    t.foos()
        .patch(
            "example-foo",
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    wait_until(LONG, "the Deployment is scaled to 3", || async {
        t.replicas("example-web").await == Some(3)
    })
    .await;

    // The Deployment's status flows into the Foo's (no deployment
    // controller runs on envtest, so the test plays it).
    let status = Deployment {
        status: Some(DeploymentStatus {
            available_replicas: Some(2),
            ..DeploymentStatus::default()
        }),
        ..Deployment::default()
    };
    t.deployments()
        .patch_status(
            "example-web",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    wait_until(LONG, "status.availableReplicas follows", || async {
        t.foos()
            .get("example-foo")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.available_replicas == 2)
    })
    .await;
    let created = t.events("Created").await;
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0].reporting_controller.as_deref(), Some(CONTROLLER));
    assert_eq!(
        created[0].related.as_ref().and_then(|r| r.name.as_deref()),
        Some("example-web")
    );

    // Delete: the finalizer runs, the Foo goes, the Deployment follows.
    t.foos()
        .delete("example-foo", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(LONG, "the Foo is gone", || async {
        t.foos().get_opt("example-foo").await.unwrap().is_none()
    })
    .await;
    wait_until(LONG, "the Deployment is collected", || async {
        t.deployments()
            .get_opt("example-web")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    let metrics = t.mgr.metrics().encode().unwrap();
    assert!(
        metrics
            .contains("controller_runtime_reconcile_errors_total{controller=\"foo-controller\"} 0"),
        "an ordinary delete must not count a reconcile error:\n{metrics}"
    );
    let events = Api::<Event>::namespaced(t.client.clone(), NS);
    let _env = t.stop().await;
    // Recorded during the delete; written before the manager returned.
    let cleaned = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("CleanedUp"))
        .count();
    assert_eq!(cleaned, 1);
}

#[tokio::test]
async fn a_deployment_it_does_not_control_is_not_adopted() {
    let t = Running::start().await;
    let mut foreign = desired_deployment(&new_foo("someone-else", "taken", 1));
    foreign.metadata.owner_references = None;
    t.deployments()
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    t.foos()
        .create(&PostParams::default(), &new_foo("greedy", "taken", 5))
        .await
        .unwrap();
    wait_until(LONG, "a Warning ErrResourceExists event", || async {
        t.events("ErrResourceExists")
            .await
            .iter()
            .any(|e| e.type_.as_deref() == Some("Warning"))
    })
    .await;
    let taken = t.deployments().get("taken").await.unwrap();
    assert!(taken.owner_references().is_empty());
    assert_eq!(spec_of(&taken).and_then(|s| s.replicas), Some(1));
    t.stop().await;
}

#[tokio::test]
async fn the_derived_crd_is_served_with_status_columns_and_validation() {
    let t = Running::start().await;
    let crds = Api::<CustomResourceDefinition>::all(t.client.clone());
    let crd = crds.get(Foo::crd_name()).await.unwrap();
    let version = &crd.spec.versions[0];
    assert_eq!(
        (crd.spec.group.as_str(), version.name.as_str()),
        ("samplecontroller.k8s.io", "v1alpha1")
    );
    assert!(
        version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some()),
        "status subresource: {version:?}"
    );
    let columns: Vec<_> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Deployment", ".spec.deploymentName"),
            ("Replicas", ".spec.replicas"),
            ("Available", ".status.availableReplicas"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
    // `#[resource(minimum = 0)]` reaches the served schema.
    let err = t
        .foos()
        .create(&PostParams::default(), &new_foo("negative", "web", -1))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube_client::Error::Api(s) if s.code == 422),
        "{err:?}"
    );
    // Writing the main resource does not write status (status subresource).
    let mut with_status = new_foo("with-status", "web", 1);
    with_status.status = Some(FooStatus {
        available_replicas: 7,
    });
    let created = t
        .foos()
        .create(&PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(created.status, None);
    t.stop().await;
}
