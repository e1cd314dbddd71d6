//! CustomResourceDefinitions from Rust types.
//!
//! Layer 1 (building blocks): imports nothing else of this crate; the `CustomResource` derive builds on it.
//!
//! `#[derive(CustomResource)]` (see the crate root) describes one version of
//! a kind as a [`CrdVersionInfo`] and implements [`CustomResourceExt`] for
//! the generated root type; [`CustomResourceExt::crd`] then produces the
//! CustomResourceDefinition at run time: the spec and status schemas come
//! from `schemars` and are rewritten to the structural subset the API server
//! accepts by [`schema::structural`]. Several versions of one kind are joined
//! into one definition by [`merge_versions`].
//!
//! ```
//! use controller_runtime::crd::{CrdVersionInfo, version_crd};
//! use schemars::JsonSchema;
//!
//! #[derive(JsonSchema)]
//! struct WidgetSpec {
//!     color: String,
//! }
//!
//! let info = CrdVersionInfo::new("example.com", "v1", "Widget", "widgets");
//! let crd = version_crd(&info, |g| g.subschema_for::<WidgetSpec>(), None, None).unwrap();
//! assert_eq!(crd.metadata.name.as_deref(), Some("widgets.example.com"));
//! let schema = crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
//! let spec = &schema.properties.as_ref().unwrap()["spec"];
//! assert_eq!(spec.required.as_deref(), Some(&["color".to_string()][..]));
//! ```

mod merge;
mod paths;
pub mod schema;
#[cfg(test)]
mod tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

pub use merge::merge_versions;
pub use schema::SchemaError;

/// Errors building a CustomResourceDefinition.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CrdError {
    /// A schema could not be made structural.
    #[error("{kind} {version}: {part} schema: {source}")]
    Schema {
        /// The kind.
        kind: String,
        /// The version.
        version: String,
        /// `spec` or `status`.
        part: &'static str,
        /// What went wrong.
        source: SchemaError,
    },
    /// The assembled definition did not decode as a CustomResourceDefinition.
    #[error("the generated CustomResourceDefinition does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// A printer column, scale path or selectable field names a field the
    /// schema does not have.
    #[error("{what} `{path}`: `{parent}` has no field `{missing}`{}", suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    UnknownPath {
        /// What names the path.
        what: &'static str,
        /// The path as written.
        path: String,
        /// The first segment not found.
        missing: String,
        /// The path up to that segment.
        parent: String,
        /// The closest existing field, if any is close.
        suggestion: Option<String>,
    },
    /// [`merge_versions`] was given nothing.
    #[error("no versions to merge")]
    NoVersions,
    /// Two versions disagree on something every version must share.
    #[error("versions disagree on {what}: `{first}` and `{second}`")]
    Disagree {
        /// What differs (group, kind, scope, plural...).
        what: &'static str,
        /// The first version's value.
        first: String,
        /// The other version's value.
        second: String,
    },
    /// The same version name appears twice.
    #[error("version `{0}` is given twice")]
    DuplicateVersion(String),
    /// Not exactly one version is the storage version.
    #[error("exactly one version must be the storage version, found {0} ({1:?})")]
    StorageVersions(usize, Vec<String>),
}

/// One printer column (`additionalPrinterColumns`) as `kubectl get` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: &'static str,
    /// OpenAPI type: `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: &'static str,
    /// JSONPath into the object, e.g. `.spec.replicas`.
    pub json_path: &'static str,
    /// Optional OpenAPI format, e.g. `date-time`.
    pub format: Option<&'static str>,
    /// Optional description (shown by `kubectl explain`-style tooling).
    pub description: Option<&'static str>,
    /// 0 shows the column always; higher only with `-o wide`.
    pub priority: Option<i32>,
}

/// The scale subresource's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleSubresource {
    /// `.spec` path of the desired replicas.
    pub spec_replicas_path: &'static str,
    /// `.status` path of the observed replicas.
    pub status_replicas_path: &'static str,
    /// `.status` path of the serialized label selector, if any.
    pub label_selector_path: Option<&'static str>,
}

