//! Protobuf bodies and answers for built-in kinds, as kubectl and client-go
//! send and prefer them: create, get, list and watch round-trip to the same
//! JSON objects; discovery documents too; custom resources stay JSON-only
//! (415 / 406).

use crate::WAIT;
use crate::crd::widget_crd;
use envtest::TestEnv;
use envtest::codec::{PROTOBUF, from_protobuf, from_watch_frame, to_protobuf};
use http_body_util::BodyExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_client::Client;
use kube_client::api::{Api, PostParams};
use serde_json::{Value, json};

pub(crate) const PREFER_PB: &str = "application/vnd.kubernetes.protobuf, application/json";

/// One request: (status, Content-Type, body bytes).
pub(crate) async fn send(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    accept: &str,
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    let mut b = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, accept);
    if let Some(ct) = content_type {
        b = b.header(http::header::CONTENT_TYPE, ct);
    }
    let resp = client
        .send(b.body(body).unwrap().map(kube_client::client::Body::from))
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let ct = resp.headers()[http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (code, ct, bytes)
}

pub(crate) async fn get_json(client: &Client, path: &str) -> Value {
    let (code, ct, body) = send(client, "GET", path, None, "application/json", vec![]).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"), "GET {path}");
    serde_json::from_slice(&body).unwrap()
}

/// Every field of `sent` is in `got` with the same value (`got` may hold more).
fn assert_kept(sent: &Value, got: &Value, at: &str) {
    match (sent, got) {
        (Value::Object(s), Value::Object(g)) => {
            for (k, v) in s {
                assert_kept(v, g.get(k).unwrap_or(&Value::Null), &format!("{at}.{k}"));
            }
        }
        (Value::Array(s), Value::Array(g)) => {
            assert_eq!(s.len(), g.len(), "{at}: list length");
            for (i, (s, g)) in s.iter().zip(g).enumerate() {
                assert_kept(s, g, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(sent, got, "{at}"),
    }
}

/// (collection path, object) for the built-in kinds the issue names.
fn objects() -> Vec<(&'static str, Value)> {
    let labels = json!({"app": "web"});
    let pod_spec = json!({"containers": [{"name": "c", "image": "nginx",
        "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}],
        "restartPolicy": "Never"});
    vec![
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "pb-ns", "labels": labels}}),
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "pb-cm", "annotations": {"note": "hi"}},
            "data": {"mode": "fast"}, "binaryData": {"raw": "AP8Q"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "pb-secret"}, "type": "Opaque", "data": {"k": "AAEC/w=="}}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pb-pod", "labels": labels}, "spec": pod_spec}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "pb-svc"}, "spec": {"selector": labels,
            "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                      {"name": "alt", "port": 81, "targetPort": 8081}]}}),
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1",
            "kind": "ServiceAccount", "metadata": {"name": "pb-sa"},
            "automountServiceAccountToken": false}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {"name": "pb-deploy"}, "spec": {"replicas": 2,
            "selector": {"matchLabels": labels},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}),
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pb-job"}, "spec": {"backoffLimit": 3,
            "template": {"spec": pod_spec}}}),
        ),
    ]
}

#[tokio::test]
async fn built_in_kinds_create_get_and_list_in_protobuf() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    for (collection, obj) in objects() {
        let name = obj["metadata"]["name"].as_str().unwrap();
        let kind = obj["kind"].as_str().unwrap();
        let body = to_protobuf(&obj).unwrap();
        let (code, ct, created) =
            send(&client, "POST", collection, Some(PROTOBUF), PREFER_PB, body).await;
        assert_eq!(code, 201, "{kind}: {}", String::from_utf8_lossy(&created));
        assert_eq!(ct, PROTOBUF, "{kind} answered in protobuf");
        let created = from_protobuf(&created).unwrap();

        // The JSON answer is the same object.
        let path = format!("{collection}/{name}");
        let json = get_json(&client, &path).await;
        assert_eq!(created, json, "{kind}: protobuf create answer vs JSON get");
        // Everything sent is kept (the server adds defaults and metadata).
        assert_kept(&obj, &json, kind);

        let (code, ct, got) = send(&client, "GET", &path, None, PREFER_PB, vec![]).await;
        assert_eq!((code, ct.as_str()), (200, PROTOBUF), "{kind} get");
        assert_eq!(
            from_protobuf(&got).unwrap(),
            json,
            "{kind}: protobuf get vs JSON get"
        );

        let (code, ct, list) = send(&client, "GET", collection, None, PREFER_PB, vec![]).await;
        assert_eq!((code, ct.as_str()), (200, PROTOBUF), "{kind} list");
        let list = from_protobuf(&list).unwrap();
        let json_list = get_json(&client, collection).await;
        assert_eq!(list["kind"], format!("{kind}List"));
        assert_eq!(
            list["items"], json_list["items"],
            "{kind}: protobuf list vs JSON list"
        );
        assert_eq!(
            list["metadata"]["resourceVersion"],
            json_list["metadata"]["resourceVersion"]
        );
    }
}

