//! Server-side tables (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`)
//! over HTTP: each built-in kind answers with the columns `kubectl get`
//! shows on a cluster and the cells of the object asked for, in lists, GETs
//! and watches; custom resources keep their `additionalPrinterColumns`.

use crate::raw;
use envtest::TestEnv;
use futures::StreamExt;
use kube_client::Client;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// GET with the Table media type, answering (status, body).
async fn get_table(client: &Client, path: &str) -> (u16, Value) {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, TABLE)
        .body(Vec::new())
        .unwrap()
        .map(kube_client::client::Body::from);
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap())
}

/// Column names of a Table, with their priorities.
fn columns(t: &Value) -> Vec<(String, u64)> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Default (priority 0) column names.
fn headers(t: &Value) -> Vec<String> {
    columns(t)
        .into_iter()
        .filter(|(_, p)| *p == 0)
        .map(|(n, _)| n)
        .collect()
}

/// The cells of the row whose object has this name.
fn row<'a>(t: &'a Value, name: &str) -> &'a Vec<Value> {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["object"]["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name} in {t}"))["cells"]
        .as_array()
        .unwrap()
}

async fn create(client: &Client, path: &str, body: Value) {
    let (code, v) = raw(
        client,
        "POST",
        path,
        Some("application/json"),
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{path}: {v}");
}

#[tokio::test]
async fn core_kinds_answer_with_their_columns() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let ns = "/api/v1/namespaces/default";
    create(
        &c,
        &format!("{ns}/configmaps"),
        json!({"metadata": {"name": "prices"}, "data": {"a": "1", "b": "2"}}),
    )
    .await;
    create(
        &c,
        &format!("{ns}/secrets"),
        json!({"metadata": {"name": "keys"}, "type": "Opaque", "data": {"t": "YQ=="}}),
    )
    .await;
    create(
        &c,
        &format!("{ns}/services"),
        json!({"metadata": {"name": "front"},
        "spec": {"selector": {"app": "front"}, "ports": [{"port": 80}]}}),
    )
    .await;
    create(
        &c,
        &format!("{ns}/pods"),
        json!({"metadata": {"name": "front-0"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}}),
    )
    .await;
    create(
        &c,
        &format!("{ns}/events"),
        json!({"metadata": {"name": "front-0.1"},
        "involvedObject": {"kind": "Pod", "name": "front-0", "namespace": "default"},
        "type": "Normal", "reason": "Started", "message": "Started container app"}),
    )
    .await;

    let (code, t) = get_table(&c, &format!("{ns}/configmaps")).await;
    assert_eq!(code, 200);
    assert_eq!(t["kind"], "Table");
    assert_eq!(headers(&t), ["Name", "Data", "Age"]);
    assert_eq!(row(&t, "prices")[1], 2);

    let (_, t) = get_table(&c, &format!("{ns}/secrets")).await;
    assert_eq!(headers(&t), ["Name", "Type", "Data", "Age"]);
    assert_eq!(row(&t, "keys")[1..3], [json!("Opaque"), json!(1)]);

    let (_, t) = get_table(&c, &format!("{ns}/services")).await;
    assert_eq!(
        headers(&t),
        [
            "Name",
            "Type",
            "Cluster-IP",
            "External-IP",
            "Port(s)",
            "Age"
        ]
    );
    let cells = row(&t, "front");
    assert_eq!(cells[1], "ClusterIP");
    assert!(
        cells[2].as_str().unwrap().contains('.'),
        "an allocated IP: {cells:?}"
    );
    assert_eq!(cells[3..5], [json!("<none>"), json!("80/TCP")]);
    assert_eq!(cells[6], "app=front");

    let (_, t) = get_table(&c, &format!("{ns}/pods")).await;
    assert_eq!(headers(&t), ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(
        columns(&t).iter().filter(|(_, p)| *p == 1).count(),
        4,
        "IP, Node, Nominated Node, Readiness Gates for -o wide"
    );
    assert_eq!(
        row(&t, "front-0")[1..4],
        [json!("0/1"), json!("Pending"), json!("0")]
    );

    let (_, t) = get_table(&c, &format!("{ns}/events")).await;
    assert_eq!(
        headers(&t),
        ["Last Seen", "Type", "Reason", "Object", "Message"]
    );
    let ev = row(&t, "front-0.1");
    assert_eq!(
        ev[1..4],
        [json!("Normal"), json!("Started"), json!("pod/front-0")]
    );
    assert_eq!(ev[6], "Started container app");

    let (_, t) = get_table(&c, "/api/v1/namespaces").await;
    assert_eq!(headers(&t), ["Name", "Status", "Age"]);
    assert_eq!(row(&t, "default")[1], "Active");

    // One object's GET answers a one-row Table.
    let (_, t) = get_table(&c, &format!("{ns}/configmaps/prices")).await;
    assert_eq!(t["rows"].as_array().unwrap().len(), 1);
    assert_eq!(row(&t, "prices")[1], 2);
}

#[tokio::test]
async fn workload_kinds_answer_with_their_columns() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let template = json!({"metadata": {"labels": {"app": "w"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}});
    let ns = "/apis/apps/v1/namespaces/default";
    create(
        &c,
        &format!("{ns}/deployments"),
        json!({"metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "w"}}, "template": template}}),
    )
    .await;
    create(&c, "/apis/batch/v1/namespaces/default/jobs", json!({"metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}})).await;
    create(
        &c,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        json!({"metadata": {"name": "leader"},
        "spec": {"holderIdentity": "pod-a"}}),
    )
    .await;

    let (_, t) = get_table(&c, &format!("{ns}/deployments")).await;
    assert_eq!(
        headers(&t),
        ["Name", "Ready", "Up-to-date", "Available", "Age"]
    );
    let cells = row(&t, "web");
    assert_eq!(cells[1..4], [json!("0/3"), json!(0), json!(0)]);
    assert_eq!(
        cells[5..8],
        [json!("app"), json!("nginx:1"), json!("app=w")]
    );

    let (_, t) = get_table(&c, "/apis/batch/v1/namespaces/default/jobs").await;
    assert_eq!(
        headers(&t),
        ["Name", "Status", "Completions", "Duration", "Age"]
    );
    assert_eq!(row(&t, "pi")[1..3], [json!("Running"), json!("0/1")]);

    let (_, t) = get_table(&c, "/apis/coordination.k8s.io/v1/namespaces/default/leases").await;
    assert_eq!(headers(&t), ["Name", "Holder", "Age"]);
    assert_eq!(row(&t, "leader")[1], "pod-a");
}

#[tokio::test]
async fn watches_stream_table_rows() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    let req = http::Request::get("/api/v1/namespaces/default/configmaps?watch=true")
        .header(http::header::ACCEPT, TABLE)
        .body(Vec::new())
        .unwrap()
        .map(kube_client::client::Body::from);
    let resp = c.send(req).await.unwrap();
    let mut body = http_body_util::BodyStream::new(resp.into_body());
    create(
        &c,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "w"}, "data": {"k": "v"}}),
    )
    .await;
    let mut buf = Vec::new();
    while !buf.contains(&b'\n') {
        let frame = tokio::time::timeout(crate::WAIT, body.next())
            .await
            .expect("a watch event")
            .expect("stream open")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
        }
    }
    let line = buf.split(|b| *b == b'\n').next().unwrap();
    let ev: Value = serde_json::from_slice(line).unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "Table");
    assert_eq!(headers(&ev["object"]), ["Name", "Data", "Age"]);
    assert_eq!(row(&ev["object"], "w")[1], 1);
}

