//! Admission webhooks that fail: unreachable, slow (timeoutSeconds, while
//! other requests are served), or answering garbage, a huge body, a
//! redirect, a wrong uid or no response; `failurePolicy` decides.

use crate::admission_webhooks::{hook, validating};
use crate::webhook_server::{self, Reply, allow};
use crate::{cm, status};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::Api;
use kube_client::api::PostParams;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn failure_policy_fail_refuses_and_ignore_lets_through() {
    let env = envtest::TestEnv::start().await.unwrap();
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let cc = json!({"url": format!("https://127.0.0.1:{port}/x")});
    let mut fail = hook("fail.example.com", cc.clone(), &["CREATE"]);
    fail["objectSelector"] = json!({"matchLabels": {"policy": "fail"}});
    let mut ignore = hook("ignore.example.com", cc, &["CREATE"]);
    ignore["failurePolicy"] = json!("Ignore");
    validating(&env.client(), "unreachable", vec![fail, ignore]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let e = cms
        .create(&PostParams::default(), &cm("f", &[("policy", "fail")], "1"))
        .await
        .unwrap_err();
    let s = status(e);
    assert_eq!(s.code, 500);
    assert_eq!(s.reason, "InternalError");
    assert!(
        s.message.starts_with(
            "Internal error occurred: failed calling webhook \"fail.example.com\": failed to call webhook: Post \"https://127.0.0.1:"
        ),
        "{}",
        s.message
    );
    assert!(cms.get_opt("f").await.unwrap().is_none());
    cms.create(&PostParams::default(), &cm("i", &[], "1"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_slow_webhook_times_out_without_blocking_other_requests() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        let resp = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": webhook_server::uid(r), "allowed": true}});
        Reply::Slow(Duration::from_secs(5), resp)
    })
    .await;
    let mut slow = hook(
        "slow.example.com",
        server.client_config("/slow"),
        &["CREATE"],
    );
    slow["timeoutSeconds"] = json!(1);
    validating(&env.client(), "slow", vec![slow]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(env.client(), "default");
    let started = Instant::now();
    let (pp, obj) = (PostParams::default(), cm("s", &[], "1"));
    let slow_write = cms.create(&pp, &obj);
    let other = async {
        // While the webhook is being waited for, storage serves others.
        tokio::time::timeout(crate::WAIT, async {
            while server.calls() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
        let begun = Instant::now();
        let mut s = k8s_openapi::api::core::v1::Secret::default();
        s.metadata.name = Some("meanwhile".into());
        secrets.create(&PostParams::default(), &s).await.unwrap();
        cms.list(&Default::default()).await.unwrap();
        begun.elapsed()
    };
    let (slow_result, other_took) = tokio::join!(slow_write, other);
    let s = status(slow_result.unwrap_err());
    assert_eq!(s.code, 500);
    assert!(
        s.message.ends_with("context deadline exceeded"),
        "{}",
        s.message
    );
    assert!(s.message.contains("/slow?timeout=1s"), "{}", s.message);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "timed out after {took:?}");
    assert!(
        other_took < Duration::from_secs(1),
        "other requests waited {other_took:?}"
    );
    assert!(cms.get_opt("s").await.unwrap().is_none());
}

#[tokio::test]
async fn bad_answers_are_refused_and_nothing_is_stored() {
    let env = envtest::TestEnv::start().await.unwrap();
    let server = webhook_server::start(&[], |r| {
        let name = r["request"]["name"].as_str().unwrap_or("");
        match name {
            "garbage" => Reply::Raw(200, b"<html>not json".to_vec(), None),
            "huge" => Reply::Raw(200, vec![b' '; 8 * 1024 * 1024], None),
            "redirect" => Reply::Raw(302, Vec::new(), Some("https://127.0.0.1:1/".into())),
            "wrong-uid" => Reply::Json(json!({"apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview", "response": {"uid": "nope", "allowed": true}})),
            "closing" => Reply::Closing(json!({"apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview", "response": {"uid": webhook_server::uid(r), "allowed": true}})),
            "no-response" => {
                Reply::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}))
            }
            _ => allow(r),
        }
    })
    .await;
    validating(
        &env.client(),
        "bad",
        vec![hook(
            "bad.example.com",
            server.client_config("/"),
            &["CREATE"],
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for (name, says) in [
        ("garbage", "received invalid webhook response"),
        ("huge", "over the limit of"),
        ("redirect", "the server responded with status 302"),
        ("wrong-uid", "expected response.uid="),
        ("no-response", "webhook response was absent"),
    ] {
        let e = cms
            .create(&PostParams::default(), &cm(name, &[], "1"))
            .await
            .unwrap_err();
        let s = status(e);
        assert_eq!(s.code, 500, "{name}");
        assert!(
            s.message.starts_with(
                "Internal error occurred: failed calling webhook \"bad.example.com\": "
            ),
            "{name}: {}",
            s.message
        );
        assert!(s.message.contains(says), "{name}: {}", s.message);
        assert!(
            cms.get_opt(name).await.unwrap().is_none(),
            "{name} not stored"
        );
    }
    // A server that closes the connection after answering has answered.
    for _ in 0..20 {
        cms.create(&PostParams::default(), &cm("closing", &[], "1"))
            .await
            .unwrap();
        cms.delete("closing", &Default::default()).await.unwrap();
    }
    cms.create(&PostParams::default(), &cm("fine", &[], "1"))
        .await
        .unwrap();
}
