//! Admission webhooks over HTTPS, served by webhook servers written here
//! with their own CA: denial with the webhook's status and message,
//! mutation by JSON patch, selectors, match conditions, failure policies,
//! timeouts, dry run and side effects, warnings, reinvocation, bad answers,
//! deletes and Service references.

use crate::webhook_server::{self, allow, answer, deny, patch};
use crate::{cm, namespace, raw_full, status};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::Api;
use kube_client::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub(crate) fn rule(ops: &[&str]) -> Value {
    json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ops, "resources": ["configmaps"]}])
}

/// A webhook entry calling `client_config` for configmaps on `ops`.
pub(crate) fn hook(name: &str, client_config: Value, ops: &[&str]) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": rule(ops),
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

pub(crate) async fn validating(client: &kube_client::Client, name: &str, hooks: Vec<Value>) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let cfg =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap();
    api.create(&PostParams::default(), &cfg).await.unwrap();
}

pub(crate) async fn mutating(client: &kube_client::Client, name: &str, hooks: Vec<Value>) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let cfg =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap();
    api.create(&PostParams::default(), &cfg).await.unwrap();
}

pub(crate) fn label(review: &Value, key: &str) -> Option<String> {
    review["request"]["object"]["metadata"]["labels"][key]
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn a_validating_webhook_denies_with_its_status_and_message() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        if label(r, "deny").is_some() {
            deny(r, 403, "configmaps labelled deny are not welcome")
        } else {
            allow(r)
        }
    })
    .await;
    validating(
        &env.client(),
        "policy",
        vec![hook(
            "deny.example.com",
            server.client_config("/validate"),
            &["CREATE", "UPDATE"],
        )],
    )
    .await;
    // Stored with the defaults a cluster fills in.
    let cfgs: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let stored = serde_json::to_value(cfgs.get("policy").await.unwrap()).unwrap();
    let h = &stored["webhooks"][0];
    assert_eq!(
        (&h["failurePolicy"], &h["matchPolicy"], &h["timeoutSeconds"]),
        (&json!("Fail"), &json!("Equivalent"), &json!(10))
    );
    assert_eq!(
        (&h["objectSelector"], &h["rules"][0]["scope"]),
        (&json!({}), &json!("*"))
    );
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let e = cms
        .create(&PostParams::default(), &cm("bad", &[("deny", "yes")], "1"))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 403);
    assert_eq!(
        s.message,
        "admission webhook \"deny.example.com\" denied the request: configmaps labelled deny are not welcome"
    );
    assert_eq!(s.reason, "Forbidden");
    assert!(
        cms.get_opt("bad").await.unwrap().is_none(),
        "nothing stored"
    );

    let created = cms
        .create(&PostParams::default(), &cm("good", &[], "1"))
        .await
        .unwrap();
    let review = server.last();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    let req = &review["request"];
    assert!(!req["uid"].as_str().unwrap().is_empty());
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(req["requestKind"], req["kind"]);
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(req["name"], "good");
    assert_eq!(req["namespace"], "default");
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["options"]["kind"], "CreateOptions");
    assert_eq!(req["userInfo"]["username"], "envtest-admin");
    assert_eq!(req["object"]["data"]["v"], "1");
    assert!(req["oldObject"].is_null());
    // Validating webhooks see the object as it is stored.
    assert_eq!(
        req["object"]["metadata"]["uid"].as_str(),
        created.metadata.uid.as_deref()
    );

    // An update that adds the label is denied too; the old object is sent.
    let p = Patch::Merge(json!({"metadata": {"labels": {"deny": "now"}}}));
    let e = cms
        .patch("good", &PatchParams::default(), &p)
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 403);
    let review = server.last();
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(review["request"]["options"]["kind"], "PatchOptions");
    assert_eq!(review["request"]["oldObject"]["metadata"]["name"], "good");
    let stored = cms.get("good").await.unwrap();
    assert!(
        stored.metadata.labels.is_none(),
        "the refused update is not stored"
    );
}

#[tokio::test]
async fn a_mutating_webhook_patches_creates_and_updates() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        let op = r["request"]["operation"].as_str().unwrap_or("");
        let has_labels = r["request"]["object"]["metadata"]["labels"].is_object();
        let mut ops = Vec::new();
        if !has_labels {
            ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {}}));
        }
        ops.push(
            json!({"op": "add", "path": "/metadata/labels/mutated", "value": op.to_lowercase()}),
        );
        patch(r, json!(ops))
    })
    .await;
    mutating(
        &env.client(),
        "defaults",
        vec![hook(
            "mutate.example.com",
            server.client_config("/mutate"),
            &["CREATE", "UPDATE"],
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.labels.unwrap()["mutated"], "create");
    // Mutating webhooks on create see no identity yet.
    assert!(server.last()["request"]["object"]["metadata"]["uid"].is_null());
    // Another write moves the store's revision past the object's.
    cms.create(&PostParams::default(), &cm("later", &[], "1"))
        .await
        .unwrap();
    let p = Patch::Merge(json!({"data": {"v": "2"}}));
    let patched = cms.patch("a", &PatchParams::default(), &p).await.unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["mutated"], "update");
    assert_eq!(patched.data.unwrap()["v"], "2");
    let stored = cms.get("a").await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["mutated"], "update");
    // Server-side apply of a new object is a CREATE.
    let applied = cms
        .patch(
            "b",
            &PatchParams::apply("tester"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"v": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.metadata.labels.unwrap()["mutated"], "create");
}

