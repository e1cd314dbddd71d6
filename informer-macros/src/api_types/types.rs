//! The module's type table: every struct and enum an `#[api_types]` module
//! defines, read with the serde (and schemars) attributes that decide its
//! JSON shape, and the [`Shape`] a Rust type takes in the schema.
//!
//! Everything here errs towards [`Shape::Open`] ("anything may be below"):
//! a type the module does not define, a generic, an enum, a custom
//! (de)serializer or schema, a flatten into something unknown. Only what
//! the module spells out is ever used to refuse a path.

use std::collections::{BTreeMap, BTreeSet};

use crate::custom_resource::paths::apply_rename_all;

/// What a Rust type is in the generated schema, as far as paths go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A struct of the module: its serialized fields can be listed.
    Struct(String),
    /// A list (`Vec`, sets, arrays) of the inner shape.
    List(Box<Shape>),
    /// A string, integer, number or boolean: it has no fields.
    Scalar(&'static str),
    /// Unknown to the module (or a map): any field may exist below.
    Open,
}

/// One serialized field of a struct.
#[derive(Debug, Clone)]
pub struct Field {
    /// The name serde (and the schema) give it.
    pub json: String,
    /// Its Rust type, or `None` when its schema is custom (`with`,
    /// `schema_with`, `preserve_unknown_fields`...): anything may be below.
    pub ty: Option<syn::Type>,
}

/// A struct the module defines, reduced to what paths need.
#[derive(Debug, Clone)]
pub enum TypeDef {
    /// Named fields; `open` when a flatten or struct-level option makes
    /// unlisted names possible. `flattened` are types merged in.
    Fields {
        fields: Vec<Field>,
        flattened: Vec<syn::Type>,
        open: bool,
    },
    /// Serialized as its one inner type (newtype, `transparent`).
    Inner(syn::Type),
    /// Anything else: an enum, a generic type, a custom schema.
    Opaque,
}

/// The serde/schemars attributes of one item or field that matter here.
#[derive(Debug, Default)]
pub struct SerdeMeta {
    /// `rename = "..."` (or `rename(serialize = "...")`).
    pub rename: Option<String>,
    /// `rename_all = "..."` (or its `serialize` form).
    pub rename_all: Option<String>,
    /// `tag = "..."`: a struct's extra field.
    pub tag: Option<String>,
    /// Every key seen (`flatten`, `skip`, `with`...).
    pub keys: BTreeSet<String>,
    /// An attribute could not be read: assume the worst.
    pub unreadable: bool,
}

impl SerdeMeta {
    /// Reads `#[serde(...)]` then `#[schemars(...)]` (schemars wins).
    pub fn read(attrs: &[syn::Attribute]) -> Self {
        let mut out = SerdeMeta::default();
        for name in ["serde", "schemars"] {
            for attr in attrs.iter().filter(|a| a.path().is_ident(name)) {
                if attr.parse_nested_meta(|meta| out.entry(meta)).is_err() {
                    out.unreadable = true;
                }
            }
        }
        out
    }

    fn entry(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let mut value = None;
        if meta.input.peek(syn::Token![=]) {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = meta.value()?.parse::<syn::Expr>()?
            {
                value = Some(s.value());
            }
        } else if meta.input.peek(syn::token::Paren) {
            meta.parse_nested_meta(|inner| {
                let serialize = inner.path.is_ident("serialize");
                if inner.input.peek(syn::Token![=]) {
                    let expr: syn::Expr = inner.value()?.parse()?;
                    if let (
                        true,
                        syn::Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Str(s),
                            ..
                        }),
                    ) = (serialize, expr)
                    {
                        value = Some(s.value());
                    }
                } else if inner.input.peek(syn::token::Paren) {
                    let _group: proc_macro2::Group = inner.input.parse()?;
                }
                Ok(())
            })?;
        }
        match key.as_str() {
            "rename" => self.rename = value.or(self.rename.take()),
            "rename_all" => self.rename_all = value.or(self.rename_all.take()),
            "tag" => self.tag = value.or(self.tag.take()),
            _ => {}
        }
        self.keys.insert(key);
        Ok(())
    }

    fn has(&self, key: &str) -> bool {
        self.keys.contains(key)
    }
}

