//! CustomResourceDefinitions: validating a CRD, filling in its status
//! (`Established`, `NamesAccepted`, `acceptedNames`, `storedVersions`), and
//! turning it into served resources — one per served version, with the
//! CRD's scope, status subresource, selectable fields and printer columns.
//! Removing a CRD removes its custom resources and stops serving them.

use crate::error::ApiError;
use crate::resources::objects::now_rfc3339;
use crate::resources::registry::{Conversion, NameRule, PrinterColumn, Registry, ResourceInfo};
use crate::storage::Txn;
use serde_json::{Value, json};

/// Storage key of CRDs.
pub const STORAGE_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// Whether `info` is the CRD resource itself.
pub fn is_crd(info: &ResourceInfo) -> bool {
    info.storage_key() == STORAGE_KEY
}

fn invalid(name: &str, field: &str, msg: &str) -> ApiError {
    ApiError::invalid(
        "CustomResourceDefinition",
        name,
        field,
        "FieldValueInvalid",
        msg,
    )
}

fn text<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().unwrap_or("")
}

/// Validate a CRD and set its status (idempotent).
pub fn prepare(obj: &mut Value) -> Result<(), ApiError> {
    let name = text(obj, &["metadata", "name"]).to_string();
    let spec = &obj["spec"];
    let group = text(spec, &["group"]);
    let plural = text(spec, &["names", "plural"]);
    let kind = text(spec, &["names", "kind"]);
    if group.is_empty() {
        return Err(invalid(&name, "spec.group", "Required value"));
    }
    if plural.is_empty() || plural != plural.to_lowercase() {
        return Err(invalid(
            &name,
            "spec.names.plural",
            "Required value: must be a lowercase plural name",
        ));
    }
    if kind.is_empty() {
        return Err(invalid(&name, "spec.names.kind", "Required value"));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            &name,
            "metadata.name",
            &format!(
                "Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group ({plural}.{group})"
            ),
        ));
    }
    let scope = text(spec, &["scope"]);
    if scope != "Namespaced" && scope != "Cluster" {
        return Err(invalid(
            &name,
            "spec.scope",
            &format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        return Err(invalid(
            &name,
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        ));
    }
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v["storage"] == true)
        .map(|v| text(v, &["name"]))
        .collect();
    if storage.len() != 1 {
        return Err(invalid(
            &name,
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    let storage = storage[0].to_string();
    crate::resources::schema::check_crd_schemas(obj)?;
    for (i, v) in versions.iter().enumerate() {
        let vn = text(v, &["name"]);
        if vn.is_empty()
            || crate::resources::validation::name_problem(vn, NameRule::Label).is_some()
        {
            return Err(invalid(
                &name,
                &format!("spec.versions[{i}].name"),
                &format!("Invalid value: {vn:?}: must be a DNS-1123 label"),
            ));
        }
    }
    let mut accepted = spec["names"].clone();
    if text(&accepted, &["singular"]).is_empty() {
        accepted["singular"] = json!(kind.to_lowercase());
    }
    if text(&accepted, &["listKind"]).is_empty() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    let now = now_rfc3339();
    let status = obj.get("status").cloned().unwrap_or(Value::Null);
    let mut stored: Vec<Value> = status["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored.iter().any(|v| v == storage.as_str()) {
        stored.push(json!(storage));
    }
    let mut conditions: Vec<Value> = status["conditions"].as_array().cloned().unwrap_or_default();
    for (ty, reason, message) in [
        ("NamesAccepted", "NoConflicts", "no conflicts found"),
        (
            "Established",
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
    ] {
        if !conditions
            .iter()
            .any(|c| c["type"] == ty && c["status"] == "True")
        {
            conditions.retain(|c| c["type"] != ty);
            conditions.push(json!({"type": ty, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}));
        }
    }
    obj["status"] =
        json!({"acceptedNames": accepted, "conditions": conditions, "storedVersions": stored});
    Ok(())
}

/// The resources a (prepared) CRD serves.
pub fn resources(obj: &Value) -> Vec<ResourceInfo> {
    let spec = &obj["spec"];
    let names = &obj["status"]["acceptedNames"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    spec["versions"]
        .as_array()
        .map(|vs| vs.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|v| v["served"] == true)
        .map(|v| ResourceInfo {
            group: text(spec, &["group"]).into(),
            version: text(v, &["name"]).into(),
            kind: text(names, &["kind"]).into(),
            plural: text(names, &["plural"]).into(),
            singular: text(names, &["singular"]).into(),
            namespaced: text(spec, &["scope"]) == "Namespaced",
            status: v["subresources"]["status"].is_object(),
            scale: v["subresources"]["scale"].is_object().then(|| {
                let sc = &v["subresources"]["scale"];
                let path = |k: &str| text(sc, &[k]).trim_start_matches('.').to_string();
                crate::resources::registry::ScalePaths {
                    spec_replicas: path("specReplicasPath"),
                    status_replicas: path("statusReplicasPath"),
                    label_selector: Some(path("labelSelectorPath")).filter(|p| !p.is_empty()),
                }
            }),
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            schema: v["schema"]["openAPIV3Schema"]
                .is_object()
                .then(|| std::sync::Arc::new(v["schema"]["openAPIV3Schema"].clone())),
            field_selectors: v["selectableFields"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|f| text(f, &["jsonPath"]).trim_start_matches('.').to_string())
                        .map(|p| (p.clone(), p))
                        .collect()
                })
                .unwrap_or_default(),
            name_rule: NameRule::Subdomain,
            custom: true,
            printer_columns: v["additionalPrinterColumns"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|c| PrinterColumn {
                            name: text(c, &["name"]).to_string(),
                            ty: text(c, &["type"]).to_string(),
                            format: text(c, &["format"]).to_string(),
                            description: text(c, &["description"]).to_string(),
                            priority: c["priority"]
                                .as_i64()
                                .and_then(|p| i32::try_from(p).ok())
                                .unwrap_or(0),
                            path: text(c, &["jsonPath"]).trim_start_matches('.').to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// (Re)register the resources a stored CRD serves.
pub fn register(registry: &Registry, obj: &Value) {
    let spec = &obj["spec"];
    registry.unregister(
        text(spec, &["group"]),
        text(&obj["status"]["acceptedNames"], &["plural"]),
    );
    for info in resources(obj) {
        registry.register(info);
    }
    registry.set_conversion(
        text(spec, &["group"]),
        text(&obj["status"]["acceptedNames"], &["plural"]),
        conversion(spec),
    );
}

/// The webhook conversion a CRD's `spec.conversion` asks for, if any.
fn conversion(spec: &Value) -> Option<Conversion> {
    let c = &spec["conversion"];
    if c["strategy"].as_str() != Some("Webhook") {
        return None;
    }
    let storage_version = spec["versions"]
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str())?
        .to_string();
    Some(Conversion {
        client_config: c["webhook"]["clientConfig"].clone(),
        storage_version,
    })
}

/// A CRD is gone: remove its objects and stop serving it. Returns the
/// storage key of its resource and the objects removed, for the caller's
/// bookkeeping of each (their dependents, a namespace they kept from
/// finishing).
pub fn on_removed(registry: &Registry, txn: &mut Txn<'_>, obj: &Value) -> (String, Vec<Value>) {
    let group = text(&obj["spec"], &["group"]);
    let plural = text(&obj["spec"]["names"], &["plural"]);
    let res = format!("{group}/{plural}");
    let mut removed = Vec::new();
    for (k, o) in txn.list(&res, None) {
        if txn.remove(&res, &k, o.value.clone()).is_some() {
            removed.push(o.value.clone());
        }
    }
    registry.unregister(group, plural);
    (res, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}, "selectableFields": [{"jsonPath": ".spec.color"}]},
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1alpha1", "served": false, "storage": false}
                ]}
        })
    }

    #[test]
    fn prepared_crd_serves_its_versions() {
        let mut c = crd();
        prepare(&mut c).unwrap();
        assert_eq!(c["status"]["acceptedNames"]["listKind"], "WidgetList");
        let before = c.clone();
        prepare(&mut c).unwrap();
        assert_eq!(before, c, "prepare is idempotent");
        let rs = resources(&c);
        assert_eq!(rs.len(), 2);
        assert!(rs[0].status && !rs[1].status);
        assert_eq!(
            rs[0].field_selectors,
            vec![("spec.color".to_string(), "spec.color".to_string())]
        );
    }

    #[test]
    fn bad_crd_names_are_invalid() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong.example.com");
        let e = prepare(&mut c).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(e.causes[0].field, "metadata.name");
    }
}
