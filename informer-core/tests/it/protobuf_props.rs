//! Same results on both paths: objects of nine built-in kinds, generated,
//! read through the protobuf path and through the JSON path must come out
//! equal. Every generated object goes through the codec (the API server's
//! protobuf of its JSON form, decoded as the lister-watcher decodes it, with
//! and without managedFields); one object of each kind goes end to end
//! through envtest, listed and watched by a protobuf and a JSON
//! lister-watcher side by side.

// A Deployment's `spec` is an `Option` up to Kubernetes 1.36 and not from
// 1.37: `.into()` writes it under every offered version.
#![allow(clippy::useless_conversion)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use informer_codec::{DecodeOptions, Decoder, Envelope};
use informer_core::list_watch::{
    ApiListerWatcher, ListRequest, ListWatchOptions, ListerWatcher, WatchEvent, WatchRequest,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, EnvVar, Event, Namespace, NamespaceSpec, Node,
    NodeCondition, NodeSpec, NodeStatus, ObjectReference, Pod, PodSpec, PodStatus, PodTemplateSpec,
    ResourceRequirements, Secret, Service, ServicePort, ServiceSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldsV1, LabelSelector, ManagedFieldsEntry, MicroTime, ObjectMeta, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};
use kube_core::Resource;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::common::*;

const NS: &str = "props";

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,8}"
}

fn text() -> impl Strategy<Value = String> {
    "[ -~]{0,16}"
}

fn small_map() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    option::of(btree_map(word(), text(), 1..4))
}

/// Labels (and selectors): valid label values.
fn labels() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    option::of(btree_map(word(), word(), 1..4))
}

fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(Timestamp::from_second(s).unwrap()))
}

fn micro_time() -> impl Strategy<Value = MicroTime> {
    (0i64..4_000_000_000_000_000).prop_map(|us| MicroTime(Timestamp::from_microsecond(us).unwrap()))
}

fn quantity() -> impl Strategy<Value = Quantity> {
    prop_oneof![
        Just("100m"),
        Just("1"),
        Just("2Gi"),
        Just("500Mi"),
        Just("1.5")
    ]
    .prop_map(|q| Quantity(q.to_string()))
}

fn int_or_string() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        (1i32..65535).prop_map(IntOrString::Int),
        word().prop_map(IntOrString::String)
    ]
}

fn managed_fields() -> impl Strategy<Value = Option<Vec<ManagedFieldsEntry>>> {
    option::of(vec(
        (word(), time(), btree_map(word(), Just(()), 0..3)).prop_map(|(manager, t, keys)| {
            let inner: serde_json::Map<String, serde_json::Value> = keys
                .into_keys()
                .map(|k| (format!("f:{k}"), serde_json::json!({})))
                .collect();
            ManagedFieldsEntry {
                manager: Some(manager),
                operation: Some("Update".into()),
                api_version: Some("v1".into()),
                time: Some(t),
                fields_type: Some("FieldsV1".into()),
                fields_v1: Some(FieldsV1(serde_json::json!({ "f:metadata": inner }))),
                subresource: None,
            }
        }),
        1..3,
    ))
}

fn meta(namespaced: bool) -> impl Strategy<Value = ObjectMeta> {
    (
        word(),
        labels(),
        small_map(),
        managed_fields(),
        option::of(vec(word().prop_map(|w| format!("example.com/{w}")), 1..3)),
    )
        .prop_map(
            move |(name, labels, annotations, managed_fields, finalizers)| ObjectMeta {
                name: Some(format!("o-{name}")),
                namespace: namespaced.then(|| NS.to_string()),
                labels,
                annotations,
                managed_fields,
                finalizers,
                ..ObjectMeta::default()
            },
        )
}