/// Struct-level options after which the Rust fields no longer describe the
/// schema.
const OPAQUE_ITEM_KEYS: &[&str] = &[
    "from",
    "into",
    "try_from",
    "remote",
    "with",
    "schema_with",
    "extend",
    "untagged",
    "content",
];

/// Field-level options that replace the field's schema or serialization.
const OPAQUE_FIELD_KEYS: &[&str] = &["with", "serialize_with", "schema_with", "extend"];

/// The structs and enums of one module, by name.
#[derive(Debug, Default)]
pub struct TypeTable {
    defs: BTreeMap<String, TypeDef>,
    /// Names brought in by `use`: never taken for std's.
    imported: BTreeSet<String>,
}

impl TypeTable {
    /// Reads the items of a module's body.
    pub fn from_items(items: &[syn::Item]) -> Self {
        let mut table = TypeTable::default();
        for item in items {
            match item {
                syn::Item::Struct(s) => {
                    table.defs.insert(s.ident.to_string(), struct_def(s));
                }
                syn::Item::Enum(e) => {
                    table.defs.insert(e.ident.to_string(), TypeDef::Opaque);
                }
                syn::Item::Type(t) => {
                    table.defs.insert(t.ident.to_string(), TypeDef::Opaque);
                }
                syn::Item::Union(u) => {
                    table.defs.insert(u.ident.to_string(), TypeDef::Opaque);
                }
                syn::Item::Use(u) => collect_use(&u.tree, &mut table.imported),
                _ => {}
            }
        }
        table
    }

    /// The definition of a module struct.
    pub fn def(&self, name: &str) -> Option<&TypeDef> {
        self.defs.get(name)
    }

    /// The shape `ty` takes in the schema.
    pub fn shape(&self, ty: &syn::Type) -> Shape {
        self.shape_at(ty, 0)
    }

    fn shape_at(&self, ty: &syn::Type, depth: usize) -> Shape {
        if depth > 32 {
            return Shape::Open;
        }
        match ty {
            syn::Type::Paren(p) => self.shape_at(&p.elem, depth + 1),
            syn::Type::Group(g) => self.shape_at(&g.elem, depth + 1),
            syn::Type::Reference(r) => self.shape_at(&r.elem, depth + 1),
            syn::Type::Array(a) => Shape::List(Box::new(self.shape_at(&a.elem, depth + 1))),
            syn::Type::Slice(s) => Shape::List(Box::new(self.shape_at(&s.elem, depth + 1))),
            syn::Type::Path(p) if p.qself.is_none() => self.path_shape(&p.path, depth),
            _ => Shape::Open,
        }
    }

    fn path_shape(&self, path: &syn::Path, depth: usize) -> Shape {
        // `Name` or `self::Name`; anything longer leaves the module.
        let segs: Vec<&syn::PathSegment> = path.segments.iter().collect();
        let last = match segs.as_slice() {
            [one] if path.leading_colon.is_none() => *one,
            [first, one] if path.leading_colon.is_none() && first.ident == "self" => *one,
            _ => return Shape::Open,
        };
        let name = last.ident.to_string();
        let args: Vec<&syn::Type> = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) => a
                .args
                .iter()
                .filter_map(|g| match g {
                    syn::GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .collect(),
            syn::PathArguments::None => Vec::new(),
            syn::PathArguments::Parenthesized(_) => return Shape::Open,
        };
        if let Some(def) = self.defs.get(&name) {
            if !args.is_empty() {
                return Shape::Open;
            }
            return match def {
                TypeDef::Fields { .. } => Shape::Struct(name),
                TypeDef::Inner(inner) => self.shape_at(inner, depth + 1),
                TypeDef::Opaque => Shape::Open,
            };
        }
        if self.imported.contains(&name) {
            return Shape::Open;
        }
        match (name.as_str(), args.as_slice()) {
            ("Option" | "Box" | "Arc" | "Rc", [inner]) => self.shape_at(inner, depth + 1),
            (
                "Vec" | "VecDeque" | "LinkedList" | "HashSet" | "BTreeSet" | "BinaryHeap",
                [inner],
            ) => Shape::List(Box::new(self.shape_at(inner, depth + 1))),
            ("String" | "str" | "char", []) => Shape::Scalar("string"),
            ("bool", []) => Shape::Scalar("boolean"),
            (
                "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64"
                | "u128" | "usize",
                [],
            ) => Shape::Scalar("integer"),
            ("f32" | "f64", []) => Shape::Scalar("number"),
            // Maps (`additionalProperties`) and everything from elsewhere.
            _ => Shape::Open,
        }
    }
}

