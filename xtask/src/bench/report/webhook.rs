//! The webhook target (issue 46), read from the `webhook` scenario's
//! records: the framework's admission server answers at least 0.7 × the
//! reviews per second of a bare TLS echo server (the scenario's floor side)
//! at 8 and at 64 concurrent clients.

use super::{Session, find, number};

/// The keys of the targets' reasons in `templates/performance/targets.md`.
pub(super) const KEYS: [&str; 1] = ["webhook-echo"];

/// The client counts the target names.
const CLIENTS: [usize; 2] = [8, 64];

/// The webhook target's lines; see the module documentation.
pub(super) fn targets(session: &Session, line: &mut impl FnMut(&str, &str, String, Option<bool>)) {
    for clients in CLIENTS {
        let prefix = format!("{clients} clients, ");
        let Some(case) = session
            .records
            .iter()
            .find(|r| r.scenario == "webhook" && r.case.starts_with(&prefix))
            .map(|r| r.case.as_str())
        else {
            continue;
        };
        let rate = |side| find(session, "webhook", case, "reviews/s", side);
        if let (Some(ours), Some(echo)) = (rate(0), rate(2)) {
            line(
                KEYS[0],
                &format!("webhook reviews/s ≥ 0.7 × a bare TLS echo server's ({case})"),
                format!(
                    "{} vs echo {}: {:.2} ×",
                    number(ours),
                    number(echo),
                    ours / echo
                ),
                Some(ours >= 0.7 * echo),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_against_the_echo_side_at_each_client_count() {
        let record = |case: &str, side: &str, v: f64| {
            serde_json::json!({"scenario": "webhook", "case": case, "metric": "reviews/s",
                "unit": "reviews/s", "higher_is_better": true, "side": side, "values": [v]})
        };
        let session: Session = serde_json::from_value(serde_json::json!({
            "quick": false, "runs": 1, "cpus": 2, "load_average": "",
            "records": [
                record("1 clients, 100 reviews", "informer-rs", 1.0),
                record("1 clients, 100 reviews", "floor", 100.0),
                record("8 clients, 100 reviews", "informer-rs", 700.0),
                record("8 clients, 100 reviews", "floor", 1000.0),
                record("64 clients, 100 reviews", "informer-rs", 690.0),
                record("64 clients, 100 reviews", "floor", 1000.0),
            ]
        }))
        .expect("a session");
        let mut lines = Vec::new();
        targets(&session, &mut |_, target: &str, measured: String, met| {
            lines.push((target.to_string(), measured, met));
        });
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].0.contains("8 clients"), "{lines:?}");
        assert_eq!(lines[0].2, Some(true), "{lines:?}");
        assert!(lines[1].1.ends_with("0.69 ×"), "{lines:?}");
        assert_eq!(lines[1].2, Some(false), "{lines:?}");
    }
}