#[tokio::test]
async fn namespace_and_object_selectors_pick_the_requests() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| deny(r, 400, "selected")).await;
    let ns: Api<Namespace> = Api::all(env.client());
    let labelled: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team-a", "labels": {"team": "a"}}}))
            .unwrap();
    ns.create(&PostParams::default(), &labelled).await.unwrap();
    namespace(&env.client(), "team-b").await;
    let mut by_ns = hook("ns.example.com", server.client_config("/ns"), &["CREATE"]);
    by_ns["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
    let mut by_obj = hook("obj.example.com", server.client_config("/obj"), &["CREATE"]);
    by_obj["objectSelector"] =
        json!({"matchExpressions": [{"key": "checked", "operator": "Exists"}]});
    validating(&env.client(), "selectors", vec![by_ns, by_obj]).await;

    let in_a: Api<ConfigMap> = Api::namespaced(env.client(), "team-a");
    let in_b: Api<ConfigMap> = Api::namespaced(env.client(), "team-b");
    let e = in_a
        .create(&PostParams::default(), &cm("x", &[], "1"))
        .await
        .unwrap_err();
    assert!(status(e).message.contains("\"ns.example.com\" denied"));
    in_b.create(&PostParams::default(), &cm("x", &[], "1"))
        .await
        .unwrap();
    assert_eq!(
        server.calls(),
        1,
        "only the labelled namespace's write was sent"
    );
    let e = in_b
        .create(&PostParams::default(), &cm("y", &[("checked", "")], "1"))
        .await
        .unwrap_err();
    assert!(status(e).message.contains("\"obj.example.com\" denied"));
    assert_eq!(server.calls(), 2);
}

#[tokio::test]
async fn match_conditions_filter_with_cel() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| deny(r, 422, "no x")).await;
    let mut h = hook("cel.example.com", server.client_config("/"), &["*"]);
    h["matchConditions"] = json!([
        {"name": "x-only", "expression": "object.metadata.name.startsWith('x')"},
        {"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"},
    ]);
    validating(&env.client(), "cel", vec![h]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    cms.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let e = cms
        .create(&PostParams::default(), &cm("xa", &[], "1"))
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 422);
    let system: Api<ConfigMap> = Api::namespaced(env.client(), "kube-system");
    system
        .create(&PostParams::default(), &cm("xb", &[], "1"))
        .await
        .unwrap();
    assert_eq!(server.calls(), 1);
}

#[tokio::test]
async fn dry_runs_reach_webhooks_without_side_effects_only() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], allow).await;
    let mut clean = hook("clean.example.com", server.client_config("/c"), &["CREATE"]);
    clean["objectSelector"] = json!({"matchLabels": {"hook": "clean"}});
    let mut effects = hook(
        "effects.example.com",
        server.client_config("/e"),
        &["CREATE"],
    );
    effects["sideEffects"] = json!("Some");
    effects["objectSelector"] = json!({"matchLabels": {"hook": "effects"}});
    validating(&env.client(), "dry", vec![clean, effects]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let out = cms
        .create(&dry, &cm("d", &[("hook", "clean")], "1"))
        .await
        .unwrap();
    assert_eq!(out.metadata.name.as_deref(), Some("d"));
    assert_eq!(server.last()["request"]["dryRun"], true);
    assert!(
        cms.get_opt("d").await.unwrap().is_none(),
        "a dry run stores nothing"
    );
    let calls = server.calls();
    let e = cms
        .create(&dry, &cm("e", &[("hook", "effects")], "1"))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "admission webhook \"effects.example.com\" does not support dry run"
    );
    assert_eq!(server.calls(), calls, "not called");
    // Not a dry run: called.
    cms.create(
        &PostParams::default(),
        &cm("e", &[("hook", "effects")], "1"),
    )
    .await
    .unwrap();
    assert_eq!(server.calls(), calls + 1);
}

#[tokio::test]
async fn webhook_warnings_become_warning_headers() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        answer(
            r,
            json!({"allowed": true, "warnings": ["spec.x is deprecated", "be \"careful\""]}),
        )
    })
    .await;
    validating(
        &env.client(),
        "warn",
        vec![hook(
            "warn.example.com",
            server.client_config("/w"),
            &["CREATE"],
        )],
    )
    .await;
    let body = serde_json::to_vec(&cm("w", &[], "1")).unwrap();
    let (code, warnings, _) = raw_full(
        &env.client(),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        body,
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        [
            "299 - \"spec.x is deprecated\"",
            "299 - \"be \\\"careful\\\"\""
        ]
    );
}

