//! The tables against the bridge and k8s-openapi.

use super::*;

/// The bridge tables of the selected version, as text.
fn bridge_tables() -> String {
    format!(
        "{}\n{}\n{}",
        include_str!("../bridge_tables/common.rs"),
        version_table(),
        // The lines written by hand (a CRD's schema, discovery documents).
        include_str!("../bridge.rs")
    )
}

#[allow(clippy::needless_return)] // one `return` per version, one compiled in
fn version_table() -> &'static str {
    k8s_openapi::k8s_if_1_33! { return include_str!("../bridge_tables/v1_33.rs"); }
    k8s_openapi::k8s_if_1_34! { return include_str!("../bridge_tables/v1_34.rs"); }
    k8s_openapi::k8s_if_1_35! { return include_str!("../bridge_tables/v1_35.rs"); }
    k8s_openapi::k8s_if_1_36! { return include_str!("../bridge_tables/v1_36.rs"); }
    k8s_openapi::k8s_if_1_37! { return include_str!("../bridge_tables/v1_37.rs"); }
}

/// Every `bridge!` line's k8s-openapi type and the k8s-openapi fields it
/// names (its own and its embedded messages'), each with its nesting.
pub(crate) fn bridged_fields() -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    for line in bridge_tables()
        .lines()
        .filter(|l| l.starts_with("bridge!("))
    {
        let rest = &line["bridge!(".len()..];
        let (oa, rest) = rest.split_once(" => ").unwrap_or_default();
        let fields = rest
            .split('(')
            .skip(1)
            .filter_map(|t| {
                let parts: Vec<&str> = t.split(',').map(str::trim).collect();
                // `(pb field, openapi field, mode)`; an embedded message's
                // `(pb field, path, [` has no mode.
                (parts.len() >= 3 && !parts[2].starts_with('[')).then(|| {
                    let mode = parts[2].split(')').next().unwrap_or("").to_string();
                    (parts[1].trim_start_matches("r#").to_string(), mode)
                })
            })
            .collect();
        out.push((oa.to_string(), fields));
    }
    out
}

#[test]
fn every_bridged_field_has_go_facts() {
    let bridged = bridged_fields();
    assert!(bridged.len() > 150, "{} bridge lines", bridged.len());
    let mut missing = Vec::new();
    for (oa, fields) in &bridged {
        let Some(s) = by_openapi(oa) else {
            missing.push(format!("{oa}: no Go struct"));
            continue;
        };
        for (f, _) in fields {
            if !s.fields.iter().any(|g| g.rust == f) {
                missing.push(format!("{oa}.{f}"));
            }
        }
    }
    assert!(missing.is_empty(), "bridged without Go facts: {missing:?}");
}

/// The nesting a JSON `Option` of a single value has by its Go facts (the
/// rule `gen_bridge.py` writes the tables by).
fn expected_mode(f: &GoField) -> &'static str {
    match (f.shape, f.zero_reads_absent()) {
        (Shape::Value, true) => "zopt",
        (Shape::Value, false) => "kopt",
        (_, true) if matches!(f.elem, Elem::Time | Elem::MicroTime | Elem::Byte) => "popt",
        _ => "opt",
    }
}

#[test]
fn every_optional_value_nests_by_its_go_facts() {
    let mut wrong = Vec::new();
    for (oa, fields) in bridged_fields() {
        let Some(s) = by_openapi(&oa) else { continue };
        for (f, mode) in fields {
            if !["opt", "zopt", "kopt", "popt"].contains(&mode.as_str()) {
                continue;
            }
            let Some(g) = s.fields.iter().find(|g| g.rust == f) else {
                continue;
            };
            if mode != expected_mode(g) {
                wrong.push(format!(
                    "{oa}.{f}: {mode}, Go facts say {}",
                    expected_mode(g)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn tables_are_sorted_and_keys_resolve() {
    for table in [COMMON, VERSION] {
        assert!(table.windows(2).all(|w| w[0].go < w[1].go));
    }
    for s in all() {
        assert_eq!(go_struct(s.go).map(|g| g.go), Some(s.go));
        for f in s.fields {
            if let Elem::Struct(k) = f.elem {
                assert!(go_struct(k).is_some(), "{}.{}: {k} missing", s.go, f.json);
            }
        }
    }
}

#[test]
fn known_facts_of_kubernetes_types() {
    let spec = go_struct("core/v1.PodSpec").unwrap();
    let f = |j| spec.field(j).unwrap();
    // `NodeName string json:"nodeName,omitempty"`
    assert_eq!(
        (f("nodeName").shape, f("nodeName").omitempty),
        (Shape::Value, true)
    );
    assert!(f("nodeName").zero_reads_absent());
    // `Containers []Container json:"containers"`
    assert_eq!(f("containers").shape, Shape::Slice);
    assert!(!f("containers").omitempty);
    assert_eq!(f("containers").elem, Elem::Struct("core/v1.Container"));
    // `Priority *int32`
    assert_eq!(f("priority").shape, Shape::Pointer);
    let deploy = go_struct("apps/v1.DeploymentSpec").unwrap();
    assert_eq!(deploy.field("replicas").unwrap().shape, Shape::Pointer);
    assert_eq!(
        deploy.field("template").unwrap().elem,
        Elem::Struct("core/v1.PodTemplateSpec")
    );
    let meta = go_kind("meta.k8s.io/v1", "ObjectMeta").unwrap();
    assert_eq!(meta.field("creationTimestamp").unwrap().elem, Elem::Time);
    assert!(meta.field("creationTimestamp").unwrap().zero_reads_absent());
    // An embedded struct's fields are flattened in, as JSON has them.
    let volume = go_struct("core/v1.Volume").unwrap();
    assert_eq!(volume.field("emptyDir").unwrap().via, "VolumeSource");
    assert_eq!(
        go_kind("v1", "Status").unwrap().openapi,
        "apimachinery::pkg::apis::meta::v1::Status"
    );
    assert_eq!(
        go_kind("rbac.authorization.k8s.io/v1", "Role").unwrap().go,
        "rbac/v1.Role"
    );
}
