//! Parsing and checking `#[resource(...)]` and `#[index(...)]`: everything
//! here turns attributes into a checked [`Resource`] or spanned errors; no
//! code is generated.

use darling::util::{Flag, Override, SpannedValue};
use darling::{FromDeriveInput, FromMeta};
use proc_macro2::Span;
use syn::spanned::Spanned;

use super::fields::SpecField;
use super::names;
use super::paths::{self, SpecFields};

/// `#[resource(...)]` on the spec struct, as written.
#[derive(Debug, FromDeriveInput)]
#[darling(
    attributes(resource),
    supports(struct_named),
    forward_attrs(serde, derive, doc, index)
)]
pub struct RawResource {
    pub ident: syn::Ident,
    pub vis: syn::Visibility,
    pub generics: syn::Generics,
    pub data: darling::ast::Data<(), SpecField>,
    pub attrs: Vec<syn::Attribute>,

    pub group: Option<SpannedValue<String>>,
    pub version: Option<SpannedValue<String>>,
    pub kind: Option<SpannedValue<String>>,
    pub plural: Option<SpannedValue<String>>,
    pub singular: Option<SpannedValue<String>>,
    pub namespaced: Flag,
    pub status: Option<SpannedValue<syn::Type>>,
    #[darling(multiple, rename = "shortname")]
    pub shortnames: Vec<SpannedValue<String>>,
    #[darling(multiple, rename = "category")]
    pub categories: Vec<SpannedValue<String>>,
    #[darling(multiple, rename = "printcolumn")]
    pub printcolumns: Vec<SpannedValue<PrintColumn>>,
    pub scale: Option<SpannedValue<Scale>>,
    #[darling(multiple, rename = "selectable")]
    pub selectable: Vec<SpannedValue<String>>,
    #[darling(multiple, rename = "annotation")]
    pub annotations: Vec<KeyValue>,
    #[darling(multiple, rename = "label")]
    pub labels: Vec<KeyValue>,
    pub deprecated: Option<Override<String>>,
    pub served: Option<bool>,
    pub storage: Option<bool>,
    #[darling(multiple, rename = "validation")]
    pub validations: Vec<super::fields::CelRule>,
    #[darling(multiple)]
    pub derive: Vec<syn::Path>,
    #[darling(rename = "crate")]
    pub krate: Option<syn::Path>,
}

/// `printcolumn(name = "...", json_path = "...", type = "...", ...)`.
#[derive(Debug, Clone, FromMeta)]
pub struct PrintColumn {
    pub name: String,
    pub json_path: SpannedValue<String>,
    #[darling(rename = "type")]
    pub type_: SpannedValue<String>,
    pub format: Option<String>,
    pub description: Option<String>,
    pub priority: Option<i32>,
}

/// `scale(spec = "...", status = "...", selector = "...")`.
#[derive(Debug, Clone, FromMeta)]
pub struct Scale {
    pub spec: SpannedValue<String>,
    pub status: SpannedValue<String>,
    pub selector: Option<SpannedValue<String>>,
}

/// `annotation(key = "...", value = "...")` / `label(...)`.
#[derive(Debug, Clone, FromMeta)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
}

/// `#[index(name = "...", path = ".spec.x")]` or `#[index(name = "...", function = path)]`.
#[derive(Debug, Clone, FromMeta)]
pub struct IndexAttr {
    pub name: SpannedValue<String>,
    pub path: Option<SpannedValue<String>>,
    pub function: Option<syn::Path>,
}

/// A checked index declaration.
pub struct Index {
    pub name: String,
    pub span: Span,
    pub source: IndexSource,
}

/// Where an index's values come from.
pub enum IndexSource {
    /// A JSON path under `.spec` (first segment checked) or `.metadata`.
    Path(paths::JsonPath),
    /// `fn(&Kind) -> Vec<String>`.
    Function(syn::Path),
}

