//! Columns and cells of the core (`v1`) kinds, as the API server prints them
//! for `kubectl get` (pods have their own module): services, config maps,
//! secrets, namespaces, service accounts, nodes, endpoints, persistent
//! volume claims and events (both `v1` and `events.k8s.io/v1`, which share
//! one printer).

use super::format::{at, count, int, list, or_none, since, text};
use super::{AGE, Column, NAME, Printer, col, wide};
use jiff::Timestamp;
use serde_json::{Value, json};

/// Services: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE; wide: SELECTOR.
pub const SERVICE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Type",
            "string",
            "How the Service is exposed: ClusterIP, NodePort, LoadBalancer or ExternalName.",
        ),
        col(
            "Cluster-IP",
            "string",
            "The IP addresses assigned to the Service inside the cluster.",
        ),
        col(
            "External-IP",
            "string",
            "The addresses the Service is reachable at from outside the cluster.",
        ),
        col("Port(s)", "string", "The ports the Service exposes."),
        AGE,
        wide("Selector", "The labels of the pods the Service routes to."),
    ],
    cells: service,
};

fn strings(v: &Value, path: &str) -> Vec<String> {
    list(v, path)
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn service(s: &Value, now: Timestamp) -> Vec<Value> {
    let ty = match text(s, "spec.type") {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ips = strings(s, "spec.clusterIPs");
    let cluster_ip = if cluster_ips.is_empty() {
        or_none(text(s, "spec.clusterIP"))
    } else {
        cluster_ips.join(",")
    };
    let external = strings(s, "spec.externalIPs");
    let external = match ty {
        "ClusterIP" | "NodePort" => or_none(external.join(",")),
        "LoadBalancer" => {
            let mut all = external;
            for ing in list(s, "status.loadBalancer.ingress") {
                for key in ["ip", "hostname"] {
                    if !text(ing, key).is_empty() {
                        all.push(text(ing, key).to_string());
                    }
                }
            }
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(s, "spec.externalName").to_string(),
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = list(s, "spec.ports")
        .iter()
        .map(|p| {
            let proto = match text(p, "protocol") {
                "" => "TCP",
                x => x,
            };
            match int(p, "nodePort", 0) {
                0 => format!("{}/{proto}", int(p, "port", 0)),
                n => format!("{}:{n}/{proto}", int(p, "port", 0)),
            }
        })
        .collect();
    vec![
        json!(text(s, "metadata.name")),
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(or_none(ports.join(","))),
        json!(since(text(s, "metadata.creationTimestamp"), now)),
        json!(super::format::labels(at(s, "spec.selector"))),
    ]
}

/// ConfigMaps: NAME DATA AGE.
pub const CONFIG_MAP: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Data",
            "string",
            "The number of entries in data and binaryData.",
        ),
        AGE,
    ],
    cells: |v, now| {
        vec![
            json!(text(v, "metadata.name")),
            json!(count(v, "data") + count(v, "binaryData")),
            json!(since(text(v, "metadata.creationTimestamp"), now)),
        ]
    },
};

/// Secrets: NAME TYPE DATA AGE.
pub const SECRET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Type",
            "string",
            "Used to facilitate programmatic handling of secret data.",
        ),
        col("Data", "string", "The number of entries in data."),
        AGE,
    ],
    cells: |v, now| {
        vec![
            json!(text(v, "metadata.name")),
            json!(text(v, "type")),
            json!(count(v, "data")),
            json!(since(text(v, "metadata.creationTimestamp"), now)),
        ]
    },
};

/// Namespaces: NAME STATUS AGE.
pub const NAMESPACE: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The status of the namespace"),
        AGE,
    ],
    cells: |v, now| {
        vec![
            json!(text(v, "metadata.name")),
            json!(text(v, "status.phase")),
            json!(since(text(v, "metadata.creationTimestamp"), now)),
        ]
    },
};

/// ServiceAccounts: NAME SECRETS AGE.
pub const SERVICE_ACCOUNT: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Secrets",
            "string",
            "The number of secrets listed for this service account.",
        ),
        AGE,
    ],
    cells: |v, now| {
        vec![
            json!(text(v, "metadata.name")),
            json!(list(v, "secrets").len()),
            json!(since(text(v, "metadata.creationTimestamp"), now)),
        ]
    },
};

