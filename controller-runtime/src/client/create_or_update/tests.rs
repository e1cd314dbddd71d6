//! create_or_update / create_or_patch against a scripted server that keeps
//! one object and records every request.

// A Deployment's `spec` is an `Option` up to Kubernetes 1.36 and not from
// 1.37: `.into()` writes it under both.
#![allow(clippy::useless_conversion)]

use std::sync::Arc;

use http::{Method, Request, Response};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStatus};
use kube_client::Client;
use kube_client::client::Body;
use parking_lot::Mutex;
use serde_json::json;

use super::*;

/// The spec of `deployment` (the default if it has none) under every
/// Kubernetes version: an `Option` up to 1.36, not from 1.37. (The client
/// layer's own copy of the manager's test helper: a layer imports only the
/// layers below it.)
fn spec_of(deployment: &Deployment) -> DeploymentSpec {
    Option::<&DeploymentSpec>::from(&deployment.spec)
        .cloned()
        .unwrap_or_default()
}

const PATH: &str = "/apis/apps/v1/namespaces/ns/deployments";

/// One request the server saw: method, path, and JSON body (if any).
type Seen = (Method, String, Value);

#[derive(Clone, Default)]
struct Server {
    stored: Arc<Mutex<Option<Value>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn with(obj: Option<Deployment>) -> Self {
        let server = Self::default();
        *server.stored.lock() = obj.map(|d| serde_json::to_value(d).unwrap());
        server
    }

    fn api(&self) -> Api<Deployment> {
        let server = self.clone();
        let svc = tower::service_fn(move |req: Request<Body>| {
            let server = server.clone();
            async move { Ok::<_, std::convert::Infallible>(server.answer(req).await) }
        });
        Api::namespaced(Client::new(svc, "ns"), "ns")
    }

    fn methods(&self) -> Vec<(Method, String)> {
        self.seen
            .lock()
            .iter()
            .map(|(m, p, _)| (m.clone(), p.clone()))
            .collect()
    }

    fn body(&self, i: usize) -> Value {
        self.seen.lock()[i].2.clone()
    }

    async fn answer(&self, req: Request<Body>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let bytes = req.into_body().collect_bytes().await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        self.seen
            .lock()
            .push((method.clone(), path.clone(), body.clone()));
        let mut stored = self.stored.lock();
        let bump = |v: &mut Value| {
            let rv = v["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            v["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        };
        let (code, out) = match (method, stored.as_mut()) {
            (Method::GET, Some(obj)) => (200, obj.clone()),
            (Method::GET, None) => (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
            ),
            (Method::POST, None) => {
                let mut obj = body;
                bump(&mut obj);
                *stored = Some(obj.clone());
                (201, obj)
            }
            (Method::PUT, Some(obj)) => {
                let mut new = body;
                new["status"] = obj["status"].clone();
                bump(&mut new);
                *obj = new;
                (200, obj.clone())
            }
            (Method::PATCH, Some(obj)) => {
                json_patch::merge(obj, &body);
                bump(obj);
                (200, obj.clone())
            }
            (m, _) => panic!("unexpected {m} {path}"),
        };
        Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(&out).unwrap()))
            .unwrap()
    }
}

fn web() -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some("web".into());
    d.metadata.namespace = Some("ns".into());
    d.spec = DeploymentSpec {
        replicas: Some(1),
        ..DeploymentSpec::default()
    }
    .into();
    d
}

fn stored_web() -> Deployment {
    let mut d = web();
    d.metadata.resource_version = Some("7".into());
    d.status = Some(DeploymentStatus {
        replicas: Some(1),
        ..DeploymentStatus::default()
    });
    d
}

fn replicas(d: &mut Deployment, n: i32) {
    let mut spec = spec_of(d);
    spec.replicas = Some(n);
    d.spec = spec.into();
}

fn get() -> (Method, String) {
    (Method::GET, format!("{PATH}/web"))
}

