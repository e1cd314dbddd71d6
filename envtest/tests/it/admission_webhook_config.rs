//! What a webhook configuration's `timeoutSeconds` and rule `scope` do:
//! a timeout outside 1 to 30 (or an unknown scope) is refused with 422 as
//! the API server refuses it; a webhook slower than its timeout gets its
//! failure policy; a `Namespaced` rule is not applied to cluster-scoped
//! kinds, a `Cluster` rule not to namespaced ones.

use crate::admission_webhooks::{hook, validating};
use crate::webhook_server::{self, Reply, deny};
use crate::{cm, status};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::Api;
use kube_client::api::PostParams;
use serde_json::json;
use std::time::{Duration, Instant};

fn config(name: &str, timeout: i32, scope: &str) -> ValidatingWebhookConfiguration {
    let mut h = hook(
        "t.example.com",
        json!({"url": "https://127.0.0.1:1/x"}),
        &["CREATE"],
    );
    h["timeoutSeconds"] = json!(timeout);
    h["rules"][0]["scope"] = json!(scope);
    serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": [h]})).unwrap()
}

#[tokio::test]
async fn timeouts_outside_one_to_thirty_are_invalid() {
    let env = envtest::TestEnv::start().await.unwrap();
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let pp = PostParams::default();
    for bad in [0, 31, -5] {
        let s = status(api.create(&pp, &config("bad", bad, "*")).await.unwrap_err());
        assert_eq!(s.code, 422, "{bad}: {}", s.message);
        assert_eq!(
            s.message,
            format!(
                "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: webhooks[0].timeoutSeconds: Invalid value: {bad}: the timeout value must be between 1 and 30 seconds"
            )
        );
    }
    let s = status(
        api.create(&pp, &config("bad", 5, "Namespace"))
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("webhooks[0].rules[0].scope: Unsupported value: \"Namespace\""),
        "{}",
        s.message
    );
    assert!(api.get_opt("bad").await.unwrap().is_none());
    // Accepted at the bounds; an update out of range is refused too.
    api.create(&pp, &config("edge", 30, "Cluster"))
        .await
        .unwrap();
    api.create(&pp, &config("low", 1, "Namespaced"))
        .await
        .unwrap();
    let mut longer = api.get("edge").await.unwrap();
    if let Some(hooks) = longer.webhooks.as_mut() {
        hooks[0].timeout_seconds = Some(45);
    }
    let e = api.replace("edge", &pp, &longer).await.unwrap_err();
    assert_eq!(status(e).code, 422);
    let kept = api.get("edge").await.unwrap();
    assert_eq!(kept.webhooks.unwrap()[0].timeout_seconds, Some(30));
}

#[tokio::test]
async fn a_webhook_slower_than_its_timeout_gets_its_failure_policy() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        let resp = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": webhook_server::uid(r), "allowed": false,
                "status": {"code": 403, "message": "too late to matter"}}});
        Reply::Slow(Duration::from_secs(5), resp)
    })
    .await;
    let mut slow = hook(
        "slow.example.com",
        server.client_config("/slow"),
        &["CREATE"],
    );
    slow["timeoutSeconds"] = json!(1);
    slow["failurePolicy"] = json!("Ignore");
    validating(&env.client(), "slow-ignore", vec![slow]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let started = Instant::now();
    // The webhook would deny, but it answers after 5 s: at 1 s the call
    // has failed and `Ignore` lets the write through.
    cms.create(&PostParams::default(), &cm("s", &[], "1"))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "waited {took:?}");
    assert_eq!(server.calls(), 1);
}

#[tokio::test]
async fn rule_scopes_match_only_their_kinds() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| deny(r, 403, "scoped")).await;
    let both = |name: &str, scope: &str| {
        let mut h = hook(
            name,
            server.client_config(&format!("/{scope}")),
            &["CREATE"],
        );
        h["rules"][0]["resources"] = json!(["configmaps", "namespaces"]);
        h["rules"][0]["scope"] = json!(scope);
        h
    };
    validating(
        &env.client(),
        "namespaced",
        vec![both("ns.example.com", "Namespaced")],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let namespaces: Api<Namespace> = Api::all(env.client());
    let e = cms
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap_err();
    assert!(status(e).message.contains("\"ns.example.com\" denied"));
    let team: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &team)
        .await
        .unwrap();
    assert_eq!(server.calls(), 1, "a Namespaced rule matched a Namespace");

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    configs
        .delete("namespaced", &Default::default())
        .await
        .unwrap();
    validating(
        &env.client(),
        "cluster",
        vec![both("cl.example.com", "Cluster")],
    )
    .await;
    cms.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    let team: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-b"}})).unwrap();
    let e = namespaces
        .create(&PostParams::default(), &team)
        .await
        .unwrap_err();
    assert!(status(e).message.contains("\"cl.example.com\" denied"));
    assert_eq!(server.calls(), 2, "a Cluster rule matched a ConfigMap");
}
