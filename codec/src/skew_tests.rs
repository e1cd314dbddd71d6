//! Version skew: k8s-pb's messages are Kubernetes 1.35's; a kind whose
//! messages reach a field only the selected version's JSON has is read in
//! JSON, and `docs/protobuf.md`'s matrix says which.

use std::collections::BTreeSet;

/// The selected version's feature name.
#[allow(clippy::needless_return)] // one `return` per version, one compiled in
fn version() -> &'static str {
    k8s_openapi::k8s_if_1_33! { return "v1_33"; }
    k8s_openapi::k8s_if_1_34! { return "v1_34"; }
    k8s_openapi::k8s_if_1_35! { return "v1_35"; }
    k8s_openapi::k8s_if_1_36! { return "v1_36"; }
    k8s_openapi::k8s_if_1_37! { return "v1_37"; }
}

/// The listed kinds read in JSON under the selected version.
fn json_kinds() -> BTreeSet<&'static str> {
    crate::typed::listed()
        .into_iter()
        .filter(|(av, kind, _)| !crate::has_protobuf(av, kind))
        .map(|(_, kind, _)| kind)
        .collect()
}

#[test]
fn the_kinds_read_in_json_are_this_versions() {
    let workloads = [
        "CronJob",
        "DaemonSet",
        "Deployment",
        "Job",
        "Pod",
        "ReplicaSet",
        "StatefulSet",
    ];
    let expected: BTreeSet<&str> = match version() {
        "v1_36" => workloads.into(),
        "v1_37" => workloads
            .into_iter()
            .chain(["Node", "PersistentVolumeClaim"])
            .collect(),
        _ => BTreeSet::new(),
    };
    assert_eq!(json_kinds(), expected, "{}", version());
    // Each says why, and has neither codec nor typed decoder.
    for (av, kind, t) in crate::typed::listed() {
        let lost = crate::json_only_fields(av, kind);
        assert_eq!(lost.is_empty(), crate::has_protobuf(av, kind), "{kind}");
        assert_eq!(
            lost.is_empty(),
            crate::typed::has_typed(t).is_some(),
            "{kind}"
        );
        assert_eq!(
            lost.is_empty(),
            crate::has_protobuf(av, &format!("{kind}List"))
        );
    }
}

#[test]
fn a_pod_with_a_scheduling_group_is_read_in_json_from_1_36() {
    k8s_openapi::k8s_if_ge_1_36! {
        let lost = crate::json_only_fields("v1", "Pod");
        assert!(lost.contains(&"PodSpec.scheduling_group"), "{lost:?}");
        assert!(crate::Decoder::<k8s_openapi::api::core::v1::Pod>::new().is_none());
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "g"}}});
        assert!(matches!(crate::to_protobuf(&pod), Err(crate::CodecError::NotProtobuf(_))));
    }
    k8s_openapi::k8s_if_le_1_35! {
        assert!(crate::Decoder::<k8s_openapi::api::core::v1::Pod>::new().is_some());
    }
}

#[test]
fn the_docs_matrix_states_this_versions_kinds() {
    let doc = include_str!("../../docs/protobuf.md");
    let (_, section) = doc
        .split_once("## Kubernetes versions")
        .expect("docs/protobuf.md has the version matrix");
    let row = format!("| `{}` |", version());
    let line = section
        .lines()
        .find(|l| l.starts_with(&row))
        .unwrap_or_else(|| panic!("docs/protobuf.md has no row {row}"));
    let cell = line[row.len()..].split('|').next().unwrap_or("").trim();
    let documented: BTreeSet<&str> = match cell {
        "none" => BTreeSet::new(),
        kinds => kinds.split(", ").map(str::trim).collect(),
    };
    assert_eq!(documented, json_kinds(), "docs/protobuf.md, row {row}");
}
