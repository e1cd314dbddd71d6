//! The sample-controller's webhooks end to end on envtest: its manifests
//! (`sample::manifests`, what the `manifests` binary writes: the CRD with
//! its conversion webhook, the RBAC, the webhook Service and
//! configurations) are applied, and the manager, running as the
//! ServiceAccount they bind (RBAC enforced), serves the defaulter, the
//! validator and the v1alpha1 <-> v1 conversion with self-managed
//! certificates; envtest calls them through the webhook configurations and
//! the CRD's conversion webhook, as a cluster would (a v1alpha1 write
//! reaches the v1 admission webhooks converted, `matchPolicy: Equivalent`).
//! Denials reach kube-client and kubectl with the validator's message,
//! defaults are
//! visible on read, `dryRun` reaches the validator and persists nothing,
//! warnings arrive in `Warning` headers, a Foo written as v1alpha1 reads as
//! v1 and back in get, list and watch, and v1alpha1 -> hub -> v1alpha1 is
//! the identity for random specs. kubectl: `sample_kubectl`.

#![allow(clippy::disallowed_names)]

use controller_runtime::kube_client::api::{
    Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use controller_runtime::kube_client::core::Status;
use controller_runtime::kube_client::{Client, Error};
use controller_runtime::webhook::Convertible;
use futures::StreamExt;
use informer_examples::sample::{FooReconciler, Ledger, manifests, v1, v1alpha1, webhooks};
use proptest::prelude::*;

pub(crate) use crate::sample_support::{NS, WAIT};
use crate::sample_support::{Running, apply, forbidden};

pub(crate) const BAD_NAME: &str =
    "spec.deploymentName: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label";

pub(crate) struct Fixture {
    pub(crate) env: envtest::TestEnv,
    admin: Client,
    pub(crate) foos: Api<v1::Foo>,
    old: Api<v1alpha1::Foo>,
    pub(crate) ledger: Ledger,
    running: Running,
}

fn foo(name: &str, deployment: &str, replicas: Option<i32>) -> v1::Foo {
    v1::Foo::new(
        name,
        v1::FooSpec {
            deployment_name: deployment.into(),
            replicas,
        },
    )
}

pub(crate) fn old_foo(name: &str, deployment: &str, replicas: Option<i32>) -> v1alpha1::Foo {
    v1alpha1::Foo::new(
        name,
        v1alpha1::FooSpec {
            deployment: deployment.into(),
            replicas,
        },
    )
}

impl Fixture {
    /// envtest with the sample's manifests applied, and the manager
    /// (controller and webhooks) running as their ServiceAccount, its
    /// webhook server ready. `None` (the test says it is skipped) on an
    /// existing cluster: the manifests' cluster-wide names are fixed (the
    /// CRD `foos.samplecontroller.k8s.io`, the ClusterRoles and binding
    /// `foo-controller`, the webhook configurations), so applying them
    /// there would replace a deployed sample's, and removing them would
    /// remove it.
    pub(crate) async fn start() -> Option<Fixture> {
        if envtest::skip_on_existing_cluster(
            "a cluster of the test's own (the sample's manifests have fixed cluster-wide \
             names: CRD foos.samplecontroller.k8s.io, ClusterRole foo-controller, its \
             binding, the webhook configurations; a deployed sample's would be replaced)",
        ) {
            return None;
        }
        let env = envtest::TestEnv::builder()
            .webhook_server(format!("{NS}/{}", webhooks::SERVICE))
            .start()
            .await
            .unwrap();
        let listener = env.webhook_listener().expect("asked for at start");
        let admin = env.client();
        let files = manifests::render(NS).unwrap();
        let foos = apply(&admin, &files).await;
        let client = env
            .service_account_client(NS, manifests::SERVICE_ACCOUNT)
            .unwrap();
        let options = FooReconciler::webhooks(NS).options().listener(listener);
        let running = Running::start(&env, client, Some(options)).await;
        Some(Fixture {
            old: Api::namespaced(admin.clone(), NS),
            ledger: running.ledger.clone(),
            env,
            admin,
            foos,
            running,
        })
    }

    pub(crate) async fn stop(self) {
        assert_eq!(
            forbidden(&self.env),
            Vec::<String>::new(),
            "the manifests' role covers the controller and the webhook certificates"
        );
        self.running.stop().await;
    }
}

fn api_error(result: Result<impl std::fmt::Debug, Error>) -> Status {
    match result {
        Err(Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn denied_creates_and_updates_carry_the_validators_message_through_kube_client() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    let status = api_error(
        f.foos
            .create(&PostParams::default(), &foo("bad", "Bad_Name", Some(1)))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(status.message.contains(BAD_NAME), "{status:?}");
    // The validator's field cause, as built-in validation reports one.
    let details = status.details.as_ref().expect("details with the cause");
    assert_eq!(details.causes.len(), 1, "{details:?}");
    assert_eq!(details.causes[0].field, "spec.deploymentName");
    assert_eq!(details.causes[0].reason, "FieldValueInvalid");
    assert!(
        details.causes[0]
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"),
        "{details:?}"
    );
    assert!(
        status.message.starts_with(
            "admission webhook \"validate-v1.foos.samplecontroller.k8s.io\" denied the request"
        ),
        "{status:?}"
    );
    assert!(f.foos.get_opt("bad").await.unwrap().is_none());

    // An update to a bad name: denied with the same message.
    f.foos
        .create(&PostParams::default(), &foo("good", "good-web", Some(1)))
        .await
        .unwrap();
    let patch = serde_json::json!({"spec": {"deploymentName": "Bad_Name"}});
    let status = api_error(
        f.foos
            .patch("good", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(status.code, 422);
    assert!(status.message.contains(BAD_NAME), "{status:?}");
    assert_eq!(
        f.foos.get("good").await.unwrap().spec.deployment_name,
        "good-web"
    );

    // A v1alpha1 write reaches the v1 webhook converted (matchPolicy:
    // Equivalent), as on a cluster: the denial names the field as v1
    // spells it, and nothing is stored.
    let status = api_error(
        f.old
            .create(&PostParams::default(), &old_foo("old-bad", "-web", None))
            .await,
    );
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.deploymentName: Invalid value: \"-web\""),
        "{status:?}"
    );
    assert!(f.old.get_opt("old-bad").await.unwrap().is_none());
    assert_eq!(f.ledger.count("webhook: denied create of foo/old-bad:"), 1);
    assert_eq!(f.ledger.count("webhook: denied create of foo/bad:"), 1);
    assert_eq!(f.ledger.count("webhook: denied update of foo/good:"), 1);
    f.stop().await;
}

#[tokio::test]
async fn defaults_are_visible_on_read_in_both_versions() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    f.foos
        .create(&PostParams::default(), &foo("plain", "plain-web", None))
        .await
        .unwrap();
    assert_eq!(f.foos.get("plain").await.unwrap().spec.replicas, Some(1));
    f.old
        .create(&PostParams::default(), &old_foo("older", "older-web", None))
        .await
        .unwrap();
    assert_eq!(f.old.get("older").await.unwrap().spec.replicas, Some(1));
    assert_eq!(f.foos.get("older").await.unwrap().spec.replicas, Some(1));
    // A value given is kept.
    f.foos
        .create(&PostParams::default(), &foo("three", "three-web", Some(3)))
        .await
        .unwrap();
    assert_eq!(f.foos.get("three").await.unwrap().spec.replicas, Some(3));
    f.stop().await;
}

#[tokio::test]
async fn dry_run_reaches_the_validator_and_nothing_is_persisted() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = f
        .foos
        .create(&dry, &foo("dry", "dry-web", None))
        .await
        .unwrap();
    // The dry run was defaulted and admitted, and not stored.
    assert_eq!(answered.spec.replicas, Some(1));
    assert!(f.foos.get_opt("dry").await.unwrap().is_none());
    assert_eq!(
        f.ledger
            .count("webhook: allowed dry-run create of foo/dry (nothing is persisted)"),
        1,
        "{:#?}",
        f.ledger.lines()
    );
    // A denied dry run says so too; an ordinary create records no dry run.
    let status = api_error(f.foos.create(&dry, &foo("dry-bad", "Bad_Name", None)).await);
    assert!(status.message.contains(BAD_NAME), "{status:?}");
    assert_eq!(
        f.ledger
            .count("webhook: denied dry-run create of foo/dry-bad"),
        1
    );
    f.foos
        .create(&PostParams::default(), &foo("wet", "wet-web", None))
        .await
        .unwrap();
    assert_eq!(f.ledger.count("of foo/wet"), 0, "{:#?}", f.ledger.lines());
    f.stop().await;
}

/// kube-client's `Api` has no way to return the `Warning` headers, so the
/// write is sent through `Client::send` (`informer_examples::create_with_warnings`).
#[tokio::test]
async fn warnings_arrive_in_warning_headers_on_create_and_update() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    let expected = "spec.replicas: 12 replicas is more than 10; is this intended?";
    let answer = informer_examples::create_with_warnings(
        &f.admin,
        NS,
        &foo("big", "big-web", Some(12)),
        &PostParams::default(),
    )
    .await
    .unwrap();
    assert_eq!(answer.code, 201, "{:?}", answer.body);
    assert_eq!(answer.warnings, [expected]);
    // Ten is not many.
    let answer = informer_examples::create_with_warnings(
        &f.admin,
        NS,
        &foo("ten", "ten-web", Some(10)),
        &PostParams::default(),
    )
    .await
    .unwrap();
    assert_eq!((answer.code, answer.warnings.len()), (201, 0));
    // An update warns as well (retried on conflict: the controller writes
    // the Foo too).
    let mut answer = None;
    for _ in 0..20 {
        let mut ten = f.foos.get("ten").await.unwrap();
        ten.spec.replicas = Some(12);
        let a = informer_examples::replace_with_warnings(&f.admin, NS, "ten", &ten)
            .await
            .unwrap();
        if a.code != 409 {
            answer = Some(a);
            break;
        }
    }
    let answer = answer.expect("the update conflicted 20 times");
    assert_eq!(answer.code, 200, "{:?}", answer.body);
    assert_eq!(answer.warnings, [expected]);
    f.stop().await;
}

#[tokio::test]
async fn a_foo_written_as_v1alpha1_reads_as_v1_and_back_in_get_list_and_watch() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    let rv = f
        .foos
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch_v1 = f
        .foos
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let mut watch_old = f
        .old
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    f.old
        .create(
            &PostParams::default(),
            &old_foo("legacy", "legacy-web", Some(2)),
        )
        .await
        .unwrap();
    f.foos
        .create(
            &PostParams::default(),
            &foo("modern", "modern-web", Some(3)),
        )
        .await
        .unwrap();

    // get
    let as_v1 = f.foos.get("legacy").await.unwrap();
    assert_eq!(
        as_v1.spec,
        v1::FooSpec {
            deployment_name: "legacy-web".into(),
            replicas: Some(2)
        }
    );
    let as_old = f.old.get("modern").await.unwrap();
    assert_eq!(
        as_old.spec,
        v1alpha1::FooSpec {
            deployment: "modern-web".into(),
            replicas: Some(3)
        }
    );
    assert_eq!(
        f.old.get("legacy").await.unwrap().spec.deployment,
        "legacy-web"
    );
    // list
    let v1_items: Vec<(String, String)> = f
        .foos
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|x| (x.metadata.name.unwrap(), x.spec.deployment_name))
        .collect();
    assert_eq!(
        v1_items,
        [
            ("legacy".to_string(), "legacy-web".to_string()),
            ("modern".to_string(), "modern-web".to_string())
        ]
    );
    let old_items: Vec<(String, String)> = f
        .old
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|x| (x.metadata.name.unwrap(), x.spec.deployment))
        .collect();
    assert_eq!(
        old_items,
        [
            ("legacy".to_string(), "legacy-web".to_string()),
            ("modern".to_string(), "modern-web".to_string())
        ]
    );
    // watch: each watcher sees both Foos added, in its own version.
    let mut seen_v1 = Vec::new();
    while seen_v1.len() < 2 {
        match tokio::time::timeout(WAIT, watch_v1.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(x))) => {
                seen_v1.push((x.metadata.name.unwrap(), x.spec.deployment_name));
            }
            Some(Ok(_)) => {}
            other => panic!("v1 watch: {other:?}"),
        }
    }
    let mut seen_old = Vec::new();
    while seen_old.len() < 2 {
        match tokio::time::timeout(WAIT, watch_old.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(x))) => {
                seen_old.push((x.metadata.name.unwrap(), x.spec.deployment));
            }
            Some(Ok(_)) => {}
            other => panic!("v1alpha1 watch: {other:?}"),
        }
    }
    let both = [
        ("legacy".to_string(), "legacy-web".to_string()),
        ("modern".to_string(), "modern-web".to_string()),
    ];
    assert_eq!(seen_v1, both);
    assert_eq!(seen_old, both);
    f.stop().await;
}

