//! A handler serves one kind: reviews for another kind, resource or
//! version are refused with a 400 naming both (a `Gadget` whose fields fit
//! a ConfigMap is neither validated nor patched as one); the handler sees
//! the request's kind, resource, sub-resource, operation, user and dry
//! run; and a defaulter's change is patched into the object as sent,
//! keeping fields the type does not know even where the typed diff does
//! not apply to it.

use std::sync::Arc;

use controller_runtime::webhook::{
    AdmissionContext, Defaulter, Denial, Validator, Warnings, mutate_path, validate_path,
};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};

use crate::webhook::{ModeDefaults, review, rules};
use crate::webhook_client::start;
use crate::webhook_conversion::v1::Gizmo;

/// The review `review(..)` makes, about `kind` (group, version, kind) and
/// `resource` (group, version, plural) instead of ConfigMaps.
fn review_of(kind: [&str; 3], resource: [&str; 3], object: Value) -> Value {
    let mut r = review("CREATE", Some(object), None, false);
    r["request"]["kind"] = json!({"group": kind[0], "version": kind[1], "kind": kind[2]});
    r["request"]["resource"] =
        json!({"group": resource[0], "version": resource[1], "resource": resource[2]});
    r
}

/// A Gadget of `other.example/v1` whose fields fit a ConfigMap.
fn gadget() -> Value {
    json!({"apiVersion": "other.example/v1", "kind": "Gadget",
           "metadata": {"name": "settings", "namespace": "team-a"}, "data": {"mode": "turbo"}})
}

fn configmap() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "settings", "namespace": "team-a"}, "data": {"mode": "turbo"}})
}

const GADGET: [&str; 3] = ["other.example", "v1", "Gadget"];
const GADGETS: [&str; 3] = ["other.example", "v1", "gadgets"];
const CONFIGMAP: [&str; 3] = ["", "v1", "ConfigMap"];
const CONFIGMAPS: [&str; 3] = ["", "v1", "configmaps"];

#[tokio::test]
async fn a_review_for_another_kind_resource_or_version_is_refused_naming_it() {
    let (validator, seen) = rules();
    let run = start(|s| {
        s.validator::<ConfigMap, _>(validator)
            .unwrap()
            .defaulter::<ConfigMap, _>(ModeDefaults)
            .unwrap()
    })
    .await;
    let cases = [
        (
            review_of(GADGET, GADGETS, gadget()),
            "not other.example/v1 Gadget",
        ),
        (
            review_of(CONFIGMAP, ["", "v1", "secrets"], configmap()),
            "not the resource v1/secrets",
        ),
        (
            review_of(
                ["", "v2", "ConfigMap"],
                ["", "v2", "configmaps"],
                configmap(),
            ),
            "not v2 ConfigMap",
        ),
        // The envelope says ConfigMap, the object is a Gadget.
        (
            review_of(CONFIGMAP, CONFIGMAPS, gadget()),
            "not an object of other.example/v1 Gadget",
        ),
    ];
    for path in [validate_path::<ConfigMap>(), mutate_path::<ConfigMap>()] {
        for (body, names) in &cases {
            let (status, answer) = run.client.review(&path, body).await;
            assert_eq!(status, 200, "{answer}");
            let resp = &answer["response"];
            assert_eq!(resp["allowed"], false, "{path}: {answer}");
            assert_eq!(resp["status"]["code"], 400, "{path}: {answer}");
            let message = resp["status"]["message"].as_str().unwrap();
            assert!(
                message.contains("this webhook serves v1 ConfigMap (configmaps)"),
                "{message}"
            );
            assert!(message.contains(names), "{path}: {message}");
            assert!(resp.get("patch").is_none(), "{answer}");
        }
    }
    // The validator never saw one of them.
    assert!(seen.lock().is_empty());

    // The ConfigMap itself still reaches both.
    let (_, answer) = run
        .client
        .review(
            &validate_path::<ConfigMap>(),
            &review_of(CONFIGMAP, CONFIGMAPS, configmap()),
        )
        .await;
    assert_eq!(answer["response"]["status"]["code"], 422, "{answer}");
}

/// Allows every Gizmo, and defaults its replicas.
struct AnyGizmo;

impl Validator<Gizmo> for AnyGizmo {
    async fn validate_create(&self, _: &Gizmo, _: &AdmissionContext) -> Result<Warnings, Denial> {
        Ok(vec![])
    }
    async fn validate_update(
        &self,
        _: &Gizmo,
        _: &Gizmo,
        _: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        Ok(vec![])
    }
}

impl Defaulter<Gizmo> for AnyGizmo {
    async fn default(&self, g: &mut Gizmo, _: &AdmissionContext) -> Result<(), Denial> {
        g.spec.replicas.get_or_insert(1);
        Ok(())
    }
}

