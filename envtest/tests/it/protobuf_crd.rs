//! CustomResourceDefinitions, a built-in kind, in protobuf as client-go's
//! apiextensions clientset can send and ask for them: created from a
//! protobuf body with a rich schema, read back, listed and watched in
//! protobuf equal to the JSON answers, and the kind they define is served
//! with the schema they carried (its defaults applied).

use crate::WAIT;
use crate::protobuf::{PREFER_PB, get_json, next_frame, send};
use envtest::TestEnv;
use envtest::codec::{PROTOBUF, from_protobuf, to_protobuf};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// The typed reading of a JSON object (protobuf answers print numbers from
/// k8s-openapi's types, e.g. `minimum: 0.0` where the stored JSON has `0`).
fn typed(v: &Value) -> CustomResourceDefinition {
    serde_json::from_value(v.clone()).expect("a CustomResourceDefinition")
}

fn gadget_schema() -> Value {
    let spec = json!({"type": "object", "required": ["size"],
    "x-kubernetes-validations": [{"rule": "self.size <= 100", "message": "too big",
        "reason": "FieldValueInvalid", "fieldPath": ".size"}],
    "properties": {
        "size": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 1000.5,
                 "description": "how big"},
        "color": {"type": "string", "enum": ["red", "blue"], "default": "red", "example": "blue"},
        "ratio": {"type": "number", "default": 0.25, "nullable": true},
        "port": {"x-kubernetes-int-or-string": true, "default": 8080},
        "tags": {"type": "object", "additionalProperties": {"type": "string"},
                 "default": {"team": "a"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"],
                            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }});
    json!({"type": "object", "description": "A gadget.",
        "properties": {"spec": spec,
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}})
}

fn gadget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com", "labels": {"via": "protobuf"}},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                      "listKind": "GadgetList", "shortNames": ["gd"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer",
                    "jsonPath": ".spec.size", "priority": 1, "description": "how big"}],
                "selectableFields": [{"jsonPath": ".spec.color"}],
                "schema": {"openAPIV3Schema": gadget_schema()}}]}})
}

#[tokio::test]
async fn crds_create_get_list_and_watch_in_protobuf() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();

    // A watch in protobuf, opened before the CRD exists.
    let req = http::Request::builder()
        .uri(format!("{CRDS}?watch=true"))
        .header(http::header::ACCEPT, PREFER_PB)
        .body(kube_client::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(
        resp.headers()[http::header::CONTENT_TYPE],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let mut watch = resp.into_body();
    let mut buf = Vec::new();

    let sent = gadget_crd();
    let (code, ct, created) = send(
        &client,
        "POST",
        CRDS,
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&sent).unwrap(),
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&created));
    assert_eq!(ct, PROTOBUF, "a CRD is answered in protobuf");
    let created = typed(&from_protobuf(&created).unwrap());
    // Everything sent is kept: the schema reads back as sent.
    assert_eq!(created.spec, typed(&sent).spec);

    let ev = next_frame(&mut watch, &mut buf).await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(typed(&ev["object"]), created);

    // Established, and the kind is served with the schema it carried.
    let path = format!("{CRDS}/gadgets.example.com");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let crd = get_json(&client, &path).await;
        let established = crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if established {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never established: {crd}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"size": 3}});
    let (code, _, body) = send(
        &client,
        "POST",
        "/apis/example.com/v1/namespaces/default/gadgets",
        Some("application/json"),
        "application/json",
        gadget.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let g: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (
            &g["spec"]["color"],
            &g["spec"]["ratio"],
            &g["spec"]["port"],
            &g["spec"]["tags"]
        ),
        (
            &json!("red"),
            &json!(0.25),
            &json!(8080),
            &json!({"team": "a"})
        ),
        "the defaults of the schema sent in protobuf"
    );
    let too_big = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "big"}, "spec": {"size": 500}});
    let (code, _, _) = send(
        &client,
        "POST",
        "/apis/example.com/v1/namespaces/default/gadgets",
        Some("application/json"),
        "application/json",
        too_big.to_string().into_bytes(),
    )
    .await;
    assert_eq!(
        code, 422,
        "the x-kubernetes-validations rule sent in protobuf"
    );

    // GET and LIST in protobuf equal the JSON answers.
    let json = get_json(&client, &path).await;
    let (code, ct, got) = send(&client, "GET", &path, None, PREFER_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    assert_eq!(typed(&from_protobuf(&got).unwrap()), typed(&json));
    let (code, ct, list) = send(&client, "GET", CRDS, None, PREFER_PB, vec![]).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let list = from_protobuf(&list).unwrap();
    let json_list = get_json(&client, CRDS).await;
    assert_eq!(list["kind"], "CustomResourceDefinitionList");
    assert_eq!(
        list["metadata"]["resourceVersion"],
        json_list["metadata"]["resourceVersion"]
    );
    let items = |l: &Value| -> Vec<CustomResourceDefinition> {
        l["items"].as_array().unwrap().iter().map(typed).collect()
    };
    assert_eq!(items(&list), items(&json_list));

    // An update in protobuf (a new printer column), seen by the watch.
    let mut update = from_protobuf(&got).unwrap();
    update["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array_mut()
        .expect("the printer columns")
        .push(json!({"name": "Color", "type": "string", "jsonPath": ".spec.color"}));
    let (code, ct, updated) = send(
        &client,
        "PUT",
        &path,
        Some(PROTOBUF),
        PREFER_PB,
        to_protobuf(&update).unwrap(),
    )
    .await;
    assert_eq!(
        (code, ct.as_str()),
        (200, PROTOBUF),
        "{}",
        String::from_utf8_lossy(&updated)
    );
    let json = get_json(&client, &path).await;
    assert_eq!(
        json["spec"]["versions"][0]["additionalPrinterColumns"][1]["name"],
        "Color"
    );
    // The watch sees every later change of the CRD (status, then the update).
    loop {
        let ev = next_frame(&mut watch, &mut buf).await;
        assert_eq!(ev["type"], "MODIFIED");
        if ev["object"]["metadata"]["resourceVersion"] == json["metadata"]["resourceVersion"] {
            assert_eq!(typed(&ev["object"]), typed(&json));
            break;
        }
    }
}
