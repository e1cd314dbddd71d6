//! Property: random objects of built-in kinds, built from their k8s-openapi
//! types, are accepted and come back with every field they were sent (the
//! server may add defaults, never change or drop what was sent); the same
//! object with one field's JSON type changed is refused with 400 naming
//! that field's path.

// A Deployment's `spec` is an `Option` up to Kubernetes 1.36 and not from
// 1.37: `.into()` writes it under every offered version.
#![allow(clippy::useless_conversion)]

use envtest::TestEnv;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, EnvVar, PodSpec, PodTemplateSpec, Secret, Service,
    ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

type Labels = BTreeMap<String, String>;

fn labels() -> impl Strategy<Value = Labels> {
    prop::collection::btree_map("[a-z]{1,6}(\\.io/[a-z]{1,4})?", "[a-z0-9]{0,5}", 0..3)
}

fn meta(labels: Labels) -> ObjectMeta {
    ObjectMeta {
        labels: (!labels.is_empty()).then_some(labels),
        ..ObjectMeta::default()
    }
}

fn container() -> impl Strategy<Value = Container> {
    (
        "[a-z]{1,8}",
        "[a-z]{1,8}(:[0-9]{1,2})?",
        prop::collection::vec(1..65535i32, 0..3),
        prop::collection::btree_map("[A-Z]{1,6}", "[a-z ]{0,6}", 0..3),
        any::<bool>(),
    )
        .prop_map(|(name, image, ports, env, tty)| Container {
            name,
            image: Some(image),
            tty: Some(tty),
            ports: (!ports.is_empty()).then(|| {
                ports
                    .into_iter()
                    .map(|p| ContainerPort {
                        container_port: p,
                        ..ContainerPort::default()
                    })
                    .collect()
            }),
            env: (!env.is_empty()).then(|| {
                env.into_iter()
                    .map(|(name, value)| EnvVar {
                        name,
                        value: Some(value),
                        ..EnvVar::default()
                    })
                    .collect()
            }),
            ..Container::default()
        })
}

/// (collection path, object JSON) for one random built-in object.
fn object() -> impl Strategy<Value = (&'static str, Value)> {
    prop_oneof![
        (
            labels(),
            prop::collection::btree_map("[a-z]{1,8}", "[ -~]{0,10}", 0..4)
        )
            .prop_map(move |(l, data)| {
                let c = ConfigMap {
                    metadata: meta(l),
                    data: Some(data),
                    immutable: Some(false),
                    ..ConfigMap::default()
                };
                ("configmaps", serde_json::to_value(c).unwrap())
            }),
        (
            labels(),
            prop::collection::btree_map(
                "[a-z]{1,8}",
                prop::collection::vec(any::<u8>(), 0..12),
                1..3
            )
        )
            .prop_map(|(l, data)| {
                let s = Secret {
                    metadata: meta(l),
                    data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
                    type_: Some("Opaque".into()),
                    ..Secret::default()
                };
                ("secrets", serde_json::to_value(s).unwrap())
            }),
        (labels(), 0..20i32, prop::collection::vec(container(), 1..3)).prop_map(
            |(l, replicas, containers)| {
                let sel = BTreeMap::from([("app".to_string(), "x".to_string())]);
                let d = Deployment {
                    metadata: meta(l),
                    spec: DeploymentSpec {
                        replicas: Some(replicas),
                        selector: LabelSelector {
                            match_labels: Some(sel.clone()),
                            ..LabelSelector::default()
                        },
                        template: PodTemplateSpec {
                            metadata: Some(meta(sel)),
                            spec: Some(PodSpec {
                                containers: unique_names(containers),
                                ..PodSpec::default()
                            }),
                        },
                        ..DeploymentSpec::default()
                    }
                    .into(),
                    ..Deployment::default()
                };
                ("deployments", serde_json::to_value(d).unwrap())
            }
        ),
        (labels(), prop::collection::btree_set(1..65535i32, 1..3)).prop_map(|(l, ports)| {
            let s = Service {
                metadata: meta(l.clone()),
                spec: Some(ServiceSpec {
                    selector: (!l.is_empty()).then_some(l),
                    ports: Some(
                        ports
                            .into_iter()
                            .map(|p| ServicePort {
                                name: Some(format!("p{p}")),
                                port: p,
                                protocol: Some("TCP".into()),
                                ..ServicePort::default()
                            })
                            .collect(),
                    ),
                    ..ServiceSpec::default()
                }),
                ..Service::default()
            };
            ("services", serde_json::to_value(s).unwrap())
        }),
        (labels(), "[a-z]{1,10}", 1..3600i32).prop_map(|(l, holder, secs)| {
            let lease = Lease {
                metadata: meta(l),
                spec: Some(LeaseSpec {
                    holder_identity: Some(holder),
                    lease_duration_seconds: Some(secs),
                    ..LeaseSpec::default()
                }),
            };
            ("leases", serde_json::to_value(lease).unwrap())
        }),
    ]
    .prop_map(|(plural, v)| {
        let path = match plural {
            "deployments" => "/apis/apps/v1/namespaces/default/deployments",
            "leases" => "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            "configmaps" => "/api/v1/namespaces/default/configmaps",
            "secrets" => "/api/v1/namespaces/default/secrets",
            _ => "/api/v1/namespaces/default/services",
        };
        (path, v)
    })
}