fn container() -> impl Strategy<Value = Container> {
    (
        word(),
        option::of(word()),
        option::of(vec(text(), 1..3)),
        option::of(vec((word(), text()), 1..3)),
        option::of(1i32..65535),
        option::of((quantity(), quantity())),
    )
        .prop_map(|(name, image, args, env, port, res)| Container {
            name,
            image: image.map(|i| format!("{i}:1")),
            args,
            env: env.map(|e| {
                e.into_iter()
                    .map(|(name, value)| EnvVar {
                        name: name.to_uppercase(),
                        value: Some(value),
                        value_from: None,
                    })
                    .collect()
            }),
            ports: port.map(|p| {
                vec![ContainerPort {
                    container_port: p,
                    protocol: Some("TCP".into()),
                    ..ContainerPort::default()
                }]
            }),
            resources: res.map(|(cpu, mem)| ResourceRequirements {
                requests: Some([("cpu".to_string(), cpu)].into()),
                limits: Some([("memory".to_string(), mem)].into()),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (vec(container(), 1..3), labels(), option::of(0i64..600)).prop_map(
        |(containers, node_selector, grace)| PodSpec {
            containers,
            node_selector,
            termination_grace_period_seconds: grace,
            ..PodSpec::default()
        },
    )
}

pub(crate) fn pod() -> impl Strategy<Value = Pod> {
    (
        meta(true),
        pod_spec(),
        option::of(prop_oneof![Just("Pending"), Just("Running")]),
        option::of(time()),
    )
        .prop_map(|(metadata, spec, phase, start)| Pod {
            metadata,
            spec: Some(spec),
            status: Some(PodStatus {
                phase: phase.map(str::to_string),
                start_time: start,
                ..PodStatus::default()
            }),
        })
}

fn deployment() -> impl Strategy<Value = Deployment> {
    (
        meta(true),
        option::of(0i32..10),
        pod_spec(),
        option::of(int_or_string()),
    )
        .prop_map(|(metadata, replicas, spec, surge)| {
            let labels: BTreeMap<String, String> = [("app".to_string(), "x".to_string())].into();
            Deployment {
                metadata,
                spec: DeploymentSpec {
                    replicas,
                    selector: LabelSelector {
                        match_labels: Some(labels.clone()),
                        ..LabelSelector::default()
                    },
                    strategy: Some(DeploymentStrategy {
                        type_: Some("RollingUpdate".into()),
                        rolling_update: Some(RollingUpdateDeployment {
                            max_surge: surge,
                            max_unavailable: None,
                        }),
                    }),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(labels),
                            ..ObjectMeta::default()
                        }),
                        spec: Some(spec),
                    },
                    ..DeploymentSpec::default()
                }
                .into(),
                status: None,
            }
        })
}

pub(crate) fn config_map() -> impl Strategy<Value = ConfigMap> {
    (
        meta(true),
        small_map(),
        option::of(btree_map(word(), vec(any::<u8>(), 0..16), 1..3)),
        option::of(any::<bool>()),
    )
        .prop_map(|(metadata, data, bin, immutable)| ConfigMap {
            metadata,
            data,
            binary_data: bin.map(|m| {
                m.into_iter()
                    .map(|(k, v)| (format!("bin-{k}"), ByteString(v)))
                    .collect()
            }),
            immutable,
        })
}

fn secret() -> impl Strategy<Value = Secret> {
    (
        meta(true),
        option::of(btree_map(word(), vec(any::<u8>(), 0..16), 1..3)),
        option::of(prop_oneof![Just("Opaque"), Just("example.com/token")]),
    )
        .prop_map(|(metadata, data, type_)| Secret {
            metadata,
            data: data.map(|m| m.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
            type_: type_.map(str::to_string),
            ..Secret::default()
        })
}

fn service() -> impl Strategy<Value = Service> {
    (
        meta(true),
        vec((word(), 1i32..65535, int_or_string()), 1..3),
        labels(),
    )
        .prop_map(|(metadata, ports, selector)| Service {
            metadata,
            spec: Some(ServiceSpec {
                ports: Some(
                    ports
                        .into_iter()
                        .enumerate()
                        .map(|(i, (name, port, target))| ServicePort {
                            name: Some(format!("{name}{i}")),
                            port: port.saturating_add(0),
                            target_port: Some(target),
                            protocol: Some("TCP".into()),
                            ..ServicePort::default()
                        })
                        .collect(),
                ),
                selector,
                type_: Some("ClusterIP".into()),
                ..ServiceSpec::default()
            }),
            status: None,
        })
}

fn node() -> impl Strategy<Value = Node> {
    (
        meta(false),
        option::of(any::<bool>()),
        option::of(vec((word(), text()), 1..3)),
        quantity(),
        vec((word(), time()), 0..3),
    )
        .prop_map(|(metadata, unschedulable, taints, cpu, conditions)| Node {
            metadata,
            spec: Some(NodeSpec {
                unschedulable,
                taints: taints.map(|t| {
                    t.into_iter()
                        .map(|(key, value)| Taint {
                            key: format!("example.com/{key}"),
                            value: Some(value),
                            effect: "NoSchedule".into(),
                            time_added: None,
                        })
                        .collect()
                }),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some([("cpu".to_string(), cpu)].into()),
                conditions: Some(
                    conditions
                        .into_iter()
                        .map(|(reason, t)| NodeCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            reason: Some(reason),
                            last_transition_time: Some(t),
                            ..NodeCondition::default()
                        })
                        .collect(),
                )
                .filter(|c: &Vec<NodeCondition>| !c.is_empty()),
                ..NodeStatus::default()
            }),
        })
}

fn lease() -> impl Strategy<Value = Lease> {
    (
        meta(true),
        option::of(word()),
        option::of(1i32..60),
        option::of(micro_time()),
        option::of(micro_time()),
        option::of(0i32..100),
    )
        .prop_map(
            |(metadata, holder, duration, acquire, renew, transitions)| Lease {
                metadata,
                spec: Some(LeaseSpec {
                    holder_identity: holder,
                    lease_duration_seconds: duration,
                    acquire_time: acquire,
                    renew_time: renew,
                    lease_transitions: transitions,
                    ..LeaseSpec::default()
                }),
            },
        )
}

fn event() -> impl Strategy<Value = Event> {
    (
        meta(true),
        word(),
        option::of(text()),
        option::of(1i32..100),
        option::of(time()),
        option::of(micro_time()),
    )
        .prop_map(|(metadata, reason, message, count, first, at)| Event {
            metadata,
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some("p".into()),
                namespace: Some(NS.into()),
                ..ObjectReference::default()
            },
            reason: Some(reason),
            message,
            count,
            first_timestamp: first,
            event_time: at,
            type_: Some("Normal".into()),
            ..Event::default()
        })
}