/// Names a `use` tree brings into scope (a glob brings none by name).
fn collect_use(tree: &syn::UseTree, out: &mut BTreeSet<String>) {
    match tree {
        syn::UseTree::Path(p) => collect_use(&p.tree, out),
        syn::UseTree::Name(n) => {
            out.insert(n.ident.to_string());
        }
        syn::UseTree::Rename(r) => {
            out.insert(r.rename.to_string());
        }
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| collect_use(t, out)),
        syn::UseTree::Glob(_) => {}
    }
}

/// Derives a struct's schema comes from: `JsonSchema` must be derived for
/// its fields to be the schema's properties.
fn derives_json_schema(attrs: &[syn::Attribute]) -> bool {
    let mut found = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("derive")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "JsonSchema")
            {
                found = true;
            }
            Ok(())
        });
    }
    found
}

fn struct_def(s: &syn::ItemStruct) -> TypeDef {
    let meta = SerdeMeta::read(&s.attrs);
    if !s.generics.params.is_empty()
        || !derives_json_schema(&s.attrs)
        || meta.unreadable
        || OPAQUE_ITEM_KEYS.iter().any(|k| meta.has(k))
    {
        return TypeDef::Opaque;
    }
    let live: Vec<&syn::Field> = s
        .fields
        .iter()
        .filter(|f| {
            let m = SerdeMeta::read(&f.attrs);
            !(m.has("skip") || m.has("skip_serializing"))
        })
        .collect();
    match &s.fields {
        syn::Fields::Named(_) if meta.has("transparent") => match live.as_slice() {
            [one] => TypeDef::Inner(one.ty.clone()),
            _ => TypeDef::Opaque,
        },
        syn::Fields::Named(_) => {
            let mut fields = Vec::new();
            let mut flattened = Vec::new();
            let mut open = false;
            if let Some(tag) = &meta.tag {
                fields.push(Field {
                    json: tag.clone(),
                    ty: None,
                });
            }
            for f in live {
                let Some(ident) = &f.ident else { continue };
                let fm = SerdeMeta::read(&f.attrs);
                if fm.unreadable {
                    open = true;
                    continue;
                }
                if fm.has("flatten") {
                    flattened.push(f.ty.clone());
                    continue;
                }
                let rust = ident.to_string();
                let rust = rust.strip_prefix("r#").unwrap_or(&rust).to_owned();
                let json = fm
                    .rename
                    .clone()
                    .unwrap_or_else(|| apply_rename_all(meta.rename_all.as_deref(), &rust));
                let custom = OPAQUE_FIELD_KEYS.iter().any(|k| fm.has(k))
                    || preserves_unknown_fields(&f.attrs);
                fields.push(Field {
                    json,
                    ty: (!custom).then(|| f.ty.clone()),
                });
            }
            TypeDef::Fields {
                fields,
                flattened,
                open,
            }
        }
        syn::Fields::Unnamed(u) if u.unnamed.len() == 1 => match live.as_slice() {
            [one] => TypeDef::Inner(one.ty.clone()),
            _ => TypeDef::Opaque,
        },
        _ => TypeDef::Opaque,
    }
}

/// `#[resource(preserve_unknown_fields)]` on a spec field.
fn preserves_unknown_fields(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("resource"))
        .any(|a| {
            a.meta
                .require_list()
                .map(|l| l.tokens.to_string().contains("preserve_unknown_fields"))
                .unwrap_or(true)
        })
}