/// Nodes: NAME STATUS ROLES AGE VERSION; wide: INTERNAL-IP EXTERNAL-IP
/// OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.
pub const NODE: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", "Kubelet Version reported by the node."),
        wide("Internal-IP", "The node's first InternalIP address."),
        wide("External-IP", "The node's first ExternalIP address."),
        wide("OS-Image", "OS Image reported by the node."),
        wide("Kernel-Version", "Kernel Version reported by the node."),
        wide(
            "Container-Runtime",
            "ContainerRuntime Version reported by the node.",
        ),
    ],
    cells: node,
};

fn node(n: &Value, now: Timestamp) -> Vec<Value> {
    let mut status: Vec<String> = list(n, "status.conditions")
        .iter()
        .filter(|c| text(c, "type") == "Ready")
        .map(|c| match text(c, "status") {
            "True" => "Ready".to_string(),
            _ => "NotReady".to_string(),
        })
        .take(1)
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if at(n, "spec.unschedulable") == Some(&json!(true)) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = at(n, "metadata.labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            _ if k == "kubernetes.io/role" => v.as_str().map(str::to_string),
            _ => None,
        })
        .collect();
    roles.sort();
    let address = |ty: &str| {
        or_none(
            list(n, "status.addresses")
                .iter()
                .find(|a| text(a, "type") == ty)
                .map_or("", |a| text(a, "address")),
        )
    };
    let info = |key: &str| match text(n, &format!("status.nodeInfo.{key}")) {
        "" => "<unknown>".to_string(),
        s => s.to_string(),
    };
    vec![
        json!(text(n, "metadata.name")),
        json!(status.join(",")),
        json!(or_none(roles.join(","))),
        json!(since(text(n, "metadata.creationTimestamp"), now)),
        json!(text(n, "status.nodeInfo.kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

/// Endpoints: NAME ENDPOINTS AGE.
pub const ENDPOINTS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Endpoints",
            "string",
            "The addresses and ports of the endpoints, the first three shown.",
        ),
        AGE,
    ],
    cells: |v, now| {
        let mut all = Vec::new();
        for subset in list(v, "subsets") {
            let ports = list(subset, "ports");
            for a in list(subset, "addresses") {
                if ports.is_empty() {
                    all.push(text(a, "ip").to_string());
                }
                for p in ports {
                    all.push(format!("{}:{}", text(a, "ip"), int(p, "port", 0)));
                }
            }
        }
        let shown = match all.len() {
            0 => "<none>".to_string(),
            n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
            _ => all.join(","),
        };
        vec![
            json!(text(v, "metadata.name")),
            json!(shown),
            json!(since(text(v, "metadata.creationTimestamp"), now)),
        ]
    },
};

/// PersistentVolumeClaims: NAME STATUS VOLUME CAPACITY ACCESS MODES
/// STORAGECLASS VOLUMEATTRIBUTESCLASS AGE; wide: VOLUMEMODE.
pub const PVC: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The current phase of the claim."),
        col(
            "Volume",
            "string",
            "The binding reference to the PersistentVolume backing this claim.",
        ),
        col(
            "Capacity",
            "string",
            "The actual resources of the underlying volume.",
        ),
        col(
            "Access Modes",
            "string",
            "The actual access modes the volume backing the claim has.",
        ),
        col("StorageClass", "string", "StorageClass of the pvc"),
        col(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pvc",
        ),
        AGE,
        wide(
            "VolumeMode",
            "What type of volume is required by the claim.",
        ),
    ],
    cells: pvc,
};