#[tokio::test]
async fn custom_resources_keep_their_printer_columns() {
    let env = TestEnv::start().await.unwrap();
    let c = env.client();
    create(&c, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json!({
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Weight", "type": "number", "format": "float", "priority": 1,
                        "description": "Grams of brass.", "jsonPath": ".spec.weight"}],
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})).await;
    create(&c, "/apis/example.com/v1/namespaces/default/gizmos",
        json!({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "cog"}, "spec": {"size": 7, "weight": 2.5}})).await;
    let (_, t) = get_table(&c, "/apis/example.com/v1/namespaces/default/gizmos").await;
    // Weight has priority 1: kubectl shows it only with -o wide.
    assert_eq!(headers(&t), ["Name", "Size"]);
    assert_eq!(columns(&t).last().unwrap(), &("Weight".to_string(), 1));
    assert_eq!(row(&t, "cog")[1], 7.0);
    assert_eq!(row(&t, "cog")[2], 2.5);
    // Declared priority, format and description travel with the column, as on a
    // cluster (kubectl shows priority > 0 only with -o wide).
    assert_eq!(
        t["columnDefinitions"][2],
        json!({"name": "Weight", "type": "number", "format": "float",
            "description": "Grams of brass.", "priority": 1})
    );
    assert_eq!(t["columnDefinitions"][1]["priority"], 0);
    let (_, t) = get_table(
        &c,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    )
    .await;
    assert_eq!(headers(&t), ["Name", "Created At"]);
    assert!(
        row(&t, "gizmos.example.com")[1]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
}
