//! Object metadata rules every kind shares, as the API server's
//! `ValidateObjectMeta` and `ValidateObjectMetaUpdate` apply them: label keys
//! and annotation keys are qualified names (an optional DNS-1123 subdomain
//! prefix and `/`, then at most 63 alphanumerics, `-`, `_`, `.`), label
//! values are empty or such a name, annotations total at most 256 KiB;
//! finalizers are strings. On update `uid` may be omitted but not changed,
//! and `deletionTimestamp`/`deletionGracePeriodSeconds` are set only by
//! DELETE (422 `field is immutable`).

use crate::error::{ApiError, Cause};
use crate::resources::registry::ResourceInfo;
use serde_json::Value;

/// Total bytes of annotation keys and values an object may carry.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

const QUALIFIED_NAME: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Why `key` is not a qualified name, or None.
pub fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if let Some(why) = super::name_problem(p, crate::resources::registry::NameRule::Subdomain) {
            return Some(format!("prefix part {why}"));
        }
    }
    if name.is_empty() {
        return Some(format!("name part must be non-empty; {QUALIFIED_NAME}"));
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    (!is_name_part(name)).then(|| format!("name part {QUALIFIED_NAME}"))
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

fn check_labels(m: &serde_json::Map<String, Value>, causes: &mut Vec<Cause>) {
    for (k, v) in m {
        if let Some(p) = qualified_name_problem(k) {
            causes.push(cause(
                "FieldValueInvalid",
                "metadata.labels",
                format!("Invalid value: {k:?}: {p}"),
            ));
        }
        match v.as_str() {
            Some(s) if s.is_empty() || is_name_part(s) => {}
            Some(s) => causes.push(cause(
                "FieldValueInvalid",
                "metadata.labels",
                format!("Invalid value: {s:?}: {LABEL_VALUE}"),
            )),
            None => causes.push(cause(
                "FieldValueTypeInvalid",
                &format!("metadata.labels.{k}"),
                "Invalid value: must be a string".into(),
            )),
        }
    }
}

fn check_annotations(m: &serde_json::Map<String, Value>, causes: &mut Vec<Cause>) {
    let mut total = 0usize;
    for (k, v) in m {
        if let Some(p) = qualified_name_problem(&k.to_ascii_lowercase()) {
            causes.push(cause(
                "FieldValueInvalid",
                "metadata.annotations",
                format!("Invalid value: {k:?}: {p}"),
            ));
        }
        match v.as_str() {
            Some(s) => total += k.len() + s.len(),
            None => causes.push(cause(
                "FieldValueTypeInvalid",
                &format!("metadata.annotations.{k}"),
                "Invalid value: must be a string".into(),
            )),
        }
    }
    if total > MAX_ANNOTATIONS_BYTES {
        causes.push(cause(
            "FieldValueTooLong",
            "metadata.annotations",
            format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"),
        ));
    }
}

/// Check labels, annotations and finalizers (422 listing every problem).
pub fn check_metadata(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let mut causes = Vec::new();
    for field in ["labels", "annotations"] {
        match &obj["metadata"][field] {
            Value::Null => {}
            Value::Object(m) if field == "labels" => check_labels(m, &mut causes),
            Value::Object(m) => check_annotations(m, &mut causes),
            _ => causes.push(cause(
                "FieldValueTypeInvalid",
                &format!("metadata.{field}"),
                "Invalid value: must be a map of strings".into(),
            )),
        }
    }
    match &obj["metadata"]["finalizers"] {
        Value::Null => {}
        Value::Array(a) if a.iter().all(Value::is_string) => {}
        _ => causes.push(cause(
            "FieldValueTypeInvalid",
            "metadata.finalizers",
            "Invalid value: must be a list of strings".into(),
        )),
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_causes(&info.kind, name, causes))
    }
}

/// On update: a `uid`, `deletionTimestamp` or `deletionGracePeriodSeconds`
/// in the new object that differs from the stored one is 422 (an omitted
/// one keeps the stored value; `deletionTimestamp` already set by DELETE is
/// kept whatever the update says).
pub fn check_immutable(info: &ResourceInfo, old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = old["metadata"]["name"].as_str().unwrap_or("");
    let mut causes = Vec::new();
    let deleting = !old["metadata"]["deletionTimestamp"].is_null();
    for f in ["uid", "deletionTimestamp", "deletionGracePeriodSeconds"] {
        let sent = &new["metadata"][f];
        let omitted = sent.is_null() || sent.as_str() == Some("");
        if omitted || (deleting && f != "uid") || *sent == old["metadata"][f] {
            continue;
        }
        causes.push(cause(
            "FieldValueInvalid",
            &format!("metadata.{f}"),
            format!("Invalid value: {sent}: field is immutable"),
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid_causes(&info.kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::registry::Registry;
    use serde_json::json;

    fn cm() -> std::sync::Arc<ResourceInfo> {
        Registry::with_builtins()
            .get("", "v1", "configmaps")
            .unwrap()
    }

    #[test]
    fn qualified_names() {
        for ok in ["app", "example.com/App_1", "a.b-c", "k8s.io/x"] {
            assert!(qualified_name_problem(ok).is_none(), "{ok}");
        }
        for bad in [
            "-bad/key/x",
            "/x",
            "a/",
            "Example.com/x",
            "a b",
            "x-",
            &"a".repeat(64),
        ] {
            assert!(qualified_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn labels_and_annotations_are_checked_together() {
        let obj = json!({"metadata": {"name": "a",
            "labels": {"-bad/key/x": "v", "ok": "-bad-", "n": 1},
            "annotations": {"Example.COM/Note": "fine", "bad key": "x"}}});
        let e = check_metadata(&cm(), &obj).unwrap_err();
        assert_eq!(e.code, 422);
        let fields: Vec<&str> = e.causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "metadata.labels",
                "metadata.labels.n",
                "metadata.labels",
                "metadata.annotations"
            ]
        );
    }

    #[test]
    fn annotations_are_bounded_in_total() {
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES / 2);
        let ok = json!({"metadata": {"name": "a", "annotations": {"a": big}}});
        check_metadata(&cm(), &ok).unwrap();
        let too_big = json!({"metadata": {"name": "a", "annotations": {"a": big, "b": big}}});
        let e = check_metadata(&cm(), &too_big).unwrap_err();
        assert_eq!(e.causes[0].reason, "FieldValueTooLong");
    }

    #[test]
    fn system_fields_are_immutable() {
        let old = json!({"metadata": {"name": "a", "uid": "u1"}});
        check_immutable(&cm(), &old, &json!({"metadata": {"name": "a"}})).unwrap();
        check_immutable(&cm(), &old, &json!({"metadata": {"uid": "u1"}})).unwrap();
        let e = check_immutable(&cm(), &old, &json!({"metadata": {"uid": "u2"}})).unwrap_err();
        assert_eq!(e.causes[0].field, "metadata.uid");
        assert!(e.message.contains("field is immutable"));
        let e = check_immutable(
            &cm(),
            &old,
            &json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z"}}),
        )
        .unwrap_err();
        assert_eq!(e.causes[0].field, "metadata.deletionTimestamp");
        let deleting =
            json!({"metadata": {"uid": "u1", "deletionTimestamp": "2021-01-01T00:00:00Z"}});
        check_immutable(
            &cm(),
            &deleting,
            &json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z"}}),
        )
        .unwrap();
    }
}