fn pvc(v: &Value, now: Timestamp) -> Vec<Value> {
    let phase = if at(v, "metadata.deletionTimestamp").is_some() {
        "Terminating"
    } else {
        text(v, "status.phase")
    };
    let volume = text(v, "spec.volumeName");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let held: Vec<&str> = list(v, "status.accessModes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let modes: Vec<&str> = [
            ("ReadWriteOnce", "RWO"),
            ("ReadOnlyMany", "ROX"),
            ("ReadWriteMany", "RWX"),
            ("ReadWriteOncePod", "RWOP"),
        ]
        .iter()
        .filter(|(m, _)| held.contains(m))
        .map(|(_, short)| *short)
        .collect();
        (
            text(v, "status.capacity.storage").to_string(),
            modes.join(","),
        )
    };
    let class = match text(v, "spec.storageClassName") {
        "" => v["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"]
            .as_str()
            .unwrap_or(""),
        c => c,
    };
    let unset = |s: &str| {
        if s.is_empty() {
            "<unset>".to_string()
        } else {
            s.to_string()
        }
    };
    vec![
        json!(text(v, "metadata.name")),
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(unset(text(v, "spec.volumeAttributesClassName"))),
        json!(since(text(v, "metadata.creationTimestamp"), now)),
        json!(unset(text(v, "spec.volumeMode"))),
    ]
}

/// Events (`v1` and `events.k8s.io/v1`): LAST SEEN TYPE REASON OBJECT
/// MESSAGE; wide: SUBOBJECT SOURCE FIRST SEEN COUNT NAME. There is no
/// leading NAME column: an event's name says nothing to a reader.
pub const EVENT: Printer = Printer {
    columns: &[
        col(
            "Last Seen",
            "string",
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        col("Type", "string", "Type of this event (Normal, Warning)."),
        col(
            "Reason",
            "string",
            "A short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col("Object", "string", "The object that this event is about."),
        wide("Subobject", "The field of the object this event is about."),
        wide("Source", "The component reporting this event."),
        col(
            "Message",
            "string",
            "A human-readable description of the status of this operation.",
        ),
        wide(
            "First Seen",
            "The time at which the event was first recorded.",
        ),
        wide("Count", "The number of times this event has occurred."),
        Column {
            priority: 1,
            ..NAME
        },
    ],
    cells: event,
};

/// The first non-empty string among the paths.
fn first<'a>(v: &'a Value, paths: &[&str]) -> &'a str {
    paths
        .iter()
        .map(|p| text(v, p))
        .find(|s| !s.is_empty())
        .unwrap_or("")
}

fn event(e: &Value, now: Timestamp) -> Vec<Value> {
    let stamp = |paths: &[&str]| match first(e, paths) {
        "" => "<unknown>".to_string(),
        t => since(t, now),
    };
    let first_seen = stamp(&["firstTimestamp", "deprecatedFirstTimestamp", "eventTime"]);
    let series = at(e, "series");
    let (last_seen, count) = match series {
        Some(s) => (stamp_of(s, now), int(s, "count", 1)),
        None => {
            let last = match first(e, &["lastTimestamp", "deprecatedLastTimestamp"]) {
                "" => first_seen.clone(),
                t => since(t, now),
            };
            let n = match int(e, "count", 0).max(int(e, "deprecatedCount", 0)) {
                0 => 1,
                n => n,
            };
            (last, n)
        }
    };
    let involved = at(e, "involvedObject").or_else(|| at(e, "regarding"));
    let (kind, name, field) = involved.map_or(("", "", ""), |o| {
        (text(o, "kind"), text(o, "name"), text(o, "fieldPath"))
    });
    let target = if name.is_empty() {
        kind.to_lowercase()
    } else {
        format!("{}/{name}", kind.to_lowercase())
    };
    let component = first(
        e,
        &[
            "source.component",
            "deprecatedSource.component",
            "reportingController",
        ],
    );
    let instance = first(
        e,
        &["source.host", "deprecatedSource.host", "reportingInstance"],
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last_seen),
        json!(text(e, "type")),
        json!(text(e, "reason")),
        json!(target),
        json!(field),
        json!(source),
        json!(first(e, &["message", "note"]).trim()),
        json!(first_seen),
        json!(count),
        json!(text(e, "metadata.name")),
    ]
}

fn stamp_of(series: &Value, now: Timestamp) -> String {
    match first(series, &["lastObservedTime"]) {
        "" => "<unknown>".into(),
        t => since(t, now),
    }
}
