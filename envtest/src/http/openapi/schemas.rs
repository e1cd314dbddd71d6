//! Component schemas for one served kind, named as the API server names them
//! (`io.k8s.api.core.v1.ConfigMap`, `com.example.v1.Widget`), each carrying
//! `x-kubernetes-group-version-kind`, together with every schema they refer
//! to. Built-in kinds come from k8s-openapi's generated schemas (the same
//! descriptions the API server publishes); a custom resource version comes
//! from its CRD's `openAPIV3Schema`, with `apiVersion`, `kind` and
//! `metadata` described as on a cluster.

use crate::resources::registry::ResourceInfo;
use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps, batch, coordination, core, events, networking,
    rbac, storage as storage_api,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// Where component schemas live in an OpenAPI v3 document.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// A generator writing OpenAPI 3.0 schemas under `components/schemas`, with
/// `$ref` siblings (descriptions) moved into `allOf` as the API server does.
fn generator() -> SchemaGenerator {
    SchemaSettings::openapi3().into_generator()
}

/// The schema name of `T` (its definition's key).
fn name_of<T: JsonSchema>() -> String {
    T::schema_name().into_owned()
}

/// Definitions of `T` and everything it refers to, and `T`'s own name.
fn definitions_of<T: JsonSchema>() -> (String, Map<String, Value>) {
    let mut generator = generator();
    let _ = generator.subschema_for::<T>();
    (name_of::<T>(), generator.take_definitions(true))
}

/// Definitions of a built-in kind and its name, or `None` for a kind this
/// server has no schema for.
fn builtin(info: &ResourceInfo) -> Option<(String, Map<String, Value>)> {
    let defs = match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => definitions_of::<core::v1::Namespace>(),
        ("", "pods") => definitions_of::<core::v1::Pod>(),
        ("", "configmaps") => definitions_of::<core::v1::ConfigMap>(),
        ("", "secrets") => definitions_of::<core::v1::Secret>(),
        ("", "services") => definitions_of::<core::v1::Service>(),
        ("", "serviceaccounts") => definitions_of::<core::v1::ServiceAccount>(),
        ("", "events") => definitions_of::<core::v1::Event>(),
        ("", "nodes") => definitions_of::<core::v1::Node>(),
        ("", "endpoints") => definitions_of::<core::v1::Endpoints>(),
        ("", "persistentvolumeclaims") => definitions_of::<core::v1::PersistentVolumeClaim>(),
        ("", "persistentvolumes") => definitions_of::<core::v1::PersistentVolume>(),
        ("apps", "deployments") => definitions_of::<apps::v1::Deployment>(),
        ("apps", "replicasets") => definitions_of::<apps::v1::ReplicaSet>(),
        ("apps", "statefulsets") => definitions_of::<apps::v1::StatefulSet>(),
        ("apps", "daemonsets") => definitions_of::<apps::v1::DaemonSet>(),
        ("apps", "controllerrevisions") => definitions_of::<apps::v1::ControllerRevision>(),
        ("batch", "jobs") => definitions_of::<batch::v1::Job>(),
        ("batch", "cronjobs") => definitions_of::<batch::v1::CronJob>(),
        ("events.k8s.io", "events") => definitions_of::<events::v1::Event>(),
        ("coordination.k8s.io", "leases") => definitions_of::<coordination::v1::Lease>(),
        ("networking.k8s.io", "ingresses") => definitions_of::<networking::v1::Ingress>(),
        ("storage.k8s.io", "storageclasses") => definitions_of::<storage_api::v1::StorageClass>(),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            definitions_of::<CustomResourceDefinition>()
        }
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            definitions_of::<admission::ValidatingWebhookConfiguration>()
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            definitions_of::<admission::MutatingWebhookConfiguration>()
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            definitions_of::<admission::ValidatingAdmissionPolicy>()
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            definitions_of::<admission::ValidatingAdmissionPolicyBinding>()
        }
        ("rbac.authorization.k8s.io", "roles") => definitions_of::<rbac::v1::Role>(),
        ("rbac.authorization.k8s.io", "rolebindings") => definitions_of::<rbac::v1::RoleBinding>(),
        ("rbac.authorization.k8s.io", "clusterroles") => definitions_of::<rbac::v1::ClusterRole>(),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            definitions_of::<rbac::v1::ClusterRoleBinding>()
        }
        _ => return None,
    };
    Some(defs)
}