#[tokio::test]
async fn if_needed_webhooks_are_called_again_after_a_later_change() {
    let env = envtest::TestEnv::start().await.unwrap();
    // First: records the labels it saw; second: adds a label once.
    let first = webhook_server::start(&[], allow).await;
    let second = webhook_server::start(&[], |r| {
        if label(r, "second").is_some() {
            allow(r)
        } else {
            patch(
                r,
                json!([{"op": "add", "path": "/metadata/labels/second", "value": "yes"}]),
            )
        }
    })
    .await;
    let mut a = hook("a-first.example.com", first.client_config("/"), &["CREATE"]);
    a["reinvocationPolicy"] = json!("IfNeeded");
    let b = hook(
        "b-second.example.com",
        second.client_config("/"),
        &["CREATE"],
    );
    mutating(&env.client(), "reinvoke", vec![a, b]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let out = cms
        .create(&PostParams::default(), &cm("r", &[("start", "1")], "1"))
        .await
        .unwrap();
    assert_eq!(out.metadata.labels.unwrap()["second"], "yes");
    assert_eq!(
        first.calls(),
        2,
        "called again after the second webhook's change"
    );
    assert_eq!(label(&first.last(), "second").as_deref(), Some("yes"));
    assert_eq!(second.calls(), 1);
}

#[tokio::test]
async fn deletes_go_through_validating_webhooks() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        if label(
            &json!({"request": {"object": r["request"]["oldObject"]}}),
            "keep",
        )
        .is_some()
        {
            deny(r, 403, "kept")
        } else {
            allow(r)
        }
    })
    .await;
    validating(
        &env.client(),
        "deletes",
        vec![hook(
            "delete.example.com",
            server.client_config("/"),
            &["DELETE"],
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    cms.create(&PostParams::default(), &cm("keep", &[("keep", "1")], "1"))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("drop", &[], "1"))
        .await
        .unwrap();
    let e = cms
        .delete("keep", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(
        status(e).message,
        "admission webhook \"delete.example.com\" denied the request: kept"
    );
    let review = server.last();
    assert_eq!(review["request"]["operation"], "DELETE");
    assert!(review["request"]["object"].is_null());
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");
    assert!(cms.get_opt("keep").await.unwrap().is_some());
    cms.delete("drop", &DeleteParams::default()).await.unwrap();
    assert!(cms.get_opt("drop").await.unwrap().is_none());
    // A collection delete is refused as a whole when one object is.
    let e = cms
        .delete_collection(&DeleteParams::default(), &Default::default())
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 403);
    assert!(cms.get_opt("keep").await.unwrap().is_some());
}

#[tokio::test]
async fn service_references_go_to_the_mapped_address() {
    let server = webhook_server::start(&["hook.system.svc"], |r| deny(r, 403, "via service")).await;
    let env = envtest::TestEnv::builder()
        .webhook_service("system/hook", server.addr.to_string())
        .start()
        .await
        .unwrap();
    let cc = json!({"service": {"namespace": "system", "name": "hook", "path": "/v"},
        "caBundle": server.ca_bundle});
    let mut h = hook("svc.example.com", cc, &["CREATE"]);
    h["objectSelector"] = json!({"matchExpressions": [{"key": "to", "operator": "DoesNotExist"}]});
    validating(&env.client(), "svc", vec![h]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let e = cms
        .create(&PostParams::default(), &cm("x", &[], "1"))
        .await
        .unwrap_err();
    assert_eq!(
        status(e).message,
        "admission webhook \"svc.example.com\" denied the request: via service"
    );
    // A Service nobody mapped fails the call.
    let cc =
        json!({"service": {"namespace": "system", "name": "other"}, "caBundle": server.ca_bundle});
    let mut unmapped = hook("unmapped.example.com", cc, &["CREATE"]);
    unmapped["objectSelector"] = json!({"matchLabels": {"to": "other"}});
    validating(&env.client(), "unmapped", vec![unmapped]).await;
    let e = cms
        .create(&PostParams::default(), &cm("y", &[("to", "other")], "1"))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 500);
    assert!(
        s.message.contains("service system/other:443 is not mapped"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn status_writes_are_sent_as_the_status_subresource() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        if r["request"]["object"]["status"]["phase"] == "Failed" {
            deny(r, 403, "no failing")
        } else {
            allow(r)
        }
    })
    .await;
    let mut h = hook("status.example.com", server.client_config("/"), &["UPDATE"]);
    h["rules"] = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/status"]}]);
    validating(&env.client(), "status", vec![h]).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(env.client(), "default");
    let pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // A main-resource update is not sent.
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
    assert_eq!(server.calls(), 0);
    let e = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status(e).code, 403);
    let req = &server.last()["request"];
    assert_eq!(req["subResource"], "status");
    assert_eq!(req["kind"]["kind"], "Pod");
    assert_eq!(req["oldObject"]["status"]["phase"], "Pending");
    let phase = pods.get("p").await.unwrap().status.unwrap().phase;
    assert_eq!(phase.as_deref(), Some("Pending"));
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    assert_eq!(server.calls(), 2);
}
