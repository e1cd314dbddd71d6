//! k8s-openapi types in a derived spec and validation rules on the fields of
//! nested types (`Pool`, see `types`), over real HTTP:
//! - `IntOrString` and `Quantity` (alone, optional, as map values) become
//!   `x-kubernetes-int-or-string: true` with no `anyOf`/`oneOf`, and envtest
//!   takes an integer or a string there;
//! - schemars' `length`, `pattern`, `range` and `extend(...)` on the fields
//!   (and the container) of nested types survive the structural rewrite and
//!   are enforced at their nested field paths;
//! - random `Pool` specs round-trip through envtest unchanged.

use ::envtest::TestEnv;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, PostParams};
use kube_client::core::{ApiResource, GroupVersionKind};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::envtest::install;
use crate::props::round_trip;
use crate::types::{Autoscale, Pool, PoolSpec, Worker, WorkerPort};

/// The `spec` schema of `Pool`'s CRD.
fn spec_schema() -> Value {
    let crd = serde_json::to_value(Pool::crd().unwrap()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
}

/// Every JSON path in `v` where a key in `keys` occurs.
fn find_keys(v: &Value, keys: &[&str], path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                if keys.contains(&k.as_str()) {
                    out.push(format!("{path}.{k}"));
                }
                find_keys(child, keys, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                find_keys(child, keys, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn int_or_string_and_quantity_are_int_or_string_without_unions() {
    let spec = spec_schema();
    let props = &spec["properties"];
    for (field, node) in [
        ("maxUnavailable", &props["maxUnavailable"]),
        ("maxSurge", &props["maxSurge"]),
        ("memory", &props["memory"]),
        ("limits.*", &props["limits"]["additionalProperties"]),
    ] {
        assert_eq!(
            node["x-kubernetes-int-or-string"],
            json!(true),
            "{field}: {node}"
        );
        assert!(node.get("type").is_none(), "{field} has a type: {node}");
    }
    assert_eq!(props["limits"]["type"], json!("object"));
    let mut unions = Vec::new();
    find_keys(&spec, &["anyOf", "oneOf", "allOf", "$ref"], "", &mut unions);
    assert!(unions.is_empty(), "unions left in the schema: {unions:?}");
}

#[test]
fn schemars_rules_on_nested_fields_survive_the_rewrite() {
    let spec = spec_schema();
    let worker = &spec["properties"]["worker"]["properties"];
    assert_eq!(worker["image"]["minLength"], json!(1));
    assert_eq!(worker["image"]["maxLength"], json!(63));
    assert_eq!(worker["image"]["pattern"], json!(r"^[a-z0-9./:-]+$"));
    assert_eq!(worker["ports"]["maxItems"], json!(4));
    assert_eq!(worker["ports"]["x-kubernetes-list-type"], json!("map"));
    assert_eq!(
        worker["ports"]["x-kubernetes-list-map-keys"],
        json!(["name"])
    );
    // JSONSchemaProps holds bounds as f64, so the CRD says 65535.0.
    assert_eq!(
        worker["ports"]["items"]["properties"]["port"]["maximum"].as_f64(),
        Some(65535.0)
    );
    assert_eq!(
        worker["workDir"]["x-kubernetes-validations"][0]["rule"],
        json!("self.startsWith('/')")
    );
    let autoscale = &spec["properties"]["autoscale"];
    assert_eq!(autoscale["nullable"], json!(true));
    assert_eq!(
        autoscale["x-kubernetes-validations"][0]["rule"],
        json!("self.minReplicas <= self.maxReplicas")
    );
    assert_eq!(
        autoscale["properties"]["minReplicas"]["minimum"].as_f64(),
        Some(1.0)
    );
}

fn pools(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Pool");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "pools");
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn pool(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Pool",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

/// A valid spec, as JSON, to break one field of.
fn valid() -> Value {
    json!({
        "maxUnavailable": 1,
        "memory": "512Mi",
        "worker": {"image": "registry.example/app:1", "workDir": "/srv",
                   "ports": [{"name": "http", "port": 8080}]},
    })
}

/// The causes of a refused create: (field, reason, message).
async fn refused(api: &Api<DynamicObject>, spec: Value) -> Vec<(String, String, String)> {
    match api.create(&PostParams::default(), &pool("p", spec)).await {
        Err(kube_client::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            s.details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.field, c.reason, c.message))
                .collect()
        }
        other => panic!("expected a 422, got {other:?}"),
    }
}

fn has(causes: &[(String, String, String)], field: &str, reason: &str) -> bool {
    causes.iter().any(|(f, r, _)| f == field && r == reason)
}

async fn started() -> (TestEnv, Client) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, &Pool::crd().unwrap()).await;
    (env, client)
}

#[tokio::test]
async fn int_or_string_fields_take_an_integer_or_a_string() {
    let (_env, client) = started().await;
    let api = pools(&client);
    let mut n = 0;
    for (field, value) in [
        ("maxUnavailable", json!(2)),
        ("maxUnavailable", json!("25%")),
        ("maxSurge", json!(1)),
        ("maxSurge", json!("10%")),
        ("memory", json!(1024)),
        ("memory", json!("1Gi")),
    ] {
        let mut spec = valid();
        spec[field] = value.clone();
        n += 1;
        let created = api
            .create(&PostParams::default(), &pool(&format!("p{n}"), spec))
            .await
            .unwrap_or_else(|e| panic!("{field} = {value}: {e}"));
        assert_eq!(created.data["spec"][field], value);
    }
    let mut spec = valid();
    spec["limits"] = json!({"cpu": 2, "ephemeral-storage": "1Gi"});
    let created = api
        .create(&PostParams::default(), &pool("limits", spec))
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"]["limits"],
        json!({"cpu": 2, "ephemeral-storage": "1Gi"})
    );

    // Neither an integer nor a string: refused at the field, as a cluster does.
    let mut spec = valid();
    spec["maxUnavailable"] = json!(true);
    let causes = refused(&api, spec).await;
    assert!(
        has(&causes, "spec.maxUnavailable", "FieldValueTypeInvalid"),
        "{causes:?}"
    );
}

#[tokio::test]
async fn rules_on_nested_fields_are_enforced_at_their_paths() {
    let (_env, client) = started().await;
    let api = pools(&client);
    let with = |pointer: &str, value: Value| {
        let mut spec = valid();
        *spec.pointer_mut(pointer).unwrap() = value;
        spec
    };

    let got = refused(&api, with("/worker/image", json!("a".repeat(64)))).await;
    assert!(
        has(&got, "spec.worker.image", "FieldValueTooLong"),
        "{got:?}"
    );
    let got = refused(&api, with("/worker/image", json!("Upper/Case"))).await;
    assert!(
        has(&got, "spec.worker.image", "FieldValueInvalid"),
        "{got:?}"
    );
    let got = refused(&api, with("/worker/ports/0/port", json!(70000))).await;
    assert!(
        has(&got, "spec.worker.ports[0].port", "FieldValueInvalid"),
        "{got:?}"
    );
    let got = refused(
        &api,
        with(
            "/worker/ports",
            json!([{"name": "a", "port": 1}, {"name": "a", "port": 2}]),
        ),
    )
    .await;
    assert!(
        got.iter()
            .any(|(f, r, _)| f.starts_with("spec.worker.ports") && r == "FieldValueDuplicate"),
        "{got:?}"
    );
    let got = refused(&api, with("/worker/workDir", json!("srv"))).await;
    assert!(
        got.iter()
            .any(|(f, _, m)| f == "spec.worker.workDir" && m.contains("workDir must be absolute")),
        "{got:?}"
    );
    let mut spec = valid();
    spec["autoscale"] = json!({"minReplicas": 5, "maxReplicas": 2});
    let got = refused(&api, spec).await;
    assert!(
        got.iter().any(|(f, r, m)| f == "spec.autoscale"
            && r == "FieldValueInvalid"
            && m.contains("minReplicas must not exceed maxReplicas")),
        "{got:?}"
    );

    // The same nested values within their rules are stored.
    let mut spec = valid();
    spec["autoscale"] = json!({"minReplicas": 2, "maxReplicas": 5});
    api.create(&PostParams::default(), &pool("ok", spec))
        .await
        .unwrap();
}

fn int_or_string() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        any::<i32>().prop_map(IntOrString::Int),
        "[0-9]{1,2}%".prop_map(IntOrString::String),
    ]
}