fn namespace() -> impl Strategy<Value = Namespace> {
    (meta(false), option::of(vec(word(), 1..3))).prop_map(|(metadata, finalizers)| Namespace {
        metadata,
        spec: finalizers.map(|f| NamespaceSpec {
            finalizers: Some(f.into_iter().map(|w| format!("example.com/{w}")).collect()),
        }),
        status: None,
    })
}

/// The JSON form of `o`, as a server stores it.
fn json_of<K: Resource<DynamicType = ()> + Serialize>(o: &K) -> serde_json::Value {
    let mut v = serde_json::to_value(o).unwrap();
    v["apiVersion"] = K::api_version(&()).into();
    v["kind"] = K::kind(&()).into();
    v
}

/// Both paths through the codec: JSON as the JSON path decodes it, and the
/// API server's protobuf of the same JSON as the protobuf path decodes it.
fn both_paths<K>(o: &K, strip: bool) -> (K, K)
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + 'static,
{
    let mut v = json_of(o);
    // As kube-apiserver serves it: Go's JSON of the object (its protobuf
    // carries every non-pointer field, which reads back as that).
    informer_codec::facts::normalize_json(&mut v);
    let mut json: K = serde_json::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap();
    if strip {
        json.meta_mut().managed_fields = None;
    }
    let pb = informer_codec::to_protobuf(&v).unwrap();
    let envelope = Envelope::read(&pb).unwrap();
    let decoder = Decoder::<K>::new().expect("a built-in kind");
    let opts = DecodeOptions {
        strip_managed_fields: strip,
    };
    (json, decoder.decode(&envelope.raw, opts).unwrap())
}