/// Everything about one version of a kind that is not its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrdVersionInfo {
    /// API group, e.g. `samplecontroller.k8s.io`.
    pub group: &'static str,
    /// Version, e.g. `v1alpha1`.
    pub version: &'static str,
    /// Kind, e.g. `Foo`.
    pub kind: &'static str,
    /// Plural resource name, e.g. `foos`.
    pub plural: &'static str,
    /// Singular name, e.g. `foo`.
    pub singular: &'static str,
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Categories (`all`...).
    pub categories: &'static [&'static str],
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// Whether `/status` is a subresource.
    pub status_subresource: bool,
    /// The scale subresource, if any.
    pub scale: Option<ScaleSubresource>,
    /// Printer columns.
    pub printer_columns: &'static [PrinterColumn],
    /// Selectable fields (JSONPaths usable in field selectors).
    pub selectable_fields: &'static [&'static str],
    /// Served by the API server.
    pub served: bool,
    /// The storage version.
    pub storage: bool,
    /// Deprecated version.
    pub deprecated: bool,
    /// Warning returned to clients of a deprecated version.
    pub deprecation_warning: Option<&'static str>,
    /// Annotations on the CustomResourceDefinition object.
    pub annotations: &'static [(&'static str, &'static str)],
    /// Labels on the CustomResourceDefinition object.
    pub labels: &'static [(&'static str, &'static str)],
}

impl CrdVersionInfo {
    /// A served storage version of a namespaced kind with no options; the
    /// singular name is the lowercased kind.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
    ) -> Self {
        Self {
            group,
            version,
            kind,
            plural,
            singular: "",
            short_names: &[],
            categories: &[],
            namespaced: true,
            status_subresource: false,
            scale: None,
            printer_columns: &[],
            selectable_fields: &[],
            served: true,
            storage: true,
            deprecated: false,
            deprecation_warning: None,
            annotations: &[],
            labels: &[],
        }
    }

    /// `plural.group`, the CustomResourceDefinition's name.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// A function giving a type's schema (possibly a `$ref`) from a generator.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// What `#[derive(CustomResource)]` implements for the root type: its version
/// description and schemas, and from them the CustomResourceDefinition.
///
/// ```
/// use controller_runtime::CustomResource;
/// use controller_runtime::crd::CustomResourceExt;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// #[resource(group = "example.com", version = "v1", kind = "Widget", namespaced)]
/// pub struct WidgetSpec {
///     color: String,
/// }
///
/// let crd = Widget::crd().unwrap();
/// assert_eq!(Widget::crd_name(), "widgets.example.com");
/// assert_eq!(crd.spec.names.kind, "Widget");
/// ```
pub trait CustomResourceExt {
    /// The version's description.
    const INFO: CrdVersionInfo;

    /// The spec type's schema.
    fn spec_schema(generator: &mut SchemaGenerator) -> Schema;

    /// The status type's schema, if the kind has a status.
    fn status_schema(generator: &mut SchemaGenerator) -> Option<Schema>;

    /// Keywords merged into the spec's property schemas after rewriting
    /// (field-level `#[resource(...)]` validation), keyed by JSON field name.
    fn spec_overrides() -> Option<Value> {
        None
    }

    /// `plural.group`.
    fn crd_name() -> String {
        Self::INFO.crd_name()
    }

    /// The CustomResourceDefinition of this version alone.
    fn crd() -> Result<CustomResourceDefinition, CrdError> {
        let mut generator = generator();
        let spec = Self::spec_schema(&mut generator);
        let status = Self::status_schema(&mut generator);
        build(&Self::INFO, spec, status, generator, Self::spec_overrides())
    }
}

fn generator() -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    settings.into_generator()
}

/// The CustomResourceDefinition of one version described by `info`, with the
/// given spec and optional status schemas and spec overrides (see
/// [`CustomResourceExt::spec_overrides`]).
pub fn version_crd(
    info: &CrdVersionInfo,
    spec: SchemaFn,
    status: Option<SchemaFn>,
    spec_overrides: Option<Value>,
) -> Result<CustomResourceDefinition, CrdError> {
    let mut generator = generator();
    let spec = spec(&mut generator);
    let status = status.map(|s| s(&mut generator));
    build(info, spec, status, generator, spec_overrides)
}