fn quantity() -> impl Strategy<Value = Quantity> {
    "[1-9][0-9]{0,3}(m|k|Ki|Mi|Gi)?".prop_map(Quantity)
}

fn spec() -> impl Strategy<Value = PoolSpec> {
    let ports = prop::collection::btree_map("[a-z]{1,6}", 1..=65535i32, 0..=4).prop_map(|m| {
        m.into_iter()
            .map(|(name, port)| WorkerPort { name, port })
            .collect::<Vec<_>>()
    });
    let worker =
        ("[a-z0-9./:-]{1,63}", ports, "/[a-z/]{0,10}").prop_map(|(image, ports, work_dir)| {
            Worker {
                image,
                ports,
                work_dir,
            }
        });
    let autoscale = (1u32..=100, 1u32..=100).prop_map(|(a, b)| Autoscale {
        min_replicas: a.min(b),
        max_replicas: a.max(b),
    });
    (
        int_or_string(),
        prop::option::of(int_or_string()),
        quantity(),
        prop::collection::btree_map("[a-z]{1,8}", quantity(), 0..3),
        worker,
        prop::option::of(autoscale),
    )
        .prop_map(
            |(max_unavailable, max_surge, memory, limits, worker, autoscale)| PoolSpec {
                max_unavailable,
                max_surge,
                memory,
                limits,
                worker,
                autoscale,
            },
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_pool_specs_round_trip_through_envtest_unchanged() {
    let (_env, client) = started().await;
    let api: Api<Pool> = Api::namespaced(client, "default");
    round_trip(&api, "p", spec(), Pool::new, |p| &p.spec);
}
