//! How server-side apply sees each node of an object: a list is atomic
//! (owned and replaced whole), a set (items owned by value) or a map (items
//! owned by their key fields); an object is granular (fields owned one by
//! one) or atomic. Custom resources say so in their structural schema
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type`; a list without a type is atomic, an object
//! granular, and what the schema does not declare is deduced the same way);
//! built-in kinds by the table here, which follows the `listType`,
//! `listMapKey` and `mapType`/`structType` markers of the Kubernetes API
//! types for the fields controllers share (containers, env, ports, volumes,
//! conditions, owner references, finalizers, selectors). `metadata` is
//! always the built-in ObjectMeta.
//!
//! Part of `resources::ssa`, used by its merge and field-set walks.

use serde_json::Value;

/// How a list's items are owned and merged.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListKind {
    /// The list is one value.
    Atomic,
    /// Items are scalars, owned by value.
    Set,
    /// Items are objects, owned by these key fields (with their defaults).
    Map(Vec<(String, Option<Value>)>),
}

/// Where a node sits, for the rules that decide its kind.
#[derive(Debug, Clone)]
pub(crate) enum Shape<'a> {
    /// A custom resource's schema node (`None`: not declared there).
    Schema(Option<&'a Value>),
    /// A built-in kind's node: the field holding it and that field's parent
    /// field, and whether it is inside a container.
    Builtin {
        field: &'a str,
        parent: &'a str,
        container: bool,
    },
}

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// Built-in fields holding a LabelSelector (a `structType=atomic`) or an
/// atomic string map.
const ATOMIC_OBJECTS: &[&str] = &[
    "selector",
    "nodeSelector",
    "namespaceSelector",
    "podSelector",
    "labelSelector",
];

fn keys(names: &[&str]) -> ListKind {
    ListKind::Map(names.iter().map(|n| (n.to_string(), None)).collect())
}

fn ports(first: &str) -> ListKind {
    ListKind::Map(vec![
        (first.to_string(), None),
        ("protocol".to_string(), Some(Value::String("TCP".into()))),
    ])
}

impl<'a> Shape<'a> {
    /// The root of an object of a kind: its schema for custom resources.
    pub(crate) fn root(schema: Option<&'a Value>, custom: bool) -> Self {
        if custom {
            Shape::Schema(schema)
        } else {
            Shape::Builtin {
                field: "",
                parent: "",
                container: false,
            }
        }
    }

    /// The node of a field of this (object) node.
    pub(crate) fn child(&self, name: &'a str, at_root: bool) -> Shape<'a> {
        if at_root && name == "metadata" {
            return Shape::Builtin {
                field: "metadata",
                parent: "",
                container: false,
            };
        }
        match self {
            Shape::Schema(s) => Shape::Schema(s.and_then(|s| {
                s.get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
            })),
            Shape::Builtin {
                field, container, ..
            } => Shape::Builtin {
                field: name,
                parent: field,
                container: *container,
            },
        }
    }

    /// The node of this (list) node's items.
    pub(crate) fn item(&self) -> Shape<'a> {
        match self {
            Shape::Schema(s) => Shape::Schema(s.and_then(|s| s.get("items"))),
            Shape::Builtin {
                field,
                parent,
                container,
            } => Shape::Builtin {
                field,
                parent,
                container: *container || CONTAINER_LISTS.contains(field),
            },
        }
    }

    /// Whether this (object) node is owned and replaced whole.
    pub(crate) fn atomic_object(&self) -> bool {
        match self {
            Shape::Schema(s) => s.is_some_and(|s| s["x-kubernetes-map-type"] == "atomic"),
            Shape::Builtin { field, parent, .. } => {
                ATOMIC_OBJECTS.contains(field) && *parent != "metadata"
            }
        }
    }

    /// How this (list) node's items are owned.
    pub(crate) fn list_kind(&self) -> ListKind {
        match self {
            Shape::Schema(None) => ListKind::Atomic,
            Shape::Schema(Some(s)) => match s["x-kubernetes-list-type"].as_str() {
                Some("set") => ListKind::Set,
                Some("map") => ListKind::Map(
                    s["x-kubernetes-list-map-keys"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(|k| {
                            let default = s["items"]["properties"][k].get("default").cloned();
                            (k.to_string(), default)
                        })
                        .collect(),
                ),
                _ => ListKind::Atomic,
            },
            Shape::Builtin {
                field,
                parent,
                container,
            } => match *field {
                "finalizers" if *parent == "metadata" => ListKind::Set,
                "ownerReferences" if *parent == "metadata" => keys(&["uid"]),
                "containers"
                | "initContainers"
                | "ephemeralContainers"
                | "volumes"
                | "imagePullSecrets"
                | "resourceClaims"
                | "schedulingGates"
                | "env" => keys(&["name"]),
                "claims" if *parent == "resources" => keys(&["name"]),
                "volumeMounts" => keys(&["mountPath"]),
                "volumeDevices" => keys(&["devicePath"]),
                "conditions" => keys(&["type"]),
                "hostAliases" => keys(&["ip"]),
                "topologySpreadConstraints" => keys(&["topologyKey", "whenUnsatisfiable"]),
                "ports" if *container => ports("containerPort"),
                // A Service's ports.
                "ports" if *parent == "spec" => ports("port"),
                _ => ListKind::Atomic,
            },
        }
    }
}

/// The element naming a map-list item: its key fields, a missing one
/// taking its default (as the API server keys `ports` by `protocol: TCP`
/// when a configuration leaves it out).
pub(crate) fn item_keys(item: &Value, keys: &[(String, Option<Value>)]) -> Vec<(String, Value)> {
    keys.iter()
        .filter_map(|(k, default)| {
            item.get(k)
                .cloned()
                .or_else(|| default.clone())
                .map(|v| (k.clone(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn built_in_fields_follow_the_api_markers() {
        let root = Shape::root(None, false);
        let spec = root.child("spec", true);
        let containers = spec.child("template", false).child("spec", false);
        let containers = containers.child("containers", false);
        assert_eq!(containers.list_kind(), keys(&["name"]));
        let ports = containers.item().child("ports", false);
        assert_eq!(ports.list_kind(), self::ports("containerPort"));
        assert_eq!(spec.child("ports", false).list_kind(), self::ports("port"));
        assert!(spec.child("selector", false).atomic_object());
        let meta = root.child("metadata", true);
        assert_eq!(meta.child("finalizers", false).list_kind(), ListKind::Set);
        assert!(!meta.child("labels", false).atomic_object());
        assert_eq!(spec.child("args", false).list_kind(), ListKind::Atomic);
    }

    #[test]
    fn custom_resources_follow_their_schema() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name", "proto"],
                    "items": {"type": "object", "properties": {"proto": {"type": "string", "default": "TCP"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set"},
                "plain": {"type": "array"},
                "sel": {"type": "object", "x-kubernetes-map-type": "atomic"}}}}});
        let root = Shape::root(Some(&schema), true);
        let spec = root.child("spec", true);
        assert_eq!(
            spec.child("items", false).list_kind(),
            ListKind::Map(vec![
                ("name".into(), None),
                ("proto".into(), Some(json!("TCP")))
            ])
        );
        assert_eq!(spec.child("tags", false).list_kind(), ListKind::Set);
        assert_eq!(spec.child("plain", false).list_kind(), ListKind::Atomic);
        assert_eq!(
            spec.child("undeclared", false).list_kind(),
            ListKind::Atomic
        );
        assert!(spec.child("sel", false).atomic_object());
        // metadata is ObjectMeta whatever the schema says.
        let meta = root.child("metadata", true);
        assert_eq!(meta.child("finalizers", false).list_kind(), ListKind::Set);
        assert_eq!(
            item_keys(
                &json!({"name": "a"}),
                &[("name".into(), None), ("proto".into(), Some(json!("TCP")))]
            ),
            vec![
                ("name".to_string(), json!("a")),
                ("proto".to_string(), json!("TCP"))
            ]
        );
    }
}
