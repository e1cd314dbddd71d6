// Fields whose `Option` comes and goes between Kubernetes versions (a
// Deployment's `spec`, a ControllerRevision's `data` and `revision` from
// 1.37) are written with `.into()`, which fills either.
#![allow(clippy::useless_conversion)]

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
        prop_assert_eq!(round_trip(&svc), svc.clone());
        let pod = Pod { metadata: meta.clone(), spec: Some(spec.clone()), ..Default::default() };
        prop_assert_eq!(round_trip(&pod), pod.clone());
        let d = Deployment {
            metadata: meta,
            spec: DeploymentSpec {
                replicas,
                selector: LabelSelector { match_labels: Some([("app".to_string(), "x".to_string())].into()), ..Default::default() },
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment { max_surge: surge, max_unavailable: None }),
                }),
                template: k8s_openapi::api::core::v1::PodTemplateSpec { metadata: None, spec: Some(spec) },
                ..Default::default()
            }
            .into(),
            ..Default::default()
        };
        prop_assert_eq!(round_trip(&d), d.clone());
        let v = serde_json::to_value(&d).unwrap();
        prop_assert_eq!(from_protobuf(&to_protobuf(&v).unwrap()).unwrap(), v);
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
    let rev = ControllerRevision {
        metadata: ObjectMeta {
            name: Some("r1".into()),
            ..Default::default()
        },
        data: RawExtension(data.clone()).into(),
        revision: 3i64.into(),
    };
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
    for (av, kind, t) in listed {
        assert!(crate::has_protobuf(av, kind), "{av} {kind}: no codec");
        assert!(crate::has_protobuf(av, &format!("{kind}List")));
        assert_eq!(crate::typed::has_typed(t), Some((av, kind)), "{av} {kind}");
    }
    // Kinds never listed have a codec and no typed decoder.
    assert!(crate::has_protobuf("v1", "Status"));
    let status = std::any::TypeId::of::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
    assert_eq!(crate::typed::has_typed(status), None);
}
