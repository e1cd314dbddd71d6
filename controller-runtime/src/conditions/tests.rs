//! The condition helpers against apimachinery's `meta` rules.

use k8s_openapi::api::apps::v1::Deployment;

use super::*;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

fn types(conditions: &[Condition]) -> Vec<&str> {
    conditions.iter().map(|c| c.type_.as_str()).collect()
}

#[test]
fn a_new_condition_is_appended_with_the_time_set() {
    let mut conds = vec![condition("A", true, "R", "")];
    conds[0].last_transition_time = Time(at(10));
    assert!(conds.set_condition_at(condition("B", false, "Why", "msg"), at(100)));
    assert_eq!(types(&conds), ["A", "B"]);
    let b = conds.find_condition("B").unwrap();
    assert_eq!(b.last_transition_time, Time(at(100)));
    assert_eq!((b.status.as_str(), b.reason.as_str()), ("False", "Why"));
    assert_eq!(b.message, "msg");
}

#[test]
fn a_new_condition_keeps_a_time_it_was_given() {
    let mut conds: Vec<Condition> = Vec::new();
    let mut c = condition("A", true, "R", "");
    c.last_transition_time = Time(at(42));
    assert!(conds.set_condition_at(c, at(100)));
    assert_eq!(conds[0].last_transition_time, Time(at(42)));
}

#[test]
fn the_transition_time_changes_only_when_the_status_changes() {
    let mut conds: Vec<Condition> = Vec::new();
    conds.set_condition_at(condition("Ready", false, "Starting", "0/2"), at(100));

    // Reason, message and observedGeneration change; status does not.
    let update = condition("Ready", false, "Scaling", "1/2").observed_generation(Some(3));
    assert!(conds.set_condition_at(update, at(200)));
    let ready = conds.find_condition("Ready").unwrap();
    assert_eq!(ready.last_transition_time, Time(at(100)));
    assert_eq!(
        (ready.reason.as_str(), ready.message.as_str()),
        ("Scaling", "1/2")
    );
    assert_eq!(ready.observed_generation, Some(3));

    // The status changes: the time moves to now.
    let update = condition("Ready", true, "Scaling", "1/2").observed_generation(Some(3));
    assert!(conds.set_condition_at(update, at(300)));
    assert_eq!(conds[0].last_transition_time, Time(at(300)));
    assert_eq!(conds[0].status, "True");

    // A status change with an explicit time takes that time.
    let mut update = condition("Ready", false, "Lost", "").observed_generation(Some(3));
    update.last_transition_time = Time(at(250));
    assert!(conds.set_condition_at(update, at(400)));
    assert_eq!(conds[0].last_transition_time, Time(at(250)));
}

#[test]
fn an_explicit_time_without_a_status_change_is_ignored() {
    let mut conds: Vec<Condition> = Vec::new();
    conds.set_condition_at(condition("Ready", true, "Up", ""), at(100));
    let mut same = condition("Ready", true, "Up", "");
    same.last_transition_time = Time(at(999));
    assert!(!conds.set_condition_at(same, at(500)));
    assert_eq!(conds[0].last_transition_time, Time(at(100)));
}

#[test]
fn setting_the_same_condition_again_reports_no_change() {
    let mut conds: Vec<Condition> = Vec::new();
    let c = || condition("Ready", true, "Up", "fine").observed_generation(Some(1));
    assert!(conds.set_condition_at(c(), at(100)));
    let before = conds.clone();
    assert!(!conds.set_condition_at(c(), at(200)));
    assert_eq!(conds, before);
}

#[test]
fn each_field_change_alone_is_reported() {
    let base = || condition("Ready", true, "Up", "fine").observed_generation(Some(1));
    let variants = [
        condition("Ready", false, "Up", "fine").observed_generation(Some(1)),
        condition("Ready", true, "Other", "fine").observed_generation(Some(1)),
        condition("Ready", true, "Up", "other").observed_generation(Some(1)),
        condition("Ready", true, "Up", "fine").observed_generation(Some(2)),
        condition("Ready", true, "Up", "fine"),
    ];
    for variant in variants {
        let mut conds: Vec<Condition> = Vec::new();
        conds.set_condition_at(base(), at(100));
        assert!(
            conds.set_condition_at(variant.clone(), at(200)),
            "{variant:?}"
        );
    }
}

#[test]
fn removing_a_condition_keeps_the_order_of_the_rest() {
    let mut conds: Vec<Condition> = Vec::new();
    for t in ["A", "B", "C", "D"] {
        conds.set_condition_at(condition(t, true, "R", ""), at(1));
    }
    assert!(conds.remove_condition("B"));
    assert_eq!(types(&conds), ["A", "C", "D"]);
    assert!(!conds.remove_condition("B"));
    assert_eq!(types(&conds), ["A", "C", "D"]);
}

#[test]
fn find_and_status_checks() {
    let mut conds: Vec<Condition> = Vec::new();
    conds.set_condition_at(condition("Ready", true, "R", ""), at(1));
    conds.set_condition_at(condition("Degraded", false, "R", ""), at(1));
    conds.set_condition_at(
        condition("Progressing", ConditionStatus::Unknown, "R", ""),
        at(1),
    );
    assert!(conds.is_condition_true("Ready"));
    assert!(!conds.is_condition_false("Ready"));
    assert!(conds.is_condition_false("Degraded"));
    assert!(!conds.is_condition_true("Progressing"));
    assert!(!conds.is_condition_false("Progressing"));
    assert!(conds.is_condition_present_and_equal("Progressing", ConditionStatus::Unknown));
    assert!(!conds.is_condition_true("Missing"));
    assert!(!conds.is_condition_false("Missing"));
    assert!(conds.find_condition("Missing").is_none());
}

#[test]
fn an_optional_list_is_created_on_first_set_and_empty_reads_as_none() {
    let mut conds: Option<Vec<Condition>> = None;
    assert!(conds.conditions().is_empty());
    assert!(!conds.remove_condition("Ready"));
    assert!(conds.is_none(), "removing from nothing creates nothing");
    assert!(conds.set_condition_at(condition("Ready", true, "R", ""), at(5)));
    assert_eq!(conds.as_deref().map(types), Some(vec!["Ready"]));
    assert!(conds.remove_condition("Ready"));
    assert_eq!(conds, Some(Vec::new()));
}

#[test]
fn the_clock_is_truncated_to_seconds_as_on_the_wire() {
    let mut conds: Vec<Condition> = Vec::new();
    conds.set_condition(condition("Ready", true, "R", ""));
    let t = &conds[0].last_transition_time;
    assert_eq!(t.0.subsec_nanosecond(), 0);
    assert!(t.0 > UNSET_TRANSITION_TIME);
    // What serializes and reads back compares equal.
    let json = serde_json::to_string(&conds[0]).unwrap();
    let back: Condition = serde_json::from_str(&json).unwrap();
    assert_eq!(back, conds[0]);
}

#[test]
fn observed_generation_helpers() {
    let mut d = Deployment::default();
    assert_eq!(observed_generation(&d), None);
    assert!(is_generation_observed(&d, None));
    d.metadata.generation = Some(5);
    assert_eq!(observed_generation(&d), Some(5));
    assert!(!is_generation_observed(&d, Some(4)));
    assert!(is_generation_observed(&d, Some(5)));
    assert!(is_generation_observed(&d, Some(6)));
}
