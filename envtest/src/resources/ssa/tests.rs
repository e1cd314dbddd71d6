use super::*;
use crate::resources::registry::Registry;
use serde_json::json;
use std::sync::Arc;

fn deployments() -> ResourceInfo {
    let info = Registry::with_builtins().get("apps", "v1", "deployments");
    (*info.expect("deployments are built in")).clone()
}

fn configmaps() -> ResourceInfo {
    let info = Registry::with_builtins().get("", "v1", "configmaps");
    (*info.expect("configmaps are built in")).clone()
}

/// A custom resource whose `status.conditions` is a map-list by `type`,
/// `spec.tags` a set, `spec.labels` a granular map and `spec.sel` atomic.
fn gadgets() -> ResourceInfo {
    let mut info = configmaps();
    info.custom = true;
    info.group = "example.com".into();
    info.kind = "Gadget".into();
    info.schema = Some(Arc::new(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "sel": {"type": "object", "x-kubernetes-map-type": "atomic",
                "additionalProperties": {"type": "string"}}}},
        "status": {"type": "object", "properties": {
            "conditions": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "properties": {
                    "type": {"type": "string"}, "status": {"type": "string"},
                    "reason": {"type": "string"}}}}}}}})));
    info
}

fn cfg(replicas: i64, with_label: bool) -> Value {
    let mut c = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": replicas}});
    if with_label {
        c["metadata"]["labels"] = json!({"team": "a"});
    }
    c
}

fn condition(t: &str, status: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "status": {"conditions": [{"type": t, "status": status}]}})
}

fn managers(obj: &Value) -> Vec<(String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

#[test]
fn apply_tracks_ownership_and_conflicts() {
    let info = deployments();
    let o = apply(&info, None, &cfg(1, true), "alice", "", false).unwrap();
    assert_eq!(o["spec"]["replicas"], 1);
    assert_eq!(o["kind"], "Deployment");
    assert_eq!(
        o["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:replicas"],
        json!({})
    );
    // Bob setting the same value shares ownership; a different value conflicts.
    let o = apply(&info, Some(&o), &cfg(1, false), "bob", "", false).unwrap();
    let e = apply(&info, Some(&o), &cfg(2, false), "bob", "", false).unwrap_err();
    assert_eq!(e.code, 409);
    assert_eq!(e.causes[0].field, ".spec.replicas");
    assert_eq!(
        e.message,
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
    );
    let o = apply(&info, Some(&o), &cfg(2, false), "bob", "", true).unwrap();
    assert_eq!(o["spec"]["replicas"], 2);
    // Alice drops her label: it is removed (nobody else owns it).
    let o = apply(
        &info,
        Some(&o),
        &json!({"metadata": {"name": "d"}}),
        "alice",
        "",
        false,
    )
    .unwrap();
    assert!(
        o["metadata"]
            .get("labels")
            .is_none_or(|l| l.get("team").is_none())
    );
    assert_eq!(o["spec"]["replicas"], 2, "bob still owns replicas");
}

#[test]
fn updates_take_over_changed_fields() {
    let info = deployments();
    let a = apply(&info, None, &cfg(1, false), "alice", "", false).unwrap();
    let mut edited = a.clone();
    edited["spec"]["replicas"] = json!(3);
    record_update(&info, Some(&a), &mut edited, "editor", "");
    let mf = edited["metadata"]["managedFields"].as_array().unwrap();
    assert!(
        mf.iter()
            .any(|e| e["manager"] == "editor" && e["operation"] == "Update")
    );
    let e = apply(&info, Some(&edited), &cfg(1, false), "alice", "", false).unwrap_err();
    assert!(
        e.message.starts_with(
            "Apply failed with 1 conflict: conflict with \"editor\" using apps/v1 at "
        ),
        "{}",
        e.message
    );
    let mut same = edited.clone();
    record_update(&info, Some(&edited), &mut same, "other", "");
    assert_eq!(same, edited, "a write that changes nothing records nothing");
}

#[test]
fn reapplying_the_same_config_is_stable() {
    let info = deployments();
    let a = apply(&info, None, &cfg(1, true), "alice", "", false).unwrap();
    let b = apply(&info, Some(&a), &cfg(1, true), "alice", "", false).unwrap();
    assert_eq!(a, b);
}

#[test]
fn managers_of_different_list_map_keys_merge_and_own_their_items() {
    let info = gadgets();
    let o = apply(
        &info,
        None,
        &condition("Ready", "True"),
        "ready-ctl",
        "",
        false,
    )
    .unwrap();
    let o = apply(
        &info,
        Some(&o),
        &condition("Synced", "False"),
        "sync-ctl",
        "",
        false,
    )
    .unwrap();
    assert_eq!(
        o["status"]["conditions"],
        json!([{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}])
    );
    let mf = managers(&o);
    assert_eq!(
        mf[1],
        (
            "sync-ctl".to_string(),
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Synced\"}":
                {".": {}, "f:status": {}, "f:type": {}}}}})
        )
    );
    // The same key with another value conflicts, per item path.
    let e = apply(
        &info,
        Some(&o),
        &condition("Ready", "False"),
        "sync-ctl",
        "",
        false,
    )
    .unwrap_err();
    assert_eq!(e.causes.len(), 1);
    assert_eq!(
        e.causes[0].field,
        ".status.conditions[type=\"Ready\"].status"
    );
    // Force takes that one item's field only.
    let both = json!({"metadata": {"name": "g"}, "status": {"conditions": [
        {"type": "Synced", "status": "False"}, {"type": "Ready", "status": "False"}]}});
    let o = apply(&info, Some(&o), &both, "sync-ctl", "", true).unwrap();
    // Items both lists have come in the configuration's order.
    assert_eq!(
        o["status"]["conditions"],
        json!([{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "False"}])
    );
    let mf = managers(&o);
    let ready = &mf[0];
    assert_eq!(ready.0, "ready-ctl");
    assert_eq!(
        ready.1,
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:type": {}}}}}),
        "ready-ctl keeps the item and its key, loses only the forced field"
    );
    // Dropping an item removes it only when nobody else owns it.
    let o = apply(
        &info,
        Some(&o),
        &condition("Synced", "False"),
        "sync-ctl",
        "",
        false,
    )
    .unwrap();
    assert_eq!(
        o["status"]["conditions"].as_array().unwrap().len(),
        2,
        "ready-ctl still owns Ready"
    );
    assert_eq!(
        o["status"]["conditions"],
        json!([{"type": "Synced", "status": "False"}, {"type": "Ready"}]),
        "Ready's status was only sync-ctl's"
    );
    let o = apply(
        &info,
        Some(&o),
        &json!({"metadata": {"name": "g"}}),
        "ready-ctl",
        "",
        false,
    )
    .unwrap();
    let o = apply(
        &info,
        Some(&o),
        &json!({"metadata": {"name": "g"}}),
        "sync-ctl",
        "",
        false,
    )
    .unwrap();
    assert_eq!(o["status"]["conditions"], json!([]));
}