#[tokio::test]
async fn protobuf_updates_and_errors() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let path = "/api/v1/namespaces/default/configmaps";
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u"}, "data": {"a": "1"}});
    let (code, _, created) = send(
        &client,
        "POST",
        path,
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&cm).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let mut obj = from_protobuf(&created).unwrap();
    obj["data"]["a"] = json!("2");
    let (code, _, updated) = send(
        &client,
        "PUT",
        &format!("{path}/u"),
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&obj).unwrap(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(from_protobuf(&updated).unwrap()["data"]["a"], "2");

    // A stale resourceVersion: the Conflict Status comes back in protobuf.
    let (code, ct, err) = send(
        &client,
        "PUT",
        &format!("{path}/u"),
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&obj).unwrap(),
    )
    .await;
    assert_eq!((code, ct.as_str()), (409, PROTOBUF));
    let st = from_protobuf(&err).unwrap();
    assert_eq!(
        (
            st["kind"].as_str(),
            st["reason"].as_str(),
            st["code"].as_i64()
        ),
        (Some("Status"), Some("Conflict"), Some(409))
    );
    let (code, ct, err) = send(
        &client,
        "GET",
        &format!("{path}/missing"),
        None,
        PREFER_PB,
        vec![],
    )
    .await;
    assert_eq!((code, ct.as_str()), (404, PROTOBUF));
    assert_eq!(from_protobuf(&err).unwrap()["reason"], "NotFound");
    // Without protobuf in Accept, the same error is JSON.
    let (_, ct, _) = send(
        &client,
        "GET",
        &format!("{path}/missing"),
        None,
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(ct, "application/json");

    // A body that is not protobuf at all is a clear 400.
    let (code, _, err) = send(
        &client,
        "POST",
        path,
        Some(PROTOBUF),
        "application/json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 400);
    let st: Value = serde_json::from_slice(&err).unwrap();
    assert!(st["message"].as_str().unwrap().contains("magic"), "{st}");

    // DeleteOptions in protobuf (client-go sends them so): preconditions honoured.
    let opts = json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
        "preconditions": {"uid": "not-the-uid"}});
    let (code, _, _) = send(
        &client,
        "DELETE",
        &format!("{path}/u"),
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&opts).unwrap(),
    )
    .await;
    assert_eq!(
        code, 409,
        "a uid precondition carried in protobuf is checked"
    );
}

/// Read one length-prefixed frame from a protobuf watch body.
pub(crate) async fn next_frame(body: &mut kube_client::client::Body, buf: &mut Vec<u8>) -> Value {
    loop {
        if buf.len() >= 4 {
            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() >= 4 + len {
                let frame: Vec<u8> = buf.drain(..4 + len).collect();
                return from_watch_frame(&frame[4..]).unwrap();
            }
        }
        let chunk = tokio::time::timeout(WAIT, body.frame())
            .await
            .expect("timed out waiting for a watch frame")
            .expect("watch ended")
            .unwrap();
        if let Ok(data) = chunk.into_data() {
            buf.extend_from_slice(&data);
        }
    }
}