fn build(
    info: &CrdVersionInfo,
    spec: Schema,
    status: Option<Schema>,
    mut generator: SchemaGenerator,
    spec_overrides: Option<Value>,
) -> Result<CustomResourceDefinition, CrdError> {
    let defs = generator.take_definitions(true);
    let err = |part: &'static str| {
        move |source| CrdError::Schema {
            kind: info.kind.into(),
            version: info.version.into(),
            part,
            source,
        }
    };
    let mut spec = schema::structural(spec.to_value(), &defs).map_err(err("spec"))?;
    if let Some(Value::Object(overrides)) = spec_overrides {
        apply_overrides(&mut spec, overrides);
    }
    let mut props = Map::new();
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props.insert("metadata".into(), json!({"type": "object"}));
    props.insert("spec".into(), spec);
    if let Some(status) = status {
        let status = schema::structural(status.to_value(), &defs).map_err(err("status"))?;
        props.insert("status".into(), status);
    }
    let root = json!({"type": "object", "properties": props, "required": ["spec"]});
    paths::check_paths(info, &root)?;

    let mut version = json!({
        "name": info.version,
        "served": info.served,
        "storage": info.storage,
        "schema": {"openAPIV3Schema": root},
    });
    let v = version.as_object_mut().ok_or(CrdError::NoVersions)?;
    if info.deprecated {
        v.insert("deprecated".into(), true.into());
        if let Some(w) = info.deprecation_warning {
            v.insert("deprecationWarning".into(), w.into());
        }
    }
    let mut subresources = Map::new();
    if info.status_subresource {
        subresources.insert("status".into(), json!({}));
    }
    if let Some(scale) = info.scale {
        let mut s = json!({
            "specReplicasPath": scale.spec_replicas_path,
            "statusReplicasPath": scale.status_replicas_path,
        });
        if let (Some(sel), Some(o)) = (scale.label_selector_path, s.as_object_mut()) {
            o.insert("labelSelectorPath".into(), sel.into());
        }
        subresources.insert("scale".into(), s);
    }
    if !subresources.is_empty() {
        v.insert("subresources".into(), Value::Object(subresources));
    }
    if !info.printer_columns.is_empty() {
        let cols: Vec<Value> = info
            .printer_columns
            .iter()
            .map(|c| {
                let mut col = json!({"name": c.name, "type": c.type_, "jsonPath": c.json_path});
                if let Some(o) = col.as_object_mut() {
                    if let Some(f) = c.format {
                        o.insert("format".into(), f.into());
                    }
                    if let Some(d) = c.description {
                        o.insert("description".into(), d.into());
                    }
                    if let Some(p) = c.priority {
                        o.insert("priority".into(), p.into());
                    }
                }
                col
            })
            .collect();
        v.insert("additionalPrinterColumns".into(), Value::Array(cols));
    }
    if !info.selectable_fields.is_empty() {
        let fields: Vec<Value> = info
            .selectable_fields
            .iter()
            .map(|p| json!({"jsonPath": p}))
            .collect();
        v.insert("selectableFields".into(), Value::Array(fields));
    }

    let singular = if info.singular.is_empty() {
        info.kind.to_ascii_lowercase()
    } else {
        info.singular.to_owned()
    };
    let mut names = json!({
        "kind": info.kind,
        "listKind": format!("{}List", info.kind),
        "plural": info.plural,
        "singular": singular,
    });
    if let Some(n) = names.as_object_mut() {
        if !info.short_names.is_empty() {
            n.insert("shortNames".into(), json!(info.short_names));
        }
        if !info.categories.is_empty() {
            n.insert("categories".into(), json!(info.categories));
        }
    }
    let mut metadata = json!({"name": info.crd_name()});
    if let Some(m) = metadata.as_object_mut() {
        let pairs = |p: &[(&str, &str)]| -> Value {
            Value::Object(
                p.iter()
                    .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                    .collect(),
            )
        };
        if !info.annotations.is_empty() {
            m.insert("annotations".into(), pairs(info.annotations));
        }
        if !info.labels.is_empty() {
            m.insert("labels".into(), pairs(info.labels));
        }
    }
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": info.group,
            "names": names,
            "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [version],
        }
    });
    Ok(serde_json::from_value(crd)?)
}

/// Merges `overrides` (`{"properties": {field: {keyword: value}}, "self":
/// {keyword: value}}`) into the spec schema; keywords given there replace
/// what schemars produced.
fn apply_overrides(spec: &mut Value, mut overrides: Map<String, Value>) {
    if let (Some(Value::Object(own)), Some(target)) =
        (overrides.remove("self"), spec.as_object_mut())
    {
        target.extend(own);
    }
    let Some(Value::Object(fields)) = overrides.remove("properties") else {
        return;
    };
    let Some(props) = spec.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, keywords) in fields {
        if let (Some(Value::Object(target)), Value::Object(keywords)) =
            (props.get_mut(&field), keywords)
        {
            target.extend(keywords);
        }
    }
}
