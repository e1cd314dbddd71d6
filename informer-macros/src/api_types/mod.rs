//! `#[api_types]` on an inline module holding a kind's API types (the
//! shape of kubebuilder's `api/v1` package): with every struct of the
//! module in view, including its serde attributes, each JSONPath of every
//! `#[resource(...)]` in the module is resolved through the spec, the
//! status and the types they use, at compile time.
//!
//! [`types`] reads the module into a table of shapes, [`resolve`] walks a
//! path through it. The module is re-emitted unchanged (the derives inside
//! still run and still check the first spec segment and `.metadata`); only
//! `compile_error!`s are added, spanned on the path string.

mod resolve;
mod types;

use darling::util::SpannedValue;
use darling::{FromDeriveInput, FromMeta};
use proc_macro2::TokenStream;

use crate::custom_resource::attrs::{IndexAttr, RawResource};
use crate::custom_resource::paths::JsonPath;
use resolve::{Lists, resolve};
use types::TypeTable;

/// The attribute's entry point.
pub fn expand(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut out = input.clone();
    if !args.is_empty() {
        out.extend(
            syn::Error::new_spanned(&args, "`#[api_types]` takes no arguments")
                .into_compile_error(),
        );
        return out;
    }
    let item: syn::Item = match syn::parse2(input) {
        Ok(item) => item,
        Err(e) => return e.into_compile_error(),
    };
    let items = match &item {
        syn::Item::Mod(syn::ItemMod {
            content: Some((_, items)),
            ..
        }) => items,
        other => {
            out.extend(
                syn::Error::new_spanned(
                    other,
                    "`#[api_types]` goes on an inline module holding the API types: `mod v1 { ... }`",
                )
                .into_compile_error(),
            );
            return out;
        }
    };
    let table = TypeTable::from_items(items);
    for s in items.iter().filter_map(|i| match i {
        syn::Item::Struct(s) if derives_custom_resource(&s.attrs) => Some(s),
        _ => None,
    }) {
        for e in check_resource(&table, s) {
            out.extend(e.into_compile_error());
        }
    }
    out
}

fn derives_custom_resource(attrs: &[syn::Attribute]) -> bool {
    let mut found = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("derive")) {
        let _ = attr.parse_nested_meta(|meta| {
            found |= meta
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "CustomResource");
            Ok(())
        });
    }
    found
}

/// One path to check: what names it, the path, how it treats lists.
type Named<'a> = (&'static str, &'a SpannedValue<String>, Lists);

/// The errors of one `#[resource(...)]` struct's paths. Attributes the
/// derive cannot parse are left to its own errors.
fn check_resource(table: &TypeTable, s: &syn::ItemStruct) -> Vec<syn::Error> {
    let Ok(raw) = RawResource::from_derive_input(&syn::DeriveInput::from(s.clone())) else {
        return Vec::new();
    };
    let index_attrs: Vec<IndexAttr> = raw
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("index"))
        .filter_map(|a| IndexAttr::from_meta(&a.meta).ok())
        .collect();
    let mut named: Vec<Named<'_>> = Vec::new();
    for c in &raw.printcolumns {
        named.push(("printcolumn json_path", &c.json_path, Lists::Refuse));
    }
    if let Some(scale) = &raw.scale {
        named.push(("scale spec", &scale.spec, Lists::Refuse));
        named.push(("scale status", &scale.status, Lists::Refuse));
        if let Some(sel) = &scale.selector {
            named.push(("scale selector", sel, Lists::Refuse));
        }
    }
    for p in &raw.selectable {
        named.push(("selectable", p, Lists::Refuse));
    }
    for ix in &index_attrs {
        if let Some(p) = &ix.path {
            named.push(("index path", p, Lists::StepInto));
        }
    }

    let spec_ty = syn::Type::Path(syn::TypePath {
        qself: None,
        path: s.ident.clone().into(),
    });
    let spec = table.shape(&spec_ty);
    let status = raw.status.as_ref().map(|t| table.shape(t));
    let mut errors = Vec::new();
    for (what, path, lists) in named {
        let Ok(jp) = JsonPath::parse(path) else {
            continue; // the derive reports it
        };
        let (start, first_checked) = match (jp.root(), &status) {
            // The derive checks the first spec segment itself.
            ("spec", _) => (spec.clone(), 1),
            ("status", Some(shape)) => (shape.clone(), 0),
            _ => continue,
        };
        let prefix = format!(".{}", jp.root());
        if let Err(e) = resolve(table, start, &prefix, &jp.segments[1..], lists)
            && e.at >= first_checked
        {
            errors.push(syn::Error::new(
                path.span(),
                format!("{what}: {}", e.message),
            ));
        }
    }
    errors
}
