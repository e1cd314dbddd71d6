//! A pod's row as the API server prints it: READY counts ready containers
//! (sidecars included) against all of them, STATUS is the most telling of
//! the pod's phase, its init progress (`Init:1/2`), a container's waiting or
//! terminated reason, or `Terminating`; RESTARTS adds when the last restart
//! was (`2 (5m ago)`).

use super::format::{at, int, list, or_none, since, text};
use super::{AGE, NAME, Printer, col, wide};
use jiff::Timestamp;
use serde_json::{Value, json};

/// Pods: NAME READY STATUS RESTARTS AGE; wide: IP NODE NOMINATED NODE
/// READINESS GATES.
pub const POD: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        col(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
        ),
        col(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        AGE,
        wide("IP", "IP address allocated to the pod."),
        wide("Node", "The node the pod is scheduled onto."),
        wide(
            "Nominated Node",
            "The node the scheduler nominated for this pod when it preempts others.",
        ),
        wide(
            "Readiness Gates",
            "Pod conditions evaluated for readiness, as satisfied/total.",
        ),
    ],
    cells: pod,
};

fn waiting_reason(c: &Value) -> &str {
    text(c, "state.waiting.reason")
}

/// A terminated container's reason, or `Signal:N` / `ExitCode:N`.
fn terminated_reason(c: &Value) -> Option<String> {
    let t = at(c, "state.terminated")?;
    let reason = text(t, "reason");
    Some(if !reason.is_empty() {
        reason.to_string()
    } else if int(t, "signal", 0) != 0 {
        format!("Signal:{}", int(t, "signal", 0))
    } else {
        format!("ExitCode:{}", int(t, "exitCode", 0))
    })
}

fn later(a: Option<Timestamp>, c: &Value) -> Option<Timestamp> {
    let b = text(c, "lastState.terminated.finishedAt")
        .parse::<Timestamp>()
        .ok();
    a.max(b)
}

fn pod(p: &Value, now: Timestamp) -> Vec<Value> {
    let init_specs = list(p, "spec.initContainers");
    let sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| text(c, "name") == name && text(c, "restartPolicy") == "Always")
    };
    let total = list(p, "spec.containers").len()
        + init_specs
            .iter()
            .filter(|c| text(c, "restartPolicy") == "Always")
            .count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart = None;
    let mut reason = match text(p, "status.reason") {
        "" => text(p, "status.phase").to_string(),
        r => r.to_string(),
    };
    let init_statuses = list(p, "status.initContainerStatuses");
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += int(c, "restartCount", 0);
        last_restart = later(last_restart, c);
        if sidecar(text(c, "name")) && at(c, "started") == Some(&json!(true)) {
            ready += usize::from(at(c, "ready") == Some(&json!(true)));
            continue;
        }
        if at(c, "state.terminated").is_some() && int(c, "state.terminated.exitCode", 1) == 0 {
            continue;
        }
        reason = match (terminated_reason(c), waiting_reason(c)) {
            (Some(t), _) => format!("Init:{t}"),
            (None, w) if !w.is_empty() && w != "PodInitializing" => format!("Init:{w}"),
            _ => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }
    if !initializing {
        restarts = 0;
        last_restart = None;
        let mut running = false;
        for c in init_statuses.iter().filter(|c| sidecar(text(c, "name"))) {
            restarts += int(c, "restartCount", 0);
            last_restart = later(last_restart, c);
        }
        for c in list(p, "status.containerStatuses").iter().rev() {
            restarts += int(c, "restartCount", 0);
            last_restart = later(last_restart, c);
            if !waiting_reason(c).is_empty() {
                reason = waiting_reason(c).to_string();
            } else if let Some(t) = terminated_reason(c) {
                reason = t;
            } else if at(c, "state.running").is_some() && at(c, "ready") == Some(&json!(true)) {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            let pod_ready = list(p, "status.conditions")
                .iter()
                .any(|c| text(c, "type") == "Ready" && text(c, "status") == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    if at(p, "metadata.deletionTimestamp").is_some() {
        reason = if text(p, "status.reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let restarts = match last_restart {
        Some(t) => format!("{restarts} ({} ago)", since(&t.to_string(), now)),
        None => restarts.to_string(),
    };
    let gates = list(p, "spec.readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = list(p, "status.conditions");
        let met = gates
            .iter()
            .filter(|g| {
                conditions.iter().any(|c| {
                    text(c, "type") == text(g, "conditionType") && text(c, "status") == "True"
                })
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        json!(text(p, "metadata.name")),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        json!(since(text(p, "metadata.creationTimestamp"), now)),
        json!(or_none(text(p, "status.podIP"))),
        json!(or_none(text(p, "spec.nodeName"))),
        json!(or_none(text(p, "status.nominatedNodeName"))),
        json!(gates),
    ]
}
