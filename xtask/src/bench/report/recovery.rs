//! The sharding recovery target (issue 46), read from the `sharding`
//! scenario's recovery rows: in label mode, once the sharder's replica is
//! killed, every object it owned is reconciled by a survivor within 4 s
//! (the new sharder relabels them with bounded concurrency).

use super::{Session, find, number};

/// The keys of the targets' reasons in `templates/performance/targets.md`.
pub(super) const KEYS: [&str; 1] = ["sharding-recovery"];

/// The longest hand-over the target allows, in seconds.
const LIMIT_S: f64 = 4.0;

/// The recovery target's line; see the module documentation.
pub(super) fn targets(session: &Session, line: &mut impl FnMut(&str, &str, String, Option<bool>)) {
    let Some(case) = session
        .records
        .iter()
        .find(|r| {
            r.scenario == "sharding"
                && r.case.contains("replica killed")
                && r.case.contains("label mode")
        })
        .map(|r| r.case.as_str())
    else {
        return;
    };
    let at = |metric| find(session, "sharding", case, metric, 0);
    if let Some(took) = at("its objects all reconciled elsewhere") {
        let dropped = at("killed replica dropped from the ring")
            .map(|d| format!(" (dropped from the ring after {} s)", number(d)))
            .unwrap_or_default();
        line(
            KEYS[0],
            &format!("label-mode kill recovery ≤ {LIMIT_S} s ({case})"),
            format!("{} s{dropped}", number(took)),
            Some(took <= LIMIT_S),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_label_mode_hand_over_is_held_to_four_seconds() {
        let record = |case: &str, metric: &str, v: f64| {
            serde_json::json!({"scenario": "sharding", "case": case, "metric": metric,
                "unit": "s", "higher_is_better": false, "side": "informer-rs", "values": [v]})
        };
        let label = "100 objects, 3 replicas, the sharder's replica killed, label mode, 2 s lease";
        let filter =
            "100 objects, 3 replicas, the sharder's replica killed, filter mode, 2 s lease";
        let session = |took: f64| -> Session {
            serde_json::from_value(serde_json::json!({
                "quick": false, "runs": 1, "cpus": 2, "load_average": "",
                "records": [
                    record(filter, "its objects all reconciled elsewhere", 1.0),
                    record(label, "killed replica dropped from the ring", 2.1),
                    record(label, "its objects all reconciled elsewhere", took),
                ]
            }))
            .expect("a session")
        };
        let lines = |took| {
            let mut lines = Vec::new();
            targets(
                &session(took),
                &mut |_, target: &str, measured: String, met| {
                    lines.push((target.to_string(), measured, met));
                },
            );
            lines
        };
        let met = lines(3.5);
        assert_eq!(met.len(), 1, "{met:?}");
        assert!(met[0].0.contains("label mode"), "{met:?}");
        assert_eq!(met[0].1, "3.50 s (dropped from the ring after 2.10 s)");
        assert_eq!(met[0].2, Some(true));
        let missed = lines(14.1);
        assert_eq!(missed[0].1, "14.1 s (dropped from the ring after 2.10 s)");
        assert_eq!(missed[0].2, Some(false));
    }
}
