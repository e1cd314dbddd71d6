//! What the bench reports: one record per measured quantity, with the value
//! of every run, written as JSON for `cargo xtask bench` to summarise.

use serde::Serialize;

/// Which side a number belongs to.
pub const OURS: &str = "informer-rs";
/// The reference implementation.
pub const KUBE: &str = "kube-runtime";
/// The lower bound the scenario is compared with.
pub const FLOOR: &str = "floor";

/// One measured quantity for one side, over several runs.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Scenario id (`sync`, `watch`, ...).
    pub scenario: String,
    /// The case within the scenario (`10000 objects, managedFields kept`).
    pub case: String,
    /// What was measured (`sync time`).
    pub metric: String,
    /// Its unit (`ms`, `B/object`, `events/s`).
    pub unit: String,
    /// Whether more is better (throughputs) or less (times, bytes).
    pub higher_is_better: bool,
    /// `informer-rs`, `kube-runtime` or `floor`.
    pub side: String,
    /// One value per run.
    pub values: Vec<f64>,
}

/// Collects records as scenarios run.
#[derive(Debug, Default)]
pub struct Records(pub Vec<Record>);

/// The fixed part of a record, for pushing values side by side.
#[derive(Debug, Clone)]
pub struct Metric<'a> {
    /// Scenario id.
    pub scenario: &'a str,
    /// Case within it.
    pub case: &'a str,
    /// What was measured.
    pub metric: &'a str,
    /// Unit.
    pub unit: &'a str,
    /// Whether more is better.
    pub higher_is_better: bool,
}

impl Records {
    /// Appends `value` to the record of `metric` for `side`, creating it.
    pub fn push(&mut self, m: &Metric<'_>, side: &str, value: f64) {
        let found = self.0.iter_mut().find(|r| {
            r.scenario == m.scenario && r.case == m.case && r.metric == m.metric && r.side == side
        });
        match found {
            Some(r) => r.values.push(value),
            None => self.0.push(Record {
                scenario: m.scenario.into(),
                case: m.case.into(),
                metric: m.metric.into(),
                unit: m.unit.into(),
                higher_is_better: m.higher_is_better,
                side: side.into(),
                values: vec![value],
            }),
        }
    }
}
