//! Webhooks declared with `#[controller(webhooks(...))]`, end to end: the
//! derived configurations, the conversion stanza of the merged CRD and the
//! manager's options are installed in envtest; the manager runs as a
//! service account bound to exactly the derived role (RBAC enforced), makes
//! its certificates, writes the `caBundle`s, and serves: a create is
//! denied by the validator through the derived validating configuration, a
//! default is applied through the mutating one, and an object stored as v1
//! reads as v1alpha1 through the conversion webhook.

use std::sync::Arc;
use std::time::Duration;

use controller_runtime::crd::merge_versions;
use controller_runtime::prelude::*;
use controller_runtime::webhook::{
    AdmissionContext, Conversion, ConversionError, Convertible, Defaulter, Denial, Hub, Validator,
    Warnings,
};
use envtest::TestEnv;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::eventually;
use crate::fixture::{assert_nothing_forbidden, spawn_manager, webhook_env};

pub mod v1alpha1 {
    use controller_runtime::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The old shape: the size as text.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[resource(
        group = "derive.example.com",
        version = "v1alpha1",
        kind = "Doohickey",
        namespaced,
        storage = false
    )]
    pub struct DoohickeySpec {
        pub size: String,
        pub color: Option<String>,
    }
}

pub mod v1 {
    use controller_runtime::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The storage shape: the size as a number.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
    #[resource(
        group = "derive.example.com",
        version = "v1",
        kind = "Doohickey",
        namespaced
    )]
    pub struct DoohickeySpec {
        pub size: u32,
        pub color: Option<String>,
    }
}

impl Hub for v1::Doohickey {}

impl Convertible<v1::Doohickey> for v1alpha1::Doohickey {
    fn to_hub(self) -> Result<v1::Doohickey, ConversionError> {
        let size = self
            .spec
            .size
            .parse()
            .map_err(|_| ConversionError::refused("size is not a number"))?;
        Ok(v1::Doohickey {
            metadata: self.metadata,
            spec: v1::DoohickeySpec {
                size,
                color: self.spec.color,
            },
            status: None,
        })
    }

    fn from_hub(hub: v1::Doohickey) -> Result<Self, ConversionError> {
        Ok(v1alpha1::Doohickey {
            metadata: hub.metadata,
            spec: v1alpha1::DoohickeySpec {
                size: hub.spec.size.to_string(),
                color: hub.spec.color,
            },
            status: None,
        })
    }
}

/// Reconciles Doohickeys (doing nothing); its declaration is the point.
#[derive(Controller)]
#[controller(
    for = v1::Doohickey,
    webhooks(defaulting, validating, conversion, service = "derive-webhooks")
)]
struct DoohickeyReconciler;

impl ObjectReconciler<v1::Doohickey> for DoohickeyReconciler {
    type Error = kube_client::Error;
    async fn reconcile(
        &self,
        _: Arc<v1::Doohickey>,
        _: &ObjectContext<v1::Doohickey>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::done())
    }
}

struct AtMostTen;

impl Validator<v1::Doohickey> for AtMostTen {
    async fn validate_create(
        &self,
        d: &v1::Doohickey,
        _: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        if d.spec.size > 10 {
            return Err(Denial::new("a doohickey is at most 10").field("spec.size", "at most 10"));
        }
        Ok(vec![])
    }
    async fn validate_update(
        &self,
        _: &v1::Doohickey,
        new: &v1::Doohickey,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.validate_create(new, ctx).await
    }
}

struct Blue;

impl Defaulter<v1::Doohickey> for Blue {
    async fn default(&self, d: &mut v1::Doohickey, _: &AdmissionContext) -> Result<(), Denial> {
        d.spec.color.get_or_insert_with(|| "blue".into());
        Ok(())
    }
}

fn doohickey(name: &str, size: u32) -> v1::Doohickey {
    let mut d = v1::Doohickey::new(name, v1::DoohickeySpec { size, color: None });
    d.metadata.namespace = Some("default".into());
    d
}

