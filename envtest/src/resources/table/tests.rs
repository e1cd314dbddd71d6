//! Each built-in kind's columns and its cells for a representative object,
//! at a fixed time so ages are exact.

use super::*;
use crate::resources::registry::Registry;

const NOW: &str = "2024-05-01T12:00:00Z";
const CREATED: &str = "2024-05-01T11:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// Headers (default columns only, as `kubectl get` shows them) and all cells.
fn table(group: &str, plural: &str, obj: Value) -> (Vec<String>, Vec<String>, Vec<Value>) {
    let r = Registry::with_builtins();
    let info = r
        .all()
        .into_iter()
        .find(|i| i.group == group && i.plural == plural)
        .unwrap();
    let mut obj = obj;
    obj["metadata"]["creationTimestamp"] = json!(CREATED);
    let t = table_at(&info, &obj, now());
    let cols = t["columnDefinitions"].as_array().unwrap();
    let header = |priority: u64| {
        cols.iter()
            .filter(|c| c["priority"] == priority)
            .map(|c| c["name"].as_str().unwrap().to_uppercase())
            .collect::<Vec<_>>()
    };
    let cells = t["rows"][0]["cells"].as_array().unwrap().clone();
    assert_eq!(cells.len(), cols.len(), "{plural}: one cell per column");
    (header(0), header(1), cells)
}

#[test]
fn every_builtin_kind_has_a_printer_with_one_cell_per_column() {
    for info in Registry::with_builtins().all() {
        let p = printer(&info.group, &info.plural)
            .unwrap_or_else(|| panic!("no printer for {}", info.plural));
        let cells = (p.cells)(&json!({}), now());
        assert_eq!(cells.len(), p.columns.len(), "{}", info.plural);
    }
}