/// The checked description the code generator works from.
pub struct Resource {
    pub spec: syn::Ident,
    pub vis: syn::Visibility,
    pub root: syn::Ident,
    pub krate: syn::Path,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub status: Option<(syn::Type, Span)>,
    pub shortnames: Vec<String>,
    pub categories: Vec<String>,
    pub printcolumns: Vec<PrintColumn>,
    pub scale: Option<Scale>,
    pub selectable: Vec<String>,
    pub annotations: Vec<KeyValue>,
    pub labels: Vec<KeyValue>,
    pub deprecated: Option<Option<String>>,
    pub served: bool,
    pub storage: bool,
    /// Traits the spec derives that the root can derive too.
    pub forwarded_derives: Vec<syn::Path>,
    pub indexes: Vec<Index>,
    pub field_rules: Vec<(String, super::fields::FieldRules)>,
    pub validations: Vec<super::fields::CelRule>,
    pub doc: Vec<syn::Attribute>,
}

const PRINTER_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];

impl RawResource {
    /// Checks everything the attributes say; every problem found is reported.
    pub fn check(self) -> darling::Result<Resource> {
        let mut errors = darling::Error::accumulator();
        let whole = self.ident.span();

        let required = |v: Option<SpannedValue<String>>,
                        name: &str,
                        errors: &mut darling::error::Accumulator| {
            if v.is_none() {
                errors.push(
                    darling::Error::custom(format!(
                        "#[resource(...)] needs `{name} = \"...\"` (group, version and kind are required)"
                    ))
                    .with_span(&whole),
                );
            }
            v
        };
        let group = required(self.group, "group", &mut errors);
        let version = required(self.version, "version", &mut errors);
        let kind = required(self.kind, "kind", &mut errors);

        if let Some(g) = &group
            && let Err(e) = names::check_group(g)
        {
            errors.push(darling::Error::custom(e).with_span(&g.span()));
        }
        if let Some(v) = &version
            && let Err(e) = names::check_version(v)
        {
            errors.push(darling::Error::custom(e).with_span(&v.span()));
        }
        if let Some(k) = &kind
            && let Err(e) = names::check_kind(k)
        {
            errors.push(darling::Error::custom(e).with_span(&k.span()));
        }
        let kind_str = kind
            .as_ref()
            .map(|k| k.as_str().to_owned())
            .unwrap_or_else(|| "Unknown".into());
        let plural = match &self.plural {
            Some(p) => {
                if let Err(e) = names::check_lower_label(p, "plural") {
                    errors.push(darling::Error::custom(e).with_span(&p.span()));
                }
                p.as_str().to_owned()
            }
            None => informer_naming::plural(&kind_str),
        };
        let singular = match &self.singular {
            Some(s) => {
                if let Err(e) = names::check_lower_label(s, "singular") {
                    errors.push(darling::Error::custom(e).with_span(&s.span()));
                }
                s.as_str().to_owned()
            }
            None => kind_str.to_ascii_lowercase(),
        };
        for s in &self.shortnames {
            if let Err(e) = names::check_lower_label(s, "shortname") {
                errors.push(darling::Error::custom(e).with_span(&s.span()));
            }
        }
        for c in &self.categories {
            if let Err(e) = names::check_lower_label(c, "category") {
                errors.push(darling::Error::custom(e).with_span(&c.span()));
            }
        }

        let fields = match &self.data {
            darling::ast::Data::Struct(f) => SpecFields::from_fields(&self.attrs, &f.fields),
            darling::ast::Data::Enum(_) => SpecFields::default(),
        };
        let has_status = self.status.is_some();

        // JSONPaths: printer columns, scale, selectable fields.
        let check_path =
            |p: &SpannedValue<String>, what: &str, errors: &mut darling::error::Accumulator| {
                match paths::JsonPath::parse(p) {
                    Ok(jp) => {
                        if let Err(e) = jp.check(&fields, has_status) {
                            errors.push(
                                darling::Error::custom(format!("{what}: {e}")).with_span(&p.span()),
                            );
                        }
                    }
                    Err(e) => errors
                        .push(darling::Error::custom(format!("{what}: {e}")).with_span(&p.span())),
                }
            };
        for c in &self.printcolumns {
            check_path(&c.json_path, "printcolumn json_path", &mut errors);
            if !PRINTER_TYPES.contains(&c.type_.as_str()) {
                errors.push(
                    darling::Error::custom(format!(
                        "printcolumn type must be one of {PRINTER_TYPES:?}{}",
                        names::did_you_mean(&c.type_, PRINTER_TYPES)
                    ))
                    .with_span(&c.type_.span()),
                );
            }
        }
        if let Some(s) = &self.scale {
            if !has_status {
                errors.push(
                    darling::Error::custom(
                        "the scale subresource needs a status type: add `status = \"...\"`",
                    )
                    .with_span(&s.span()),
                );
            }
            check_path(&s.spec, "scale spec", &mut errors);
            if !s.spec.starts_with(".spec.") {
                errors.push(
                    darling::Error::custom("scale spec path must be under `.spec`")
                        .with_span(&s.spec.span()),
                );
            }
            check_path(&s.status, "scale status", &mut errors);
            if !s.status.starts_with(".status.") {
                errors.push(
                    darling::Error::custom("scale status path must be under `.status`")
                        .with_span(&s.status.span()),
                );
            }
            if let Some(sel) = &s.selector {
                check_path(sel, "scale selector", &mut errors);
                if !sel.starts_with(".status.") {
                    errors.push(
                        darling::Error::custom("scale selector path must be under `.status`")
                            .with_span(&sel.span()),
                    );
                }
            }
        }
        for p in &self.selectable {
            check_path(p, "selectable", &mut errors);
        }

        // Duplicates among list options.
        let mut seen_columns: Vec<&str> = Vec::new();
        for c in &self.printcolumns {
            if seen_columns.contains(&c.name.as_str()) {
                errors.push(
                    darling::Error::custom(format!("duplicate printcolumn `{}`", c.name))
                        .with_span(&c.span()),
                );
            }
            seen_columns.push(&c.name);
        }
        let mut seen_selectable: Vec<&str> = Vec::new();
        for p in &self.selectable {
            if seen_selectable.contains(&p.as_str()) {
                errors.push(
                    darling::Error::custom(format!("duplicate selectable field `{}`", p.as_str()))
                        .with_span(&p.span()),
                );
            }
            seen_selectable.push(p);
        }

        // Indexes.
        let mut indexes = Vec::new();
        for attr in self.attrs.iter().filter(|a| a.path().is_ident("index")) {
            match IndexAttr::from_meta(&attr.meta) {
                Ok(ix) => {
                    let span = ix.name.span();
                    let valid = ix
                        .name
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_lowercase())
                        && ix.name.chars().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                        });
                    if !valid {
                        errors.push(
                            darling::Error::custom("an index name is lowercase letters, digits, `-` and `_`, starting with a letter (it becomes a `by_...` method)")
                                .with_span(&span),
                        );
                        continue;
                    }
                    if indexes.iter().any(|i: &Index| i.name == *ix.name)
                        || ix.name.as_str() == "namespace"
                    {
                        errors.push(
                            darling::Error::custom(format!(
                                "duplicate index `{}` (`namespace` is built in)",
                                ix.name.as_str()
                            ))
                            .with_span(&span),
                        );
                        continue;
                    }
                    let source = match (ix.path, ix.function) {
                        (Some(p), None) => match paths::JsonPath::parse(&p) {
                            Ok(jp) => {
                                if let Err(e) = jp.check(&fields, has_status) {
                                    errors.push(
                                        darling::Error::custom(format!("index path: {e}"))
                                            .with_span(&p.span()),
                                    );
                                }
                                if jp.is_namespace() && !self.namespaced.is_present() {
                                    errors.push(
                                        darling::Error::custom("a cluster-scoped kind has no namespace to index; drop this index or add `namespaced`")
                                            .with_span(&p.span()),
                                    );
                                }
                                if jp.root() == "status" {
                                    errors.push(
                                        darling::Error::custom("index paths under `.status` are not supported; use `function = ...`")
                                            .with_span(&p.span()),
                                    );
                                }
                                IndexSource::Path(jp)
                            }
                            Err(e) => {
                                errors.push(
                                    darling::Error::custom(format!("index path: {e}"))
                                        .with_span(&p.span()),
                                );
                                continue;
                            }
                        },
                        (None, Some(f)) => IndexSource::Function(f),
                        _ => {
                            errors.push(
                                darling::Error::custom("an index needs exactly one of `path = \".spec...\"` or `function = some::function`")
                                    .with_span(&span),
                            );
                            continue;
                        }
                    };
                    indexes.push(Index {
                        name: ix.name.as_str().to_owned(),
                        span,
                        source,
                    });
                }
                Err(e) => errors.push(e),
            }
        }

        for v in &self.validations {
            if let Err(e) = v.check() {
                errors.push(e);
            }
        }
        // Field-level rules.
        let mut field_rules = Vec::new();
        if let darling::ast::Data::Struct(f) = &self.data {
            for field in &f.fields {
                let Some(ident) = &field.ident else { continue };
                if let Err(e) = field.rules.check() {
                    errors.push(e);
                }
                if !field.rules.is_empty() {
                    field_rules.push((fields.json_name(ident), field.rules.clone()));
                }
            }
        }

        let mut forwarded_derives: Vec<syn::Path> = self
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("derive"))
            .flat_map(|a| {
                a.parse_args_with(
                    syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
                )
                .map(|p| p.into_iter().collect::<Vec<_>>())
                .unwrap_or_default()
            })
            .filter(|p| {
                p.segments.last().is_some_and(|s| {
                    matches!(s.ident.to_string().as_str(), "Default" | "PartialEq" | "Eq")
                })
            })
            .collect();
        forwarded_derives.extend(self.derive.iter().cloned());
        let mut seen_derives = Vec::new();
        forwarded_derives.retain(|p| {
            let last = p.segments.last().map(|s| s.ident.to_string());
            let fresh = !seen_derives.contains(&last);
            seen_derives.push(last);
            fresh
        });
        let doc = self
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("doc"))
            .cloned()
            .collect();

        let root = match &kind {
            Some(k) if names::check_kind(k).is_ok() => syn::Ident::new(k, k.span()),
            _ => syn::Ident::new("__InvalidKind", Span::call_site()),
        };
        if root == self.ident {
            errors.push(
                darling::Error::custom(format!(
                    "the spec struct cannot be named like the kind `{root}`: the derive generates `{root}`; name it `{root}Spec`"
                ))
                .with_span(&self.ident),
            );
        }
        if !self.generics.params.is_empty() {
            errors.push(
                darling::Error::custom("a generic spec struct is not supported")
                    .with_span(&self.generics.span()),
            );
        }
        errors.finish()?;

        Ok(Resource {
            spec: self.ident,
            vis: self.vis,
            root,
            krate: self
                .krate
                .unwrap_or_else(|| syn::parse_quote!(::controller_runtime)),
            group: group.map(|g| g.as_str().to_owned()).unwrap_or_default(),
            version: version.map(|v| v.as_str().to_owned()).unwrap_or_default(),
            kind: kind_str,
            plural,
            singular,
            namespaced: self.namespaced.is_present(),
            status: self.status.map(|s| {
                let span = s.span();
                (s.into_inner(), span)
            }),
            shortnames: self
                .shortnames
                .into_iter()
                .map(|s| s.into_inner())
                .collect(),
            categories: self
                .categories
                .into_iter()
                .map(|s| s.into_inner())
                .collect(),
            printcolumns: self
                .printcolumns
                .into_iter()
                .map(|c| c.into_inner())
                .collect(),
            scale: self.scale.map(|s| s.into_inner()),
            selectable: self
                .selectable
                .into_iter()
                .map(|s| s.into_inner())
                .collect(),
            annotations: self.annotations,
            labels: self.labels,
            deprecated: self.deprecated.map(|d| match d {
                Override::Inherit => None,
                Override::Explicit(w) => Some(w),
            }),
            served: self.served.unwrap_or(true),
            storage: self.storage.unwrap_or(true),
            forwarded_derives,
            indexes,
            field_rules,
            validations: self.validations,
            doc,
        })
    }
}