#[test]
fn sets_granular_maps_and_atomic_maps() {
    let info = gadgets();
    let a = json!({"metadata": {"name": "g"}, "spec": {"tags": ["a", "b"], "labels": {"x": "1"}, "sel": {"k": "v"}}});
    let o = apply(&info, None, &a, "alice", "", false).unwrap();
    let b = json!({"metadata": {"name": "g"}, "spec": {"tags": ["c", "b"], "labels": {"y": "2"}}});
    let o = apply(&info, Some(&o), &b, "bob", "", false).unwrap();
    assert_eq!(o["spec"]["tags"], json!(["a", "c", "b"]));
    assert_eq!(o["spec"]["labels"], json!({"x": "1", "y": "2"}));
    let mf = managers(&o);
    assert_eq!(
        mf[1].1["f:spec"]["f:tags"],
        json!({"v:\"b\"": {}, "v:\"c\"": {}})
    );
    // An atomic map is one field: another value is a conflict on the map.
    let c = json!({"metadata": {"name": "g"}, "spec": {"sel": {"k": "w"}}});
    let e = apply(&info, Some(&o), &c, "bob", "", false).unwrap_err();
    assert_eq!(e.causes[0].field, ".spec.sel");
    // alice drops "a" and "b": "b" stays (bob owns it too).
    let a2 = json!({"metadata": {"name": "g"}, "spec": {"labels": {"x": "1"}, "sel": {"k": "v"}}});
    let o = apply(&info, Some(&o), &a2, "alice", "", false).unwrap();
    assert_eq!(o["spec"]["tags"], json!(["c", "b"]));
}