fn unique_names(mut cs: Vec<Container>) -> Vec<Container> {
    for (i, c) in cs.iter_mut().enumerate() {
        c.name = format!("{}{i}", c.name);
    }
    cs
}

/// Every scalar leaf of `v`: (path as the API server prints it, JSON pointer).
fn leaves(v: &Value, path: &str, ptr: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let escaped = k.replace('~', "~0").replace('/', "~1");
                leaves(c, &p, &format!("{ptr}/{escaped}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                leaves(c, &format!("{path}[{i}]"), &format!("{ptr}/{i}"), out);
            }
        }
        _ => out.push((path.to_string(), ptr.to_string())),
    }
}

/// Whether every field of `sent` is in `got` with the same value.
fn contains(got: &Value, sent: &Value) -> bool {
    match (got, sent) {
        (Value::Object(g), Value::Object(s)) => s
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| contains(gv, v))),
        (Value::Array(g), Value::Array(s)) => {
            g.len() == s.len() && g.iter().zip(s).all(|(a, b)| contains(a, b))
        }
        _ => got == sent,
    }
}

async fn one_case(
    client: &kube_client::Client,
    n: usize,
    path: &str,
    mut obj: Value,
    pick: Index,
) -> Result<(), TestCaseError> {
    obj["metadata"]["name"] = json!(format!("o{n}"));
    let body = serde_json::to_vec(&obj).unwrap();
    let (code, got) = crate::raw(client, "POST", path, Some("application/json"), body).await;
    prop_assert_eq!(code, 201, "{} refused: {}", obj, got);
    // What was sent, in the form Go's JSON writes it (zero values of
    // omitempty fields dropped), is in the answer.
    let mut sent = obj.clone();
    informer_codec::facts::normalize_json(&mut sent);
    prop_assert!(contains(&got, &sent), "sent {} got back {}", obj, got);

    let mut all = Vec::new();
    leaves(&obj, "", "", &mut all);
    all.retain(|(p, _)| !matches!(p.as_str(), "apiVersion" | "kind" | "metadata.name"));
    if all.is_empty() {
        return Ok(());
    }
    let (field, pointer) = pick.get(&all).clone();
    let mut bad = obj.clone();
    bad["metadata"]["name"] = json!(format!("bad{n}"));
    let slot = bad.pointer_mut(&pointer).unwrap();
    *slot = match slot {
        Value::String(_) => json!(7),
        _ => json!("x"),
    };
    let body = serde_json::to_vec(&bad).unwrap();
    let (code, st) = crate::raw(client, "POST", path, Some("application/json"), body).await;
    prop_assert_eq!(
        code,
        400,
        "{} with {} mistyped was not refused: {}",
        bad,
        field,
        st
    );
    let msg = st["message"].as_str().unwrap_or("");
    prop_assert!(
        msg.contains(&format!("{field}: invalid type")),
        "{}: {}",
        field,
        msg
    );
    Ok(())
}

#[test]
fn builtin_objects_round_trip_and_mistyped_fields_are_refused() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(TestEnv::start()).unwrap();
    let client = env.client();
    let counter = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(object(), any::<Index>()), |((path, obj), pick)| {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            rt.block_on(one_case(&client, n, path, obj, pick))
        })
        .unwrap();
}