#[tokio::test]
async fn an_absent_object_is_mutated_and_created() {
    let server = Server::with(None);
    let (d, result) = create_or_update(&server.api(), web(), |d| {
        replicas(d, 3);
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Created);
    assert_eq!(spec_of(&d).replicas, Some(3));
    assert_eq!(server.methods(), [get(), (Method::POST, PATH.to_owned())]);
}

#[tokio::test]
async fn nothing_is_written_when_the_closure_changes_nothing() {
    for patch in [false, true] {
        let server = Server::with(Some(stored_web()));
        let keep = |d: &mut Deployment| {
            replicas(d, 1);
            Ok(())
        };
        let (d, result) = if patch {
            create_or_patch(&server.api(), web(), keep).await
        } else {
            create_or_update(&server.api(), web(), keep).await
        }
        .unwrap();
        assert_eq!(result, OperationResult::Unchanged, "patch: {patch}");
        assert_eq!(d.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(server.methods(), [get()], "patch: {patch}");
    }
}

#[tokio::test]
async fn a_change_is_written_once_with_the_resource_version_read() {
    let server = Server::with(Some(stored_web()));
    let (d, result) = create_or_update(&server.api(), web(), |d| {
        replicas(d, 4);
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Updated);
    assert_eq!(d.metadata.resource_version.as_deref(), Some("8"));
    assert_eq!(
        server.methods(),
        [get(), (Method::PUT, format!("{PATH}/web"))]
    );
    assert_eq!(server.body(1)["metadata"]["resourceVersion"], "7");
    assert_eq!(server.body(1)["spec"]["replicas"], 4);
}

#[tokio::test]
async fn create_or_patch_patches_spec_and_status_separately() {
    let server = Server::with(Some(stored_web()));
    let (d, result) = create_or_patch(&server.api(), web(), |d| {
        replicas(d, 5);
        d.status.get_or_insert_default().ready_replicas = Some(1);
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::UpdatedStatus);
    assert_eq!(
        server.methods(),
        [
            get(),
            (Method::PATCH, format!("{PATH}/web")),
            (Method::PATCH, format!("{PATH}/web/status")),
        ]
    );
    assert_eq!(server.body(1), json!({"spec": {"replicas": 5}}));
    assert_eq!(server.body(2), json!({"status": {"readyReplicas": 1}}));
    assert_eq!(d.status.as_ref().unwrap().ready_replicas, Some(1));
    assert_eq!(spec_of(&d).replicas, Some(5));
}

#[tokio::test]
async fn create_or_patch_of_status_alone_reports_status_only() {
    let server = Server::with(Some(stored_web()));
    let (_, result) = create_or_patch(&server.api(), web(), |d| {
        d.status = None;
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::UpdatedStatusOnly);
    assert_eq!(
        server.methods()[1..],
        [(Method::PATCH, format!("{PATH}/web/status"))]
    );
    assert_eq!(server.body(1), json!({"status": null}));
}

#[tokio::test]
async fn create_or_patch_of_spec_alone_reports_updated() {
    let server = Server::with(Some(stored_web()));
    let (_, result) = create_or_patch(&server.api(), web(), |d| {
        d.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(result, OperationResult::Updated);
    assert_eq!(server.body(1), json!({"metadata": {"labels": {"a": "b"}}}));
}

#[tokio::test]
async fn a_failing_closure_or_a_renaming_one_writes_nothing() {
    for exists in [false, true] {
        let stored = exists.then(stored_web);
        let server = Server::with(stored.clone());
        let err = create_or_update(&server.api(), web(), |_| Err("no".into()))
            .await
            .unwrap_err();
        assert!(matches!(err, CreateOrUpdateError::Mutate { .. }), "{err}");
        assert_eq!(server.methods(), [get()]);
        let server = Server::with(stored);
        let err = create_or_patch(&server.api(), web(), |d| {
            d.metadata.name = Some("other".into());
            Ok(())
        })
        .await
        .unwrap_err();
        assert!(
            matches!(err, CreateOrUpdateError::KeyChanged { .. }),
            "{err}"
        );
        assert_eq!(server.methods(), [get()]);
    }
}

#[tokio::test]
async fn an_object_without_a_name_is_refused_before_any_request() {
    let server = Server::with(None);
    let err = create_or_update(&server.api(), Deployment::default(), |_| Ok(()))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        CreateOrUpdateError::Client(ClientError::MissingName)
    ));
    assert!(server.methods().is_empty());
}

#[test]
fn merge_patch_diffs_objects_and_replaces_the_rest() {
    let before = json!({"a": 1, "b": {"c": 1, "d": [1, 2]}, "gone": true, "same": "x"});
    let after = json!({"a": 2, "b": {"c": 1, "d": [2]}, "new": {"e": 1}, "same": "x"});
    let patch = merge_patch(&before, &after);
    assert_eq!(
        patch,
        json!({"a": 2, "b": {"d": [2]}, "gone": null, "new": {"e": 1}})
    );
    let mut applied = before.clone();
    json_patch::merge(&mut applied, &patch);
    assert_eq!(applied, after);
}