#[test]
fn built_in_containers_merge_by_name_and_ports_by_port_and_protocol() {
    let info = deployments();
    let dep = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": containers}}}})
    };
    let o = apply(
        &info,
        None,
        &dep(json!([{"name": "app", "image": "app:1", "ports": [{"containerPort": 80}]}])),
        "alice",
        "",
        false,
    )
    .unwrap();
    let o = apply(
        &info,
        Some(&o),
        &dep(json!([{"name": "sidecar", "image": "proxy:1"}])),
        "injector",
        "",
        false,
    )
    .unwrap();
    let names: Vec<&str> = o["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "sidecar"]);
    let alice = &managers(&o)[0].1;
    let app = &alice["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
    assert_eq!(app["f:image"], json!({}));
    assert_eq!(
        app["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"],
        json!({".": {}, "f:containerPort": {}})
    );
    let e = apply(
        &info,
        Some(&o),
        &dep(json!([{"name": "app", "image": "app:2"}])),
        "injector",
        "",
        false,
    )
    .unwrap_err();
    assert_eq!(
        e.causes[0].field,
        ".spec.template.spec.containers[name=\"app\"].image"
    );
}

#[test]
fn conflicts_with_several_managers_list_them_as_the_api_server_does() {
    let info = configmaps();
    let base = |v: &str, w: &str| json!({"metadata": {"name": "c"}, "data": {"a": v, "b": w}});
    let o = apply(
        &info,
        None,
        &json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
        "m1",
        "",
        false,
    )
    .unwrap();
    let o = apply(
        &info,
        Some(&o),
        &json!({"metadata": {"name": "c"}, "data": {"b": "1"}}),
        "m2",
        "",
        false,
    )
    .unwrap();
    let e = apply(&info, Some(&o), &base("2", "2"), "m3", "", false).unwrap_err();
    assert_eq!(
        e.message,
        "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .data.a\nconflicts with \"m2\":\n- .data.b"
    );
}

#[test]
fn status_applies_own_only_status_and_updates_are_per_api_version() {
    let info = gadgets();
    let mut info = info;
    info.status = true;
    let live = apply(
        &info,
        None,
        &json!({"metadata": {"name": "g"}, "spec": {"tags": ["a"]}}),
        "owner",
        "",
        false,
    )
    .unwrap();
    let cfg = json!({"metadata": {"name": "g", "labels": {"x": "y"}}, "spec": {"tags": ["b"]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let o = apply(&info, Some(&live), &cfg, "ctl", "status", false).unwrap();
    assert_eq!(
        o["spec"]["tags"],
        json!(["a"]),
        "spec is not applied through /status"
    );
    assert!(o["metadata"].get("labels").is_none());
    let ctl = o["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "ctl")
        .unwrap();
    assert_eq!(ctl["subresource"], "status");
    assert_eq!(
        ctl["fieldsV1"],
        json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
    );
    // Through the object, status is neither applied nor owned.
    let o2 = apply(
        &info,
        Some(&o),
        &json!({"metadata": {"name": "g"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        "other",
        "",
        false,
    )
    .unwrap();
    assert_eq!(o2["status"]["conditions"][0]["status"], "True");

    // An Update manager writing through another version is another manager.
    let mut v2 = info.clone();
    v2.version = "v2".into();
    let mut a = o2.clone();
    a["spec"]["tags"] = json!(["a", "c"]);
    record_update(&info, Some(&o2), &mut a, "editor", "");
    let mut b = a.clone();
    b["spec"]["tags"] = json!(["a", "c", "d"]);
    record_update(&v2, Some(&a), &mut b, "editor", "");
    let editors = b["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["manager"] == "editor")
        .count();
    assert_eq!(editors, 2);
}

mod props {
    use super::super::fieldset::{FieldSet, from_fields_v1, to_fields_v1};
    use proptest::prelude::*;

    fn element() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-c]{1,2}".prop_map(|s| format!("f:{s}")),
            "[a-c]".prop_map(|s| format!("k:{{\"name\":\"{s}\"}}")),
            "[a-c]".prop_map(|s| format!("v:\"{s}\"")),
        ]
    }

    proptest! {
        /// Any set of paths survives the FieldsV1 form and back.
        #[test]
        fn fields_v1_round_trips(paths in proptest::collection::vec(
            proptest::collection::vec(element(), 1..5), 0..12)) {
            let set: FieldSet = paths.into_iter().collect();
            prop_assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
        }
    }
}
