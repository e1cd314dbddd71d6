use super::*;
use crate::bridge::Conv;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, Pod, PodSpec, ResourceRequirements, Secret, Service,
    ServicePort, ServiceSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, LabelSelector, ManagedFieldsEntry, MicroTime, ObjectMeta, Time,
};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;

fn round_trip<O, P>(o: &O) -> O
where
    O: Conv<P>,
    P: prost::Message + Default,
{
    let bytes = o.to_pb().encode_to_vec();
    let p = P::decode(bytes.as_slice()).expect("decodes");
    O::from_pb(p).expect("converts back")
}

/// What a JSON client reads of `k` from a Kubernetes API server: its JSON
/// in the form Go's `encoding/json` writes it (see `facts::normalize_json`).
fn go_form<K>(k: &K) -> K
where
    K: k8s_openapi::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut v = serde_json::to_value(k).expect("serializes");
    assert!(
        crate::facts::normalize_json(&mut v),
        "{} has Go facts",
        K::KIND
    );
    serde_json::from_value(v).expect("deserializes")
}

/// The JSON of [`go_form`].
fn go_json<K>(k: &K) -> serde_json::Value
where
    K: k8s_openapi::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    serde_json::to_value(go_form(k)).expect("serializes")
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,12}"
}

/// A map that is absent or holds something (protobuf has no empty-but-set map).
fn labels() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    option::of(btree_map(name(), "[ -~]{0,8}", 1..4))
}

fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(Timestamp::from_second(s).expect("in range")))
}

fn int_or_string() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        any::<i32>().prop_map(IntOrString::Int),
        "[0-9]{1,2}%|[a-z]{1,6}".prop_map(IntOrString::String),
    ]
}