fn status_strategy() -> impl Strategy<Value = Option<v1::FooStatus>> {
    proptest::option::of((any::<i32>(), proptest::option::of(any::<i64>())).prop_map(
        |(available, generation)| v1::FooStatus {
            available_replicas: available,
            observed_generation: generation,
            conditions: None,
        },
    ))
}

proptest! {
    #[test]
    fn v1alpha1_to_the_hub_and_back_is_the_identity(
        name in "[a-z][a-z0-9-]{0,20}",
        deployment in "\\PC{0,40}",
        replicas in proptest::option::of(any::<i32>()),
        status in status_strategy(),
        labels in proptest::collection::btree_map("[a-z]{1,8}", "\\PC{0,8}", 0..3),
    ) {
        let mut old = old_foo(&name, &deployment, replicas);
        old.metadata.namespace = Some(NS.into());
        old.metadata.labels = Some(labels);
        old.status = status;
        // Typed, as the Convertible impl.
        let hub = old.clone().to_hub().unwrap();
        prop_assert_eq!(&hub.spec.deployment_name, &deployment);
        let back = v1alpha1::Foo::from_hub(hub).unwrap();
        prop_assert_eq!((&back.metadata, &back.spec, &back.status), (&old.metadata, &old.spec, &old.status));
        // As JSON, as the conversion webhook does it.
        let json = serde_json::to_value(&old).unwrap();
        let conversion = webhooks::conversion();
        let as_v1 = conversion.convert(json.clone(), "samplecontroller.k8s.io/v1").unwrap();
        prop_assert_eq!(&as_v1["apiVersion"], "samplecontroller.k8s.io/v1");
        prop_assert_eq!(&as_v1["spec"]["deploymentName"], &serde_json::json!(deployment));
        let back = conversion.convert(as_v1, "samplecontroller.k8s.io/v1alpha1").unwrap();
        prop_assert_eq!(back, json);
    }
}
