//! JSONPaths in attributes (printer columns, scale, selectable fields,
//! indexes) checked against what the macro can see: the root layout, the
//! `ObjectMeta` fields and the spec struct's own fields under their serde
//! names. Deeper segments and `.status` (types the macro cannot see) are
//! checked when the CRD is built, against the generated schema.

use super::fields::SpecField;
use super::names::did_you_mean;

/// Serialized `ObjectMeta` field names.
const META_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "generateName",
    "labels",
    "annotations",
    "creationTimestamp",
    "deletionTimestamp",
    "generation",
    "uid",
    "resourceVersion",
    "finalizers",
    "ownerReferences",
];

/// A parsed `.a.b.c` path.
#[derive(Debug, Clone)]
pub struct JsonPath {
    pub segments: Vec<String>,
}

impl JsonPath {
    /// Parses a dotted path starting with `.`.
    pub fn parse(path: &str) -> Result<Self, String> {
        let Some(rest) = path.strip_prefix('.') else {
            return Err(format!(
                "`{path}` must start with `.`, e.g. `.spec.replicas`"
            ));
        };
        let segments: Vec<String> = rest.split('.').map(str::to_owned).collect();
        for s in &segments {
            if s.is_empty()
                || !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "`{path}` is not a simple dotted path of field names (segment `{s}`)"
                ));
            }
        }
        Ok(Self { segments })
    }

    /// The first segment: `spec`, `status` or `metadata`.
    pub fn root(&self) -> &str {
        &self.segments[0]
    }

    /// `.metadata.namespace`.
    pub fn is_namespace(&self) -> bool {
        self.segments.len() == 2
            && self.segments[0] == "metadata"
            && self.segments[1] == "namespace"
    }

    /// Checks what can be checked at compile time.
    pub fn check(&self, spec: &SpecFields, has_status: bool) -> Result<(), String> {
        let second = self.segments.get(1);
        match (self.root(), second) {
            ("metadata", Some(f)) => {
                if !META_FIELDS.contains(&f.as_str()) {
                    return Err(format!(
                        "`metadata` has no field `{f}`{}",
                        did_you_mean(f, META_FIELDS)
                    ));
                }
                Ok(())
            }
            ("spec", Some(f)) => {
                if spec.opaque || spec.names.iter().any(|n| n == f) {
                    Ok(())
                } else {
                    Err(format!(
                        "the spec has no field `{f}` (fields are named as serde serializes them){}",
                        did_you_mean(f, &spec.names)
                    ))
                }
            }
            ("status", Some(_)) if has_status => Ok(()),
            ("status", Some(_)) => Err("the path is under `.status` but the kind has no status type; add `status = \"...\"`".into()),
            (root @ ("metadata" | "spec" | "status"), None) => {
                Err(format!("`.{root}` is an object; name one of its fields"))
            }
            (root, _) => Err(format!(
                "the object has no field `{root}`; paths start with `.spec`, `.status` or `.metadata`{}",
                did_you_mean(root, &["spec", "status", "metadata"])
            )),
        }
    }
}

/// The spec struct's fields under their serialized names.
#[derive(Debug, Default, Clone)]
pub struct SpecFields {
    /// Serialized names of the (non-skipped) fields.
    pub names: Vec<String>,
    /// A flattened field makes the set open: nothing can be refused.
    pub opaque: bool,
    rename_all: Option<String>,
}

impl SpecFields {
    /// Reads the serde attributes of the struct and its fields.
    pub fn from_fields(struct_attrs: &[syn::Attribute], fields: &[SpecField]) -> Self {
        let mut out = SpecFields {
            rename_all: serde_value(struct_attrs, "rename_all"),
            ..SpecFields::default()
        };
        for f in fields {
            let Some(ident) = &f.ident else { continue };
            if serde_flag(&f.attrs, "flatten") {
                out.opaque = true;
                continue;
            }
            if serde_flag(&f.attrs, "skip") || serde_flag(&f.attrs, "skip_serializing") {
                continue;
            }
            out.names.push(out.json_name_with(ident, &f.attrs));
        }
        out
    }

    /// The serialized name of field `ident` (struct-level renaming only).
    pub fn json_name(&self, ident: &syn::Ident) -> String {
        apply_rename_all(self.rename_all.as_deref(), &ident_name(ident))
    }