fn quantity() -> impl Strategy<Value = Quantity> {
    "[1-9][0-9]{0,3}(m|Mi|Gi|k)?".prop_map(Quantity)
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (
        name(),
        labels(),
        labels(),
        option::of(time()),
        option::of(1i64..100),
        any::<bool>(),
    )
        .prop_map(
            |(name, labels, annotations, created, generation, managed)| ObjectMeta {
                name: Some(name),
                namespace: Some("default".into()),
                labels,
                annotations,
                creation_timestamp: created.clone(),
                generation,
                managed_fields: managed.then(|| {
                    vec![ManagedFieldsEntry {
                        manager: Some("kubectl".into()),
                        operation: Some("Update".into()),
                        fields_type: Some("FieldsV1".into()),
                        fields_v1: Some(FieldsV1(json!({"f:data": {"f:a": {}}}))),
                        time: created.clone(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
        )
}

fn container() -> impl Strategy<Value = Container> {
    (
        name(),
        option::of(btree_map("cpu|memory", quantity(), 1..3)),
        vec(1i32..65535, 0..3),
    )
        .prop_map(|(name, limits, ports)| Container {
            name,
            image: Some("nginx".into()),
            resources: limits.map(|l| ResourceRequirements {
                limits: Some(l),
                ..Default::default()
            }),
            ports: (!ports.is_empty()).then(|| {
                ports
                    .into_iter()
                    .map(|p| ContainerPort {
                        container_port: p,
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (vec(container(), 1..3), option::of(name())).prop_map(|(containers, cm)| PodSpec {
        containers,
        volumes: cm.map(|cm| {
            vec![Volume {
                name: "cfg".into(),
                config_map: Some(k8s_openapi::api::core::v1::ConfigMapVolumeSource {
                    name: cm,
                    ..Default::default()
                }),
                ..Default::default()
            }]
        }),
        ..Default::default()
    })
}

proptest! {
    #[test]
    fn config_maps_and_secrets_round_trip(
        meta in meta(),
        data in labels(),
        bytes in option::of(btree_map(name(), vec(any::<u8>(), 0..16), 1..3)),
        immutable in option::of(any::<bool>()),
    ) {
        let binary = bytes.map(|m| m.into_iter().map(|(k, v)| (k, ByteString(v))).collect::<BTreeMap<_, _>>());
        let cm = ConfigMap { metadata: meta.clone(), data: data.clone(), binary_data: binary.clone(), immutable };
        prop_assert_eq!(round_trip(&cm), cm.clone());
        let s = Secret { metadata: meta, data: binary, string_data: data, type_: Some("Opaque".into()), immutable };
        prop_assert_eq!(round_trip(&s), s.clone());
        // And through the JSON the server stores.
        let v = serde_json::to_value(&cm).unwrap();
        prop_assert_eq!(from_protobuf(&to_protobuf(&v).unwrap()).unwrap(), v);
    }

    #[test]
    fn services_pods_and_deployments_round_trip(
        meta in meta(),
        target in int_or_string(),
        surge in option::of(int_or_string()),
        replicas in option::of(0i32..10),
        spec in pod_spec(),
    ) {
        let svc = Service {
            metadata: meta.clone(),
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort { port: 80, target_port: Some(target), ..Default::default() }]),
                selector: meta.labels.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        // What the Go marshaller writes for what JSON leaves out (the
        // Service's `status`, a Pod's zero `nodeName`) reads back as JSON
        // clients see it.
        prop_assert_eq!(round_trip(&svc), go_form(&svc));
        let pod = Pod { metadata: meta.clone(), spec: Some(spec.clone()), ..Default::default() };
        prop_assert_eq!(round_trip(&pod), go_form(&pod));
        let spec = DeploymentSpec {
            replicas,
            selector: LabelSelector { match_labels: Some([("app".to_string(), "x".to_string())].into()), ..Default::default() },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment { max_surge: surge, max_unavailable: None }),
            }),
            template: k8s_openapi::api::core::v1::PodTemplateSpec { metadata: None, spec: Some(spec) },
            ..Default::default()
        };
        // (Through JSON: `spec` is required from 1.37 on, optional before.)
        let d: Deployment = serde_json::from_value(json!({"metadata": meta, "spec": spec})).unwrap();
        prop_assert_eq!(round_trip(&d), go_form(&d));
        let v = serde_json::to_value(&d).unwrap();
        if has_protobuf("apps/v1", "Deployment") {
            prop_assert_eq!(from_protobuf(&to_protobuf(&v).unwrap()).unwrap(), go_json(&d));
        } else {
            // Read in JSON under this version (`skew_tests`): no protobuf form.
            prop_assert!(matches!(to_protobuf(&v), Err(CodecError::NotProtobuf(_))));
        }
    }

    #[test]
    fn micro_times_keep_their_microseconds(us in 0i64..4_000_000_000_000_000) {
        let t = MicroTime(Timestamp::from_microsecond(us).unwrap());
        prop_assert_eq!(round_trip(&t), t);
    }
}

#[test]
fn raw_extension_carries_json_and_enveloped_protobuf() {
    let data = json!({"spec": {"replicas": 2}});
    // (Through JSON: `data` and `revision` changed requiredness in 1.37.)
    let rev: ControllerRevision = serde_json::from_value(
        json!({"metadata": {"name": "r1"}, "data": data.clone(), "revision": 3}),
    )
    .unwrap();
    assert_eq!(round_trip(&rev), rev);
    // A protobuf client embeds an object in its envelope: it reads back as JSON.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    let embedded = k8s_pb::apimachinery::pkg::runtime::RawExtension {
        raw: Some(to_protobuf(&cm).unwrap()),
    };
    assert_eq!(RawExtension::from_pb(embedded).unwrap(), RawExtension(cm));
}

#[test]
fn empty_lists_read_back_as_absent_as_on_a_cluster() {
    let cm = ConfigMap {
        data: Some(BTreeMap::new()),
        ..Default::default()
    };
    assert_eq!(round_trip(&cm).data, None);
}

#[test]
fn lists_and_status_encode_with_their_envelope() {
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "7", "continue": "abc"},
        "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}},
                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}]});
    let bytes = to_protobuf(&list).unwrap();
    assert_eq!(from_protobuf(&bytes).unwrap(), list);
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "nope", "reason": "NotFound", "code": 404,
        "details": {"name": "a", "kind": "configmaps"}});
    assert_eq!(
        from_protobuf(&to_protobuf(&status).unwrap()).unwrap(),
        status
    );
}