#[tokio::test]
async fn watch_streams_length_prefixed_protobuf_events() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(client.clone());
    let mut first = k8s_openapi::api::core::v1::Secret::default();
    first.metadata.name = Some("before".into());
    api.create(&PostParams::default(), &first).await.unwrap();

    let req = http::Request::builder()
        .uri("/api/v1/namespaces/default/secrets?watch=true&allowWatchBookmarks=true")
        .header(http::header::ACCEPT, PREFER_PB)
        .body(kube_client::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()[http::header::CONTENT_TYPE],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let ev = next_frame(&mut body, &mut buf).await;
    assert_eq!(ev["type"], "ADDED");
    let path = "/api/v1/namespaces/default/secrets";
    assert_eq!(
        ev["object"],
        get_json(&client, &format!("{path}/before")).await
    );

    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "later"},
        "data": {"bin": "/wABAg=="}});
    let (code, _, _) = send(
        &client,
        "POST",
        path,
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&secret).unwrap(),
    )
    .await;
    assert_eq!(code, 201);
    let ev = next_frame(&mut body, &mut buf).await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(
        ev["object"],
        get_json(&client, &format!("{path}/later")).await
    );
    assert_eq!(ev["object"]["data"]["bin"], "/wABAg==");

    api.delete("later", &Default::default()).await.unwrap();
    let ev = next_frame(&mut body, &mut buf).await;
    assert_eq!(
        (
            ev["type"].as_str(),
            ev["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("later"))
    );
}

#[tokio::test]
async fn custom_resources_are_json_only() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd("Namespaced"))
        .await
        .unwrap();
    let path = "/apis/example.com/v1/namespaces/default/widgets";
    let deadline = tokio::time::Instant::now() + WAIT;
    while send(&client, "GET", path, None, "application/json", vec![])
        .await
        .0
        != 200
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "widgets never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let (code, ct, body) = send(
        &client,
        "POST",
        path,
        Some(PROTOBUF),
        "application/json",
        b"k8s\0anything".to_vec(),
    )
    .await;
    assert_eq!((code, ct.as_str()), (415, "application/json"));
    let st: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(st["reason"], "UnsupportedMediaType");

    let (code, _, body) = send(&client, "GET", path, None, PROTOBUF, vec![]).await;
    assert_eq!(code, 406);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["reason"],
        "NotAcceptable"
    );

    // Preferring protobuf but accepting JSON gets JSON.
    let (code, ct, _) = send(&client, "GET", path, None, PREFER_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
}

#[tokio::test]
async fn discovery_answers_in_protobuf_when_preferred() {
    use prost::Message;
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    for (path, kind) in [
        ("/api", "APIVersions"),
        ("/apis", "APIGroupList"),
        ("/apis/apps", "APIGroup"),
        ("/api/v1", "APIResourceList"),
        ("/apis/apps/v1", "APIResourceList"),
    ] {
        let json = get_json(&c, path).await;
        let (code, ct, body) = send(&c, "GET", path, None, PREFER_PB, vec![]).await;
        assert_eq!((code, ct.as_str()), (200, PROTOBUF), "GET {path}");
        // The envelope names the type, as a cluster's does, and the decoded
        // document holds everything the JSON answer holds.
        let raw = body.strip_prefix(b"k8s\0").expect("magic");
        let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(raw).unwrap();
        let tm = unknown.type_meta.unwrap();
        assert_eq!(
            (tm.api_version.as_deref(), tm.kind.as_deref()),
            (Some("v1"), Some(kind)),
            "{path}"
        );
        // (protobuf has no empty-versus-absent list, as on a cluster).
        assert_kept(
            &without_empty_lists(json),
            &from_protobuf(&body).unwrap(),
            path,
        );
        if path == "/apis/apps/v1" {
            let list = k8s_pb::apimachinery::pkg::apis::meta::v1::APIResourceList::decode(
                unknown.raw.unwrap_or_default().as_slice(),
            )
            .unwrap();
            assert_eq!(list.group_version.as_deref(), Some("apps/v1"));
            let deployments = list
                .resources
                .iter()
                .find(|r| r.name.as_deref() == Some("deployments"))
                .unwrap();
            assert!(
                deployments
                    .verbs
                    .as_ref()
                    .is_some_and(|v| v.items.iter().any(|v| v == "watch"))
            );
        }
    }
    // JSON stays the answer for clients that prefer it, and errors follow the
    // preference too (a Status in protobuf).
    let (_, ct, _) = send(&c, "GET", "/apis", None, "application/json", vec![]).await;
    assert_eq!(ct, "application/json");
    let (code, ct, body) = send(&c, "GET", "/apis/nope.example.com", None, PREFER_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (404, PROTOBUF));
    assert_eq!(from_protobuf(&body).unwrap()["kind"], "Status");
}

/// `v` without its empty lists (at any depth).
fn without_empty_lists(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| v.as_array().is_none_or(|a| !a.is_empty()))
                .map(|(k, v)| (k, without_empty_lists(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_empty_lists).collect()),
        v => v,
    }
}