#[tokio::test]
async fn a_gadget_whose_fields_fit_a_custom_resource_is_neither_allowed_nor_patched() {
    let run = start(|s| {
        s.validator::<Gizmo, _>(AnyGizmo)
            .unwrap()
            .defaulter::<Gizmo, _>(AnyGizmo)
            .unwrap()
    })
    .await;
    let fits = json!({"apiVersion": "other.example/v1", "kind": "Gadget",
        "metadata": {"name": "settings", "namespace": "team-a"},
        "spec": {"deployment": {"name": "web"}}});
    for path in [validate_path::<Gizmo>(), mutate_path::<Gizmo>()] {
        let (_, answer) = run
            .client
            .review(&path, &review_of(GADGET, GADGETS, fits.clone()))
            .await;
        let resp = &answer["response"];
        assert_eq!(resp["allowed"], false, "{path}: {answer}");
        assert_eq!(resp["status"]["code"], 400, "{path}: {answer}");
        assert_eq!(
            resp["status"]["message"],
            "this webhook serves convert.example.com/v1 Gizmo (gizmos), not other.example/v1 Gadget"
        );
        assert!(resp.get("patch").is_none(), "{answer}");
    }
}

/// Records the context of every review.
struct Recorder(Arc<parking_lot::Mutex<Vec<AdmissionContext>>>);

impl Validator<ConfigMap> for Recorder {
    async fn validate_create(
        &self,
        _: &ConfigMap,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.0.lock().push(ctx.clone());
        Ok(vec![])
    }
    async fn validate_update(
        &self,
        _: &ConfigMap,
        _: &ConfigMap,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.0.lock().push(ctx.clone());
        Ok(vec![])
    }
}

#[tokio::test]
async fn the_context_carries_kind_resource_sub_resource_operation_user_and_dry_run() {
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let recorder = Recorder(seen.clone());
    let run = start(|s| s.validator::<ConfigMap, _>(recorder).unwrap()).await;
    let mut body = review("UPDATE", Some(configmap()), Some(configmap()), true);
    body["request"]["subResource"] = json!("status");
    body["request"]["requestKind"] =
        json!({"group": "", "version": "v1beta1", "kind": "ConfigMap"});
    body["request"]["requestResource"] =
        json!({"group": "", "version": "v1beta1", "resource": "configmaps"});
    let (_, answer) = run
        .client
        .review(&validate_path::<ConfigMap>(), &body)
        .await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let seen = seen.lock();
    let ctx = &seen[0];
    assert_eq!(
        (
            ctx.kind.group.as_str(),
            ctx.kind.version.as_str(),
            ctx.kind.kind.as_str()
        ),
        ("", "v1", "ConfigMap")
    );
    assert_eq!(ctx.resource.resource, "configmaps");
    assert_eq!(ctx.sub_resource.as_deref(), Some("status"));
    assert_eq!(ctx.request_kind.as_ref().unwrap().version, "v1beta1");
    assert_eq!(ctx.request_resource.as_ref().unwrap().version, "v1beta1");
    assert!(matches!(
        ctx.operation,
        controller_runtime::webhook::Operation::Update
    ));
    assert_eq!(ctx.user_info.username.as_deref(), Some("alice"));
    assert!(ctx.dry_run);
}

/// Labels a Deployment's pod template.
struct TemplateLabel;

impl Defaulter<Deployment> for TemplateLabel {
    async fn default(&self, d: &mut Deployment, _: &AdmissionContext) -> Result<(), Denial> {
        // `spec` is an `Option` up to Kubernetes 1.36 and not from 1.37;
        // every Deployment this test sends has one.
        let Some(spec) = Option::<&mut DeploymentSpec>::from(&mut d.spec) else {
            return Ok(());
        };
        spec.template
            .metadata
            .get_or_insert_default()
            .labels
            .get_or_insert_default()
            .insert("app".into(), "web".into());
        Ok(())
    }
}

#[tokio::test]
async fn a_defaulter_patch_keeps_unknown_fields_where_the_typed_diff_does_not_apply() {
    let run = start(|s| s.defaulter::<Deployment, _>(TemplateLabel).unwrap()).await;
    // No template and no selector: the typed Deployment has both (they are
    // required), so its diff writes under a `/spec/template` the object as
    // sent does not have. Fields of a newer API stay.
    let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "settings", "namespace": "team-a", "futureMetadata": "kept"},
        "spec": {"replicas": 2, "futureSpec": {"x": 1}}});
    let body = review_of(
        ["apps", "v1", "Deployment"],
        ["apps", "v1", "deployments"],
        object.clone(),
    );
    let (_, answer) = run.client.review(&mutate_path::<Deployment>(), &body).await;
    let resp = &answer["response"];
    assert_eq!(resp["allowed"], true, "{answer}");
    use base64::Engine as _;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(resp["patch"].as_str().unwrap())
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(
        object,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "settings", "namespace": "team-a", "futureMetadata": "kept"},
            "spec": {"replicas": 2, "futureSpec": {"x": 1},
                     "template": {"metadata": {"labels": {"app": "web"}}}}}),
        "{patch:?}"
    );
}