#[test]
fn malformed_protobuf_is_a_typed_error() {
    assert!(matches!(from_protobuf(b"{}"), Err(CodecError::NoMagic)));
    assert!(matches!(
        from_protobuf(b"k8s\0\x0a\xff"),
        Err(CodecError::Protobuf(_))
    ));
    let crd = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert!(matches!(to_protobuf(&crd), Err(CodecError::NotProtobuf(_))));
    let bad_time = k8s_pb::apimachinery::pkg::apis::meta::v1::Time {
        seconds: Some(i64::MAX),
        nanos: None,
    };
    assert!(Time::from_pb(bad_time).is_err());
}
#[test]
fn metadata_only_kinds_round_trip_in_protobuf() {
    use prost::Message;
    let meta = json!({"name": "a", "namespace": "ns", "resourceVersion": "5",
        "labels": {"app": "web"}, "finalizers": ["x/y"]});
    for av in ["meta.k8s.io/v1", "meta.k8s.io/v1beta1"] {
        let one = json!({"apiVersion": av, "kind": "PartialObjectMetadata", "metadata": meta});
        assert_eq!(from_protobuf(&to_protobuf(&one).unwrap()).unwrap(), one);
        let list = json!({"apiVersion": av, "kind": "PartialObjectMetadataList",
            "metadata": {"resourceVersion": "9", "continue": "t"}, "items": [one]});
        let bytes = to_protobuf(&list).unwrap();
        assert_eq!(from_protobuf(&bytes).unwrap(), list, "{av}");
        // The field numbers are the API server's: v1beta1 has items first.
        let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&bytes[4..]).unwrap();
        let raw = unknown.raw.unwrap();
        let (items, rv) = if av.ends_with("v1") {
            let l = k8s_pb::apimachinery::pkg::apis::meta::v1::PartialObjectMetadataList::decode(
                raw.as_slice(),
            )
            .unwrap();
            (l.items, l.metadata.unwrap().resource_version)
        } else {
            let l =
                k8s_pb::apimachinery::pkg::apis::meta::v1beta1::PartialObjectMetadataList::decode(
                    raw.as_slice(),
                )
                .unwrap();
            (l.items, l.metadata.unwrap().resource_version)
        };
        assert_eq!(rv.as_deref(), Some("9"));
        assert_eq!(
            items[0].metadata.as_ref().unwrap().name.as_deref(),
            Some("a")
        );
    }
}

#[test]
fn every_listed_kind_has_a_codec_and_a_typed_decoder() {
    // One table (`kinds`) makes both; this checks what it made.
    let listed = crate::typed::listed();
    assert!(listed.len() >= 31, "{} kinds", listed.len());
    // (Apart from those whose messages lack fields this version's JSON
    // has: `skew_tests`.)
    for (av, kind, t) in listed {
        if !crate::json_only_fields(av, kind).is_empty() {
            continue;
        }
        assert!(crate::has_protobuf(av, kind), "{av} {kind}: no codec");
        assert!(crate::has_protobuf(av, &format!("{kind}List")));
        assert_eq!(crate::typed::has_typed(t), Some((av, kind)), "{av} {kind}");
    }
    // Kinds never listed have a codec and no typed decoder.
    assert!(crate::has_protobuf("v1", "Status"));
    let status = std::any::TypeId::of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
    assert_eq!(crate::typed::has_typed(status), None);
}

