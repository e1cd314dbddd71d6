//! The protobuf targets (issues 35 and 46), read from the `protobuf`
//! scenario's records at its largest size: client CPU per object against
//! the protobuf decode floor and kube-runtime's, bytes on the wire, retained heap and the
//! wall-clock sync against our JSON path, and CPU per watch event.

use super::{Session, find, number};

/// The largest size the `protobuf` scenario ran (the first number of its
/// case names).
fn largest(session: &Session, what: &str) -> Option<usize> {
    session
        .records
        .iter()
        .filter(|r| r.scenario == "protobuf" && r.case.contains(what))
        .filter_map(|r| r.case.split(' ').next()?.parse::<usize>().ok())
        .max()
}

/// The median of `metric` for our side (`side` 0), kube-runtime's (1) or
/// the floor (2).
fn at(session: &Session, case: &str, metric: &str, side: usize) -> Option<f64> {
    find(session, "protobuf", case, metric, side)
}

const CPU: &str = "client CPU per object";

/// The protobuf targets' lines; see the module documentation.
pub(super) fn targets(session: &Session, line: &mut impl FnMut(&str, &str, String, Option<bool>)) {
    if let Some(n) = largest(session, " ConfigMaps, ") {
        let (pb, json) = (
            format!("{n} ConfigMaps, protobuf"),
            format!("{n} ConfigMaps, JSON"),
        );
        // The floor: the same pages decoded in memory by the same decoder,
        // the floor side of the protobuf case's CPU record.
        if let (Some(p), Some(k)) = (at(session, &pb, CPU, 0), at(session, &pb, CPU, 1)) {
            let target = format!(
                "client CPU per object ≤ 3 × the protobuf decode floor and ≤ 0.35 × kube-runtime's ({n} ConfigMaps, managedFields stripped)"
            );
            match at(session, &pb, CPU, 2) {
                Some(f) => line(
                    "protobuf-cpu-stripped",
                    &target,
                    format!(
                        "{} vs floor {} ({:.2} ×), kube-runtime {} ({:.2} ×) µs",
                        number(p),
                        number(f),
                        p / f,
                        number(k),
                        p / k
                    ),
                    Some(p <= 3.0 * f && p <= 0.35 * k),
                ),
                None => line(
                    "protobuf-cpu-stripped",
                    &target,
                    format!(
                        "{} vs kube-runtime {} µs ({:.2} ×); no floor in this session",
                        number(p),
                        number(k),
                        p / k
                    ),
                    None,
                ),
            }
        }
        let kept = |enc: &str| format!("{n} ConfigMaps, managedFields kept, {enc}");
        if let (Some(p), Some(j)) = (
            at(session, &kept("protobuf"), CPU, 0),
            at(session, &kept("JSON"), CPU, 0),
        ) {
            line(
                "protobuf-cpu-kept",
                &format!(
                    "client CPU per object ≤ 0.75 × our JSON path's ({n} ConfigMaps, managedFields kept)"
                ),
                format!("{} vs {} µs: {:.2} ×", number(p), number(j), p / j),
                Some(p <= 0.75 * j),
            );
        }
        same_or_better(session, line, "ConfigMaps", &pb, &json);
    }
    if let Some(n) = largest(session, " Pods, ") {
        let (pb, json) = (format!("{n} Pods, protobuf"), format!("{n} Pods, JSON"));
        if let (Some(p), Some(k)) = (at(session, &pb, CPU, 0), at(session, &pb, CPU, 1)) {
            line(
                "protobuf-pods-cpu",
                &format!("client CPU per object ≤ 0.3 × kube-runtime's ({n} Pods)"),
                format!("{} vs {} µs: {:.2} ×", number(p), number(k), p / k),
                Some(p <= 0.3 * k),
            );
        }
        let bytes = "bytes on the wire per object";
        if let (Some(p), Some(j)) = (at(session, &pb, bytes, 0), at(session, &json, bytes, 0)) {
            line(
                "protobuf-pods-bytes",
                &format!("bytes on the wire per object ≤ 0.7 × JSON's ({n} Pods)"),
                format!("{} vs {} B: {:.2} ×", number(p), number(j), p / j),
                Some(p <= 0.7 * j),
            );
        }
        same_or_better(session, line, "Pods", &pb, &json);
    }
    if let Some(n) = largest(session, " watch events, ") {
        let pb = format!("{n} ConfigMap watch events, protobuf");
        let per_event = "client CPU per event";
        if let (Some(p), Some(k)) = (
            at(session, &pb, per_event, 0),
            at(session, &pb, per_event, 1),
        ) {
            line(
                "protobuf-watch",
                &format!("client CPU per watch event ≤ 0.5 × kube-runtime's ({n} events)"),
                format!("{} vs {} µs: {:.2} ×", number(p), number(k), p / k),
                Some(p <= 0.5 * k),
            );
        }
    }
}

/// Retained heap within 5 % of our JSON path's, and wall-clock sync no
/// slower than it, for one kind.
fn same_or_better(
    session: &Session,
    line: &mut impl FnMut(&str, &str, String, Option<bool>),
    kind: &str,
    pb: &str,
    json: &str,
) {
    let heap = "retained heap per object";
    if let (Some(p), Some(j)) = (at(session, pb, heap, 0), at(session, json, heap, 0)) {
        line(
            &format!("protobuf-heap-{}", kind.to_lowercase()),
            &format!("retained heap per object ≤ 1.05 × our JSON path's ({pb})"),
            format!("{} vs {} B: {:.2} ×", number(p), number(j), p / j),
            Some(p <= 1.05 * j),
        );
    }
    let time = "time to synced";
    if let (Some(p), Some(j)) = (at(session, pb, time, 0), at(session, json, time, 0)) {
        line(
            &format!("protobuf-time-{}", kind.to_lowercase()),
            &format!("wall-clock sync ≤ our JSON path's ({pb})"),
            format!("{} vs {} ms: {:.2} ×", number(p), number(j), p / j),
            Some(p <= j),
        );
    }
}

/// Every protobuf target's key (each needs a reason in the template).
#[cfg(test)]
pub(super) const KEYS: [&str; 9] = [
    "protobuf-cpu-stripped",
    "protobuf-cpu-kept",
    "protobuf-heap-configmaps",
    "protobuf-time-configmaps",
    "protobuf-pods-cpu",
    "protobuf-pods-bytes",
    "protobuf-heap-pods",
    "protobuf-time-pods",
    "protobuf-watch",
];