#[test]
fn pods_show_readiness_status_and_restarts() {
    let pod = json!({
        "metadata": {"name": "web-0"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "log"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": [
            {"name": "app", "ready": true, "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"finishedAt": "2024-05-01T11:55:00Z"}}},
            {"name": "log", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]},
    });
    let (head, wide, cells) = table("", "pods", pod);
    assert_eq!(head, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(wide, ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]);
    assert_eq!(
        cells,
        [
            json!("web-0"),
            json!("1/2"),
            json!("CrashLoopBackOff"),
            json!("2 (5m ago)"),
            json!("60m"),
            json!("10.0.0.7"),
            json!("node-a"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn pods_report_init_progress_and_termination() {
    let pod = json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": [{"name": "a"}, {"name": "b"}], "containers": [{"name": "c"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 0}}},
            {"name": "b", "state": {"running": {}}},
        ]},
    });
    assert_eq!(table("", "pods", pod).2[2], "Init:1/2");
    let pod = json!({"metadata": {"name": "p", "deletionTimestamp": NOW},
                     "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}});
    assert_eq!(table("", "pods", pod).2[2], "Terminating");
}

#[test]
fn services_show_type_addresses_and_ports() {
    let svc = json!({
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                 "selector": {"app": "web"},
                 "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
    });
    let (head, wide, cells) = table("", "services", svc);
    assert_eq!(
        head,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(wide, ["SELECTOR"]);
    assert_eq!(
        cells,
        [
            json!("web"),
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("60m"),
            json!("app=web")
        ]
    );
    let untyped = json!({"metadata": {"name": "plain"}, "spec": {"clusterIP": "None"}});
    assert_eq!(
        table("", "services", untyped).2[1..5],
        [
            json!("ClusterIP"),
            json!("None"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.11"}});
    assert_eq!(table("", "services", lb).2[3], "<pending>");
}

#[test]
fn config_maps_secrets_namespaces_and_service_accounts_count_their_entries() {
    let (head, _, cells) = table(
        "",
        "configmaps",
        json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"z": ""}}),
    );
    assert_eq!(head, ["NAME", "DATA", "AGE"]);
    assert_eq!(cells, [json!("c"), json!(3), json!("60m")]);
    let (head, _, cells) = table(
        "",
        "secrets",
        json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}}),
    );
    assert_eq!(head, ["NAME", "TYPE", "DATA", "AGE"]);
    assert_eq!(cells, [json!("s"), json!("Opaque"), json!(1), json!("60m")]);
    let (head, _, cells) = table(
        "",
        "namespaces",
        json!({"metadata": {"name": "team"}, "status": {"phase": "Active"}}),
    );
    assert_eq!(head, ["NAME", "STATUS", "AGE"]);
    assert_eq!(cells, [json!("team"), json!("Active"), json!("60m")]);
    let (head, _, cells) = table(
        "",
        "serviceaccounts",
        json!({"metadata": {"name": "default"}}),
    );
    assert_eq!(head, ["NAME", "SECRETS", "AGE"]);
    assert_eq!(cells, [json!("default"), json!(0), json!("60m")]);
}

#[test]
fn events_lead_with_last_seen_and_name_the_object() {
    let ev = json!({
        "metadata": {"name": "web.17a"},
        "type": "Warning", "reason": "BackOff", "message": " Back-off restarting ",
        "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
        "source": {"component": "kubelet", "host": "node-a"},
        "firstTimestamp": "2024-05-01T11:30:00Z", "lastTimestamp": "2024-05-01T11:59:30Z", "count": 4,
    });
    let (head, wide, cells) = table("", "events", ev.clone());
    assert_eq!(head, ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    assert_eq!(wide, ["SUBOBJECT", "SOURCE", "FIRST SEEN", "COUNT", "NAME"]);
    assert_eq!(
        cells,
        [
            json!("30s"),
            json!("Warning"),
            json!("BackOff"),
            json!("pod/web-0"),
            json!("spec.containers{app}"),
            json!("kubelet, node-a"),
            json!("Back-off restarting"),
            json!("30m"),
            json!(4),
            json!("web.17a")
        ]
    );
    let new = json!({
        "metadata": {"name": "e"}, "type": "Normal", "reason": "Scaled", "note": "up",
        "regarding": {"kind": "Deployment", "name": "web"}, "eventTime": "2024-05-01T11:59:00.000000Z",
        "reportingController": "ctl",
    });
    let (_, _, cells) = table("events.k8s.io", "events", new);
    assert_eq!(cells[0], "60s");
    assert_eq!(cells[3], "deployment/web");
    assert_eq!(cells[5], "ctl");
    assert_eq!(cells[6], "up");
    assert_eq!(cells[8], 1);
}

#[test]
fn nodes_and_claims_show_status() {
    let node = json!({"metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}],
                   "nodeInfo": {"kubeletVersion": "v1.34.0"}}});
    let (head, _, cells) = table("", "nodes", node);
    assert_eq!(head, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert_eq!(cells[1], "Ready,SchedulingDisabled");
    assert_eq!(cells[2], "control-plane");
    assert_eq!(cells[5], "192.168.1.2");
    assert_eq!(cells[6], "<none>");
    let pvc = json!({"metadata": {"name": "data"}, "spec": {"volumeName": "pv-1", "storageClassName": "fast"},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
    let (head, _, cells) = table("", "persistentvolumeclaims", pvc);
    assert_eq!(
        head,
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE"
        ]
    );
    assert_eq!(
        cells[1..6],
        [
            json!("Bound"),
            json!("pv-1"),
            json!("1Gi"),
            json!("RWO"),
            json!("fast")
        ]
    );
}

#[test]
fn workloads_show_replica_counts() {
    let template = json!({"spec": {"containers": [{"name": "app", "image": "nginx:1"}]}});
    let dep = json!({"metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    let (head, wide, cells) = table("apps", "deployments", dep);
    assert_eq!(head, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_eq!(wide, ["CONTAINERS", "IMAGES", "SELECTOR"]);
    assert_eq!(
        cells,
        [
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("60m"),
            json!("app"),
            json!("nginx:1"),
            json!("app=web")
        ]
    );
    let rs = json!({"metadata": {"name": "web-1"}, "spec": {"replicas": 2, "template": template},
        "status": {"replicas": 2, "readyReplicas": 1}});
    let (head, _, cells) = table("apps", "replicasets", rs);
    assert_eq!(head, ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
    assert_eq!(cells[1..4], [json!(2), json!(2), json!(1)]);
    let sts = json!({"metadata": {"name": "db"}, "spec": {"replicas": 1, "template": template}});
    let (head, _, cells) = table("apps", "statefulsets", sts);
    assert_eq!(head, ["NAME", "READY", "AGE"]);
    assert_eq!(cells[1], "0/1");
    let ds = json!({"metadata": {"name": "agent"}, "spec": {"template": {"spec": {"nodeSelector": {"os": "linux"}}}},
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                   "updatedNumberScheduled": 3, "numberAvailable": 2}});
    let (head, _, cells) = table("apps", "daemonsets", ds);
    assert_eq!(
        head,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE"
        ]
    );
    assert_eq!(
        cells[1..7],
        [
            json!(3),
            json!(3),
            json!(2),
            json!(3),
            json!(2),
            json!("os=linux")
        ]
    );
    let rev = json!({"metadata": {"name": "db-1", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": true}]}, "revision": 4});
    let (head, _, cells) = table("apps", "controllerrevisions", rev);
    assert_eq!(head, ["NAME", "CONTROLLER", "REVISION", "AGE"]);
    assert_eq!(cells[1..3], [json!("statefulset.apps/db"), json!(4)]);
}

#[test]
fn jobs_and_cron_jobs_show_progress() {
    let job = json!({"metadata": {"name": "pi"}, "spec": {"completions": 3},
        "status": {"succeeded": 3, "startTime": "2024-05-01T11:00:00Z", "completionTime": "2024-05-01T11:00:42Z",
                   "conditions": [{"type": "Complete", "status": "True"}]}});
    let (head, _, cells) = table("batch", "jobs", job);
    assert_eq!(head, ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]);
    assert_eq!(cells[1..4], [json!("Complete"), json!("3/3"), json!("42s")]);
    let running = json!({"metadata": {"name": "r"}, "spec": {"parallelism": 2},
        "status": {"startTime": "2024-05-01T11:59:00Z"}});
    assert_eq!(
        table("batch", "jobs", running).2[1..4],
        [json!("Running"), json!("0/1 of 2"), json!("60s")]
    );
    let cj = json!({"metadata": {"name": "nightly"}, "spec": {"schedule": "0 3 * * *", "suspend": false},
        "status": {"active": [{"name": "x"}], "lastScheduleTime": "2024-05-01T03:00:00Z"}});
    let (head, _, cells) = table("batch", "cronjobs", cj);
    assert_eq!(
        head,
        [
            "NAME",
            "SCHEDULE",
            "TIMEZONE",
            "SUSPEND",
            "ACTIVE",
            "LAST SCHEDULE",
            "AGE"
        ]
    );
    assert_eq!(
        cells[1..6],
        [
            json!("0 3 * * *"),
            json!("<none>"),
            json!("False"),
            json!(1),
            json!("9h")
        ]
    );
}

#[test]
fn leases_rbac_and_crds() {
    let lease = json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "pod-a"}});
    let (head, _, cells) = table("coordination.k8s.io", "leases", lease);
    assert_eq!(head, ["NAME", "HOLDER", "AGE"]);
    assert_eq!(cells, [json!("leader"), json!("pod-a"), json!("60m")]);
    for (plural, g) in [
        ("roles", "rbac.authorization.k8s.io"),
        ("clusterroles", "rbac.authorization.k8s.io"),
        ("customresourcedefinitions", "apiextensions.k8s.io"),
    ] {
        let (head, _, cells) = table(g, plural, json!({"metadata": {"name": "x"}}));
        assert_eq!(head, ["NAME", "CREATED AT"], "{plural}");
        assert_eq!(cells, [json!("x"), json!(CREATED)]);
    }
    let rb = json!({"metadata": {"name": "read"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "ann"}, {"kind": "ServiceAccount", "namespace": "ns", "name": "bot"}]});
    let (head, wide, cells) = table("rbac.authorization.k8s.io", "rolebindings", rb);
    assert_eq!(head, ["NAME", "ROLE", "AGE"]);
    assert_eq!(wide, ["USERS", "GROUPS", "SERVICEACCOUNTS"]);
    assert_eq!(
        cells[1..],
        [
            json!("ClusterRole/view"),
            json!("60m"),
            json!("ann"),
            json!(""),
            json!("ns/bot")
        ]
    );
}

#[test]
fn custom_resources_keep_their_printer_columns() {
    let mut info = (*Registry::with_builtins().get("", "v1", "pods").unwrap()).clone();
    info.custom = true;
    info.printer_columns = vec![
        PrinterColumn {
            name: "Color".into(),
            ty: "string".into(),
            path: "spec.color".into(),
            ..PrinterColumn::default()
        },
        PrinterColumn {
            name: "Size".into(),
            ty: "integer".into(),
            format: "int32".into(),
            description: "Cogs in the widget.".into(),
            priority: 1,
            path: "spec.size".into(),
        },
    ];
    let t = table_at(
        &info,
        &json!({"metadata": {"name": "w"}, "spec": {"color": "red", "size": 3}}),
        now(),
    );
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Color", "Size"]);
    // Each column carries its declared priority, format and description.
    assert_eq!(
        t["columnDefinitions"][2],
        json!({"name": "Size", "type": "integer", "format": "int32",
            "description": "Cogs in the widget.", "priority": 1})
    );
    assert_eq!(t["columnDefinitions"][1]["priority"], 0);
    assert_eq!(t["rows"][0]["cells"], json!(["w", "red", 3.0]));
    info.printer_columns.clear();
    let t = table_at(
        &info,
        &json!({"metadata": {"name": "w", "creationTimestamp": CREATED}}),
        now(),
    );
    assert_eq!(t["rows"][0]["cells"], json!(["w", "60m"]));
    assert!(wants_table("application/json;as=Table;v=v1;g=meta.k8s.io"));
}