/// Installs what the declaration derives (admin), then runs the manager
/// under `role`; returns the env, the manager's stop token and its task.
async fn install_and_run(
    role: &k8s_openapi::api::rbac::v1::ClusterRole,
) -> (
    TestEnv,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), ManagerError>>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let env = webhook_env("derive-webhooks", addr).await;
    let admin = env.client();
    let hooks = DoohickeyReconciler::webhooks("system");
    let crd = hooks
        .conversion_crd(
            merge_versions(vec![
                v1alpha1::Doohickey::crd().unwrap(),
                v1::Doohickey::crd().unwrap(),
            ])
            .unwrap(),
        )
        .unwrap();
    let pp = PostParams::default();
    Api::<CustomResourceDefinition>::all(admin.clone())
        .create(&pp, &crd)
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .create(&pp, &hooks.validating_configuration().unwrap())
        .await
        .unwrap();
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .create(&pp, &hooks.mutating_configuration().unwrap())
        .await
        .unwrap();

    let client = env
        .client_with_cluster_role("system", "doohickey-manager", role)
        .await
        .unwrap();
    let mgr = Manager::builder(client)
        .webhook_server(hooks.options().listener(listener))
        .build()
        .await
        .unwrap();
    mgr.webhook::<v1::Doohickey>()
        .defaulter(Blue)
        .unwrap()
        .validator(AtMostTen)
        .unwrap();
    mgr.webhook_conversion(Conversion::<v1::Doohickey>::new().spoke::<v1alpha1::Doohickey>())
        .unwrap();
    DoohickeyReconciler.setup(&mgr).unwrap();
    let (stop, run) = spawn_manager(&mgr);
    (env, stop, run)
}

#[tokio::test]
async fn the_derived_manifests_route_reviews_to_the_manager_under_its_derived_role() {
    let (env, stop, run) = install_and_run(&DoohickeyReconciler::rbac()).await;
    let new: Api<v1::Doohickey> = Api::namespaced(env.client(), "default");
    // Until the manager has written the caBundles, the webhooks cannot be
    // called and (failurePolicy: Fail) writes are refused.
    let limit = Duration::from_secs(20);
    eventually(limit, "the first write admitted", || async {
        new.create(&PostParams::default(), &doohickey("small", 3))
            .await
            .ok()
    })
    .await;
    // The mutating configuration reached the defaulter.
    let small = new.get("small").await.unwrap();
    assert_eq!(small.spec.color.as_deref(), Some("blue"));

    // The validating configuration reached the validator.
    let err = new
        .create(&PostParams::default(), &doohickey("big", 11))
        .await
        .unwrap_err();
    let kube_client::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("a doohickey is at most 10"),
        "{status:?}"
    );

    // The conversion stanza reached /convert: stored as v1, read as
    // v1alpha1 (get and list). (Writing as v1alpha1 is not shown: envtest
    // sends an Equivalent-matched admission webhook the object in the
    // request's version, where the API server converts it to the rule's.)
    let old: Api<v1alpha1::Doohickey> = Api::namespaced(env.client(), "default");
    let read = old.get("small").await.unwrap();
    assert_eq!(read.spec.size, "3");
    assert_eq!(read.spec.color.as_deref(), Some("blue"));
    let listed = old.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].spec.size, "3");

    // Everything the manager did, it did under the derived role.
    assert_nothing_forbidden(&env, "the derived role");
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn without_the_conversion_crd_rule_the_manager_cannot_write_the_ca() {
    let mut role = DoohickeyReconciler::rbac();
    role.rules.as_mut().unwrap().retain(|r| {
        !r.resources
            .iter()
            .flatten()
            .any(|x| x == "customresourcedefinitions")
    });
    let (env, stop, run) = install_and_run(&role).await;
    eventually(Duration::from_secs(20), "a 403 reading the CRD", || async {
        env.request_log()
            .into_iter()
            .find(|r| r.status == 403 && r.path.contains("customresourcedefinitions"))
    })
    .await;
    stop.cancel();
    let _ = run.await;
}