/// A pending Pod as kube-apiserver's Go marshaller lays it out: every
/// non-pointer field written, zero values included, a zero `metav1.Time`
/// as an empty message.
fn go_pending_pod() -> k8s_pb::api::core::v1::Pod {
    use k8s_pb::api::core::v1 as pb;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbm;
    let empty_time = || {
        Some(pbm::Time {
            seconds: None,
            nanos: None,
        })
    };
    pb::Pod {
        metadata: Some(pbm::ObjectMeta {
            name: Some("p".into()),
            namespace: Some("default".into()),
            generate_name: Some(String::new()),
            self_link: Some(String::new()),
            uid: Some("u1".into()),
            resource_version: Some("5".into()),
            generation: Some(0),
            creation_timestamp: Some(pbm::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        spec: Some(pb::PodSpec {
            containers: vec![pb::Container {
                name: Some("c".into()),
                image: Some("nginx".into()),
                working_dir: Some(String::new()),
                stdin: Some(false),
                ..Default::default()
            }],
            restart_policy: Some("Always".into()),
            node_name: Some(String::new()),
            host_network: Some(false),
            service_account_name: Some(String::new()),
            priority: Some(0),
            ..Default::default()
        }),
        status: Some(pb::PodStatus {
            phase: Some("Pending".into()),
            pod_ip: Some(String::new()),
            host_ip: Some(String::new()),
            start_time: None,
            conditions: vec![pb::PodCondition {
                r#type: Some("PodScheduled".into()),
                status: Some("False".into()),
                last_probe_time: empty_time(),
                last_transition_time: Some(pbm::Time {
                    seconds: Some(1_700_000_001),
                    nanos: Some(0),
                }),
                reason: Some("Unschedulable".into()),
                message: Some(String::new()),
                observed_generation: None,
            }],
            ..Default::default()
        }),
    }
}

#[test]
fn go_zero_values_read_as_go_json_reads_them() {
    use prost::Message;
    let bytes = go_pending_pod().encode_to_vec();
    // Through the bridge (under a version whose Pod has JSON-only fields
    // there is no typed decoder, which only adds the parse to this).
    let pod = Pod::from_pb(k8s_pb::api::core::v1::Pod::decode(bytes.as_slice()).unwrap()).unwrap();
    if let Some(d) = Decoder::<Pod>::new() {
        assert_eq!(d.decode(&bytes, DecodeOptions::default()).unwrap(), pod);
    }
    let spec = pod.spec.expect("spec");
    // `nodeName,omitempty` string "": absent, as in JSON.
    assert_eq!(spec.node_name, None);
    assert_eq!(spec.host_network, None);
    assert_eq!(spec.service_account_name, None);
    // A pointer keeps its zero (`priority *int32`).
    assert_eq!(spec.priority, Some(0));
    assert_eq!(spec.containers[0].working_dir, None);
    assert_eq!(spec.containers[0].stdin, None);
    let status = pod.status.expect("status");
    assert_eq!((status.pod_ip, status.host_ip), (None, None));
    let cond = &status.conditions.expect("conditions")[0];
    // A zero time (an empty message) is absent, not 1970.
    assert_eq!(cond.last_probe_time, None);
    assert_eq!(cond.message, None);
    assert!(cond.last_transition_time.is_some());
    let meta = pod.metadata;
    assert_eq!(
        (meta.generate_name, meta.self_link, meta.generation),
        (None, None, None)
    );
    assert_eq!(meta.name.as_deref(), Some("p"));
}

#[test]
fn the_encoder_writes_non_pointer_zero_values_as_go_does() {
    use prost::Message;
    let pending = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    // What envtest serves (through the bridge where Pods are read in JSON
    // under this version, `skew_tests`).
    let raw = match to_protobuf(&pending) {
        Ok(bytes) => Envelope::read(&bytes).unwrap().raw,
        Err(_) => serde_json::from_value::<Pod>(pending.clone())
            .unwrap()
            .to_pb()
            .encode_to_vec(),
    };
    let pb = k8s_pb::api::core::v1::Pod::decode(raw.as_slice()).unwrap();
    let spec = pb.spec.expect("spec written");
    // `NodeName string`: "" on the wire; `Priority *int32`: not written.
    assert_eq!(spec.node_name.as_deref(), Some(""));
    assert_eq!(spec.host_network, Some(false));
    assert_eq!(spec.priority, None);
    // The absent status is Go's zero PodStatus, written.
    let status = pb.status.expect("status written");
    assert_eq!(status.pod_ip.as_deref(), Some(""));
    // A zero `metav1.Time` is an empty message.
    let meta = pb.metadata.expect("metadata");
    let empty = k8s_pb::apimachinery::pkg::apis::meta::v1::Time {
        seconds: None,
        nanos: None,
    };
    assert_eq!(meta.creation_timestamp, Some(empty));
    // Read back, the zeros are absent again, as in JSON.
    let back = Pod::from_pb(k8s_pb::api::core::v1::Pod::decode(raw.as_slice()).unwrap()).unwrap();
    let back = serde_json::to_value(back).unwrap();
    assert!(back["spec"].get("nodeName").is_none());
    assert!(back["metadata"].get("creationTimestamp").is_none());
}

#[test]
fn a_template_metadata_of_zeros_reads_empty() {
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbm;
    let zeros = pbm::ObjectMeta {
        name: Some(String::new()),
        namespace: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(pbm::Time {
            seconds: None,
            nanos: None,
        }),
        ..Default::default()
    };
    assert_eq!(ObjectMeta::from_pb(zeros).unwrap(), ObjectMeta::default());
}

#[test]
fn times_carry_whole_seconds_as_in_go() {
    let t = k8s_pb::apimachinery::pkg::apis::meta::v1::Time {
        seconds: Some(1_700_000_000),
        nanos: Some(5),
    };
    assert_eq!(Time::from_pb(t).unwrap().0.as_second(), 1_700_000_000);
    assert_eq!(
        Time::from_pb(k8s_pb::apimachinery::pkg::apis::meta::v1::Time {
            seconds: Some(1_700_000_000),
            nanos: Some(5)
        })
        .unwrap()
        .0
        .subsec_nanosecond(),
        0
    );
    // The epoch is a time, not Go's zero: written and read as such.
    let epoch = Time(Timestamp::UNIX_EPOCH);
    assert_eq!(round_trip(&epoch), epoch);
}