macro_rules! same_on_both_paths {
    ($($test:ident: $strategy:expr;)*) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
            $(
                #[test]
                fn $test(o in $strategy, strip in any::<bool>()) {
                    let (json, pb) = both_paths(&o, strip);
                    prop_assert_eq!(pb, json);
                }
            )*
        }
    };
}

same_on_both_paths! {
    pods_are_the_same_on_both_paths: pod();
    deployments_are_the_same_on_both_paths: deployment();
    config_maps_are_the_same_on_both_paths: config_map();
    secrets_are_the_same_on_both_paths: secret();
    services_are_the_same_on_both_paths: service();
    nodes_are_the_same_on_both_paths: node();
    leases_are_the_same_on_both_paths: lease();
    events_are_the_same_on_both_paths: event();
    namespaces_are_the_same_on_both_paths: namespace();
}

/// One value of `strategy`, the same in every run.
fn sample<S: Strategy>(strategy: S) -> S::Value {
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    strategy.new_tree(&mut runner).unwrap().current()
}

/// The next object event of a watch.
async fn next_object<K>(stream: &mut informer_core::list_watch::WatchStream<K>) -> K {
    loop {
        let ev = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("an event in time")
            .expect("the watch goes on")
            .expect("no watch error");
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => return o,
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Undecodable(f) => panic!("undecodable: {f}"),
        }
    }
}

/// `o` created in envtest, listed and watched by a protobuf and a JSON
/// lister-watcher: both see the same objects.
async fn end_to_end<K>(api: Api<K>, mut o: K)
where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + PartialEq
        + Send
        + Sync
        + 'static,
{
    // Finalizers would keep the object; the server sets managedFields.
    o.meta_mut().finalizers = None;
    o.meta_mut().managed_fields = None;
    let created = api.create(&PostParams::default(), &o).await.unwrap();
    let name = created.meta().name.clone().unwrap();
    let opts = ListWatchOptions::default().fields(format!("metadata.name={name}"));
    let pb = ApiListerWatcher::new(api.clone(), opts.clone()).protobuf(true);
    let json = ApiListerWatcher::new(api.clone(), opts).protobuf(false);
    assert!(pb.uses_protobuf() && !json.uses_protobuf());
    let (a, b) = (
        pb.list(ListRequest::default()).await.unwrap(),
        json.list(ListRequest::default()).await.unwrap(),
    );
    assert_eq!(a.items.len(), 1, "{}", K::kind(&()));
    assert_eq!(a.items, b.items, "{}", K::kind(&()));
    let req = WatchRequest {
        resource_version: a.resource_version.clone(),
        ..WatchRequest::default()
    };
    let (mut wa, mut wb) = (
        pb.watch(req.clone()).await.unwrap(),
        json.watch(req).await.unwrap(),
    );
    let touch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    let (ea, eb) = (next_object(&mut wa).await, next_object(&mut wb).await);
    assert_eq!(ea, eb, "{}", K::kind(&()));
    assert_eq!(ea.meta().labels.as_ref().unwrap()["touched"], "yes");
    assert!(!pb.fell_back_to_json(), "{}", K::kind(&()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_of_each_kind_is_the_same_end_to_end() {
    let (_env, client) = env_with(&[NS]).await;
    let _ = Duration::ZERO;
    end_to_end(Api::namespaced(client.clone(), NS), sample(pod())).await;
    end_to_end(Api::namespaced(client.clone(), NS), sample(deployment())).await;
    end_to_end(Api::namespaced(client.clone(), NS), sample(config_map())).await;
    end_to_end(Api::namespaced(client.clone(), NS), sample(secret())).await;
    end_to_end(Api::namespaced(client.clone(), NS), sample(service())).await;
    end_to_end(Api::all(client.clone()), sample(node())).await;
    end_to_end(Api::namespaced(client.clone(), NS), sample(lease())).await;
    end_to_end(Api::namespaced(client.clone(), NS), sample(event())).await;
    end_to_end(Api::all(client.clone()), sample(namespace())).await;
}
