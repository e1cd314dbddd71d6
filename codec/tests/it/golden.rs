//! Golden fixtures written by Kubernetes' own Go marshallers (see
//! `tests/golden/README.md`: `gen/main.go` built against k8s.io/api and
//! k8s.io/apimachinery v0.35.7, the serializers kube-apiserver encodes
//! with). Every object is there twice, as protobuf (`<name>.pb`) and as
//! JSON (`<name>.json`); reading either must give the same value:
//!
//! - the typed decoder informers use ([`Decoder`]) on the protobuf equals
//!   serde's reading of the JSON into the k8s-openapi type;
//! - the JSON-value path ([`informer_codec::from_protobuf`]) equals the Go
//!   JSON, where a Go `null` counts as absent (Go's decoder and serde both
//!   read it so).
//!
//! The fixtures are not made by this crate's encoder, so these tests see
//! the zero values Go writes (empty strings, zero times, `0` and `false`
//! of non-pointer fields) that our own encoder never produces.

// A fixture that does not read is a failed test.
#![allow(clippy::unwrap_used)]

use informer_codec::{DecodeOptions, Decoder, Envelope};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event as EventsEvent;
use k8s_openapi::api::rbac::v1::ClusterRole;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;
use std::path::PathBuf;

fn fixture(file: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Go's `null` reads as absent: drop it from objects (recursively).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// Every path where two JSON values differ, for a readable failure.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                differences(&format!("{path}.{k}"), va, vb, out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), va, vb, out);
            }
        }
        _ if a != b => out.push(format!("{path}: protobuf {a} / json {b}")),
        _ => {}
    }
}

fn assert_same(name: &str, what: &str, from_pb: &Value, from_json: &Value) {
    let mut diff = Vec::new();
    differences("", from_pb, from_json, &mut diff);
    assert!(
        diff.is_empty(),
        "{name}: {what}: {} differences:\n{}",
        diff.len(),
        diff.join("\n")
    );
}

/// The typed decoder on `<name>.pb` and serde on `<name>.json` agree, and
/// so do the JSON-value path and the Go JSON.
fn check<K>(name: &str)
where
    K: DeserializeOwned + Serialize + PartialEq + Debug + 'static,
{
    let pb = fixture(&format!("{name}.pb"));
    let json = fixture(&format!("{name}.json"));

    let envelope = Envelope::read(&pb).unwrap();
    let decoder = Decoder::<K>::new().unwrap();
    assert_eq!(
        (envelope.api_version.as_str(), envelope.kind.as_str()),
        (decoder.api_version(), decoder.kind()),
        "{name}: envelope names another kind"
    );
    let typed = decoder
        .decode(&envelope.raw, DecodeOptions::default())
        .unwrap();
    let expected: K = serde_json::from_slice(&json).unwrap();
    if typed != expected {
        assert_same(
            name,
            "typed decoder",
            &serde_json::to_value(&typed).unwrap(),
            &serde_json::to_value(&expected).unwrap(),
        );
        // Equal JSON forms but unequal values: still a failure.
        assert_eq!(typed, expected, "{name}: typed decoder");
    }

    let go_json: Value = serde_json::from_slice(&json).unwrap();
    let value = informer_codec::from_protobuf(&pb).unwrap();
    assert_same(name, "from_protobuf", &value, &without_nulls(go_json));
}

#[test]
fn pod_pending() {
    check::<Pod>("pod-pending");
}

#[test]
fn pod_running() {
    check::<Pod>("pod-running");
}

#[test]
fn deployment_with_template() {
    check::<Deployment>("deployment");
}

#[test]
fn deployment_scaled_to_zero() {
    check::<Deployment>("deployment-zero-replicas");
}

#[test]
fn statefulset() {
    check::<StatefulSet>("statefulset");
}

#[test]
fn job() {
    check::<Job>("job");
}

#[test]
fn service() {
    check::<Service>("service");
}

#[test]
fn service_headless_without_ports() {
    check::<Service>("service-headless");
}

#[test]
fn node() {
    check::<Node>("node");
}

#[test]
fn core_event_with_zero_event_time() {
    check::<Event>("event-core");
}

#[test]
fn events_event_with_event_time() {
    check::<EventsEvent>("event-events");
}

#[test]
fn configmap() {
    check::<ConfigMap>("configmap");
}

#[test]
fn configmap_empty() {
    check::<ConfigMap>("configmap-empty");
}

#[test]
fn secret() {
    check::<Secret>("secret");
}

#[test]
fn lease() {
    check::<Lease>("lease");
}

#[test]
fn namespace() {
    check::<Namespace>("namespace");
}

#[test]
fn clusterrole() {
    check::<ClusterRole>("clusterrole");
}

/// The fixtures are Go's bytes, not ours: the pending Pod's protobuf
/// carries `spec.nodeName` as an empty string (field 10 of PodSpec, present
/// with length 0), which a decoder must read as absent.
#[test]
fn fixtures_carry_go_zero_values() {
    use prost::Message;
    let envelope = Envelope::read(&fixture("pod-pending.pb")).unwrap();
    let pod = k8s_pb::api::core::v1::Pod::decode(envelope.raw.as_slice()).unwrap();
    let spec = pod.spec.unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(""));
    let status = pod.status.unwrap();
    assert_eq!(status.pod_ip.as_deref(), Some(""));
    // A zero metav1.Time is written as an empty message.
    let condition = &status.conditions[0];
    assert!(condition.last_probe_time.is_some());
}
