use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;

const F: &str = "example.com/cleanup";

fn cm(finalizers: Option<&[&str]>, deleting: bool) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some("c".into());
    c.metadata.namespace = Some("ns".into());
    c.metadata.resource_version = Some("7".into());
    c.metadata.finalizers = finalizers.map(|l| l.iter().map(|s| s.to_string()).collect());
    if deleting {
        c.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
    }
    c
}

fn apply(obj: &ConfigMap, patch: &json_patch::Patch) -> Result<ConfigMap, json_patch::PatchError> {
    let mut doc = serde_json::to_value(obj).unwrap();
    json_patch::patch(&mut doc, patch)?;
    Ok(serde_json::from_value(doc).unwrap())
}

#[test]
fn plan_covers_the_four_states() {
    assert_eq!(plan(&cm(None, false), F), Step::AddThenApply);
    assert_eq!(plan(&cm(Some(&[]), false), F), Step::AddThenApply);
    assert_eq!(plan(&cm(Some(&["other"]), false), F), Step::AddThenApply);
    assert_eq!(plan(&cm(Some(&[F]), false), F), Step::Apply);
    assert_eq!(
        plan(&cm(Some(&["other", F]), true), F),
        Step::CleanupThenRemove(1)
    );
    assert_eq!(plan(&cm(Some(&["other"]), true), F), Step::Nothing);
    assert_eq!(plan(&cm(None, true), F), Step::Nothing);
}

#[test]
fn add_patch_adds_to_missing_empty_or_existing_lists() {
    for start in [None, Some(&[][..]), Some(&["other"][..])] {
        let obj = cm(start, false);
        let out = apply(&obj, &add_patch(&obj, F)).unwrap();
        assert!(has_finalizer(&out, F), "{start:?}");
        if start == Some(&["other"][..]) {
            assert_eq!(out.metadata.finalizers.unwrap(), ["other", F]);
        }
    }
}

#[test]
fn add_patch_fails_on_a_changed_object() {
    let seen = cm(Some(&["other"]), false);
    let mut current = seen.clone();
    current.metadata.resource_version = Some("8".into());
    current.metadata.finalizers = Some(vec!["other".into(), "third".into()]);
    assert!(apply(&current, &add_patch(&seen, F)).is_err());
}

#[test]
fn remove_patch_removes_only_our_entry_and_fails_when_it_moved() {
    let obj = cm(Some(&["a", F, "b"]), true);
    let Step::CleanupThenRemove(i) = plan(&obj, F) else {
        panic!()
    };
    let out = apply(&obj, &remove_patch(i, F)).unwrap();
    assert_eq!(out.metadata.finalizers.unwrap(), ["a", "b"]);
    // Someone removed "a" meanwhile: our index is stale and the test fails
    // instead of removing "b".
    let moved = cm(Some(&[F, "b"]), true);
    assert!(apply(&moved, &remove_patch(i, F)).is_err());
    // An unrelated change (new resourceVersion) does not block removal.
    let mut touched = obj.clone();
    touched.metadata.resource_version = Some("99".into());
    assert!(apply(&touched, &remove_patch(i, F)).is_ok());
}

#[test]
fn conflict_classification() {
    use kube_core::Status;
    let err = |code| FinalizerError::<std::io::Error>::RemoveFinalizer {
        finalizer: F.into(),
        object: "c".into(),
        source: kube_client::Error::Api(Status::failure("x", "Conflict").with_code(code).boxed()),
    };
    assert!(err(409).is_conflict());
    assert!(err(422).is_conflict());
    assert!(!err(500).is_conflict());
    assert!(!FinalizerError::Apply(std::io::Error::other("x")).is_conflict());
    assert!(
        err(409)
            .to_string()
            .contains("removing finalizer example.com/cleanup from c")
    );
}

#[test]
fn terminal_errors_stay_visible_through_the_wrapper() {
    let e: FinalizerError<crate::terminal::TerminalError> =
        FinalizerError::Apply(crate::terminal::TerminalError::new("bad spec"));
    assert!(crate::terminal::is_terminal(&e));
}
