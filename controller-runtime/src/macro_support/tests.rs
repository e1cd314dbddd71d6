use serde_json::json;

use super::__private::{NoStatus, index_values};

#[test]
fn index_values_follow_fields_and_arrays() {
    let spec = json!({"owner": "web", "ports": [{"port": 80}, {"port": 443}], "on": true});
    assert_eq!(index_values(&spec, &["owner"]), ["web"]);
    assert_eq!(index_values(&spec, &["ports", "port"]), ["80", "443"]);
    assert_eq!(index_values(&spec, &["on"]), ["true"]);
    assert!(index_values(&spec, &["missing"]).is_empty());
    assert!(index_values(&json!({"owner": null}), &["owner"]).is_empty());
    assert!(index_values(&json!({"owner": {"a": 1}}), &["owner"]).is_empty());
}

#[test]
fn no_status_accepts_and_drops_anything() {
    let parsed: NoStatus = serde_json::from_value(json!({"phase": "Ready"})).unwrap();
    assert_eq!(serde_json::to_value(parsed).unwrap(), json!({}));
}