    fn json_name_with(&self, ident: &syn::Ident, attrs: &[syn::Attribute]) -> String {
        serde_value(attrs, "rename").unwrap_or_else(|| self.json_name(ident))
    }
}

fn ident_name(ident: &syn::Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
}

/// `#[serde(key = "value")]` or `#[serde(key(serialize = "value"))]`.
fn serde_value(attrs: &[syn::Attribute], key: &str) -> Option<String> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(key) {
                if meta.input.peek(syn::Token![=]) {
                    let lit: syn::LitStr = meta.value()?.parse()?;
                    found = Some(lit.value());
                } else {
                    meta.parse_nested_meta(|inner| {
                        if inner.path.is_ident("serialize") {
                            let lit: syn::LitStr = inner.value()?.parse()?;
                            found = Some(lit.value());
                        } else if inner.input.peek(syn::Token![=]) {
                            let _: syn::Expr = inner.value()?.parse()?;
                        }
                        Ok(())
                    })?;
                }
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|inner| {
                    if inner.input.peek(syn::Token![=]) {
                        let _: syn::Expr = inner.value()?.parse()?;
                    }
                    Ok(())
                });
            }
            Ok(())
        });
    }
    found
}

/// `#[serde(flag)]` present.
pub fn serde_flag(attrs: &[syn::Attribute], flag: &str) -> bool {
    let mut found = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(flag) {
                found = true;
            }
            if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            } else if meta.input.peek(syn::token::Paren) {
                let _ = meta.parse_nested_meta(|inner| {
                    if inner.input.peek(syn::Token![=]) {
                        let _: syn::Expr = inner.value()?.parse()?;
                    }
                    Ok(())
                });
            }
            Ok(())
        });
    }
    found
}

fn words(snake: &str) -> Vec<String> {
    snake
        .split('_')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// serde's `rename_all` rules applied to a snake_case field name.
pub fn apply_rename_all(rule: Option<&str>, field: &str) -> String {
    let w = words(field);
    match rule {
        Some("lowercase") => field.to_lowercase(),
        Some("UPPERCASE") => field.to_uppercase(),
        Some("PascalCase") => w.iter().map(|x| capitalize(x)).collect(),
        Some("camelCase") => {
            let mut out = String::new();
            for (i, x) in w.iter().enumerate() {
                if i == 0 {
                    out.push_str(x);
                } else {
                    out.push_str(&capitalize(x));
                }
            }
            out
        }
        Some("SCREAMING_SNAKE_CASE") => field.to_uppercase(),
        Some("kebab-case") => field.replace('_', "-"),
        Some("SCREAMING-KEBAB-CASE") => field.replace('_', "-").to_uppercase(),
        _ => field.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_all_rules_match_serde() {
        assert_eq!(
            apply_rename_all(Some("camelCase"), "deployment_name"),
            "deploymentName"
        );
        assert_eq!(
            apply_rename_all(Some("PascalCase"), "deployment_name"),
            "DeploymentName"
        );
        assert_eq!(
            apply_rename_all(Some("kebab-case"), "deployment_name"),
            "deployment-name"
        );
        assert_eq!(apply_rename_all(None, "deployment_name"), "deployment_name");
    }

    #[test]
    fn paths_check_metadata_spec_and_status() {
        let spec = SpecFields {
            names: vec!["replicas".into(), "deploymentName".into()],
            ..SpecFields::default()
        };
        let check = |p: &str, status: bool| JsonPath::parse(p).and_then(|j| j.check(&spec, status));
        assert!(check(".spec.replicas", false).is_ok());
        assert!(check(".metadata.creationTimestamp", false).is_ok());
        assert!(check(".status.ready", true).is_ok());
        let e = check(".spec.deployment_name", false).unwrap_err();
        assert!(e.contains("did you mean `deploymentName`"), "{e}");
        assert!(
            check(".status.ready", false)
                .unwrap_err()
                .contains("no status type")
        );
        assert!(
            check(".sepc.replicas", false)
                .unwrap_err()
                .contains("did you mean `spec`")
        );
        assert!(check("spec.replicas", false).is_err());
        assert!(check(".spec", false).is_err());
        assert!(check(".spec.items[0]", false).is_err());
    }
}