/// The schema name the API server gives a custom resource version: the
/// group's labels reversed, then version and kind (`com.example.v1.Widget`).
pub fn custom_name(info: &ResourceInfo) -> String {
    let group: Vec<&str> = info.group.split('.').rev().collect();
    format!("{}.{}.{}", group.join("."), info.version, info.kind)
}

/// A custom resource version's schema: its `openAPIV3Schema` (or a free-form
/// object when it declares none) with the standard `apiVersion`, `kind` and
/// `metadata` fields, plus `ObjectMeta` and what it refers to.
fn custom(info: &ResourceInfo) -> (String, Map<String, Value>) {
    let (meta_name, mut defs) = definitions_of::<ObjectMeta>();
    let mut schema = match info.schema.as_deref() {
        Some(Value::Object(s)) => s.clone(),
        _ => Map::from_iter([
            ("type".to_string(), json!("object")),
            (
                "x-kubernetes-preserve-unknown-fields".to_string(),
                json!(true),
            ),
        ]),
    };
    let props = schema.entry("properties").or_insert_with(|| json!({}));
    if let Value::Object(props) = props {
        props.insert("apiVersion".into(), json!({
            "type": "string",
            "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values.",
        }));
        props.insert("kind".into(), json!({
            "type": "string",
            "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase.",
        }));
        props.insert(
            "metadata".into(),
            json!({
                "allOf": [{"$ref": format!("{REF_PREFIX}{meta_name}")}],
                "description": "Standard object's metadata.",
            }),
        );
    }
    let name = custom_name(info);
    defs.insert(name.clone(), Value::Object(schema));
    (name, defs)
}

/// The component schemas of one served kind and the name of the kind's own
/// schema, which is marked with its group, version and kind.
pub fn for_kind(info: &ResourceInfo) -> (String, Map<String, Value>) {
    let (name, mut defs) = if info.custom {
        custom(info)
    } else {
        builtin(info).unwrap_or_else(|| custom(info))
    };
    if let Some(Value::Object(own)) = defs.get_mut(&name) {
        own.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": info.group, "version": info.version, "kind": info.kind}]),
        );
    }
    (name, defs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::registry::Registry;

    #[test]
    fn builtin_kinds_are_named_as_the_api_server_names_them() {
        let r = Registry::with_builtins();
        let cm = r.get("", "v1", "configmaps").unwrap();
        let (name, defs) = for_kind(&cm);
        assert_eq!(name, "io.k8s.api.core.v1.ConfigMap");
        let own = &defs[&name];
        assert_eq!(
            own["x-kubernetes-group-version-kind"][0]["kind"],
            "ConfigMap"
        );
        assert!(
            own["description"]
                .as_str()
                .unwrap()
                .contains("configuration data")
        );
        let meta = &own["properties"]["metadata"];
        assert_eq!(
            meta["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert!(defs.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    }

    #[test]
    fn every_builtin_kind_has_a_real_schema() {
        for info in Registry::with_builtins().all() {
            assert!(builtin(&info).is_some(), "no schema for {}", info.plural);
        }
    }

    #[test]
    fn custom_names_reverse_the_group() {
        let mut info = (*Registry::with_builtins().get("", "v1", "pods").unwrap()).clone();
        info.group = "stable.example.com".into();
        info.kind = "CronTab".into();
        info.custom = true;
        assert_eq!(custom_name(&info), "com.example.stable.v1.CronTab");
        let (name, defs) = for_kind(&info);
        assert_eq!(defs[&name]["properties"]["kind"]["type"], "string");
    }
}
