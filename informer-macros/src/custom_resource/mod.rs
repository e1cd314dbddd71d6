//! `#[derive(CustomResource)]`: attributes are parsed and checked in
//! [`attrs`] (with [`names`], [`paths`] and [`fields`] for the rules), then
//! [`expand`] generates the root type and [`listers`] the typed lister and
//! handler.

pub(crate) mod attrs;
mod expand;
mod fields;
mod listers;
pub(crate) mod names;
pub(crate) mod paths;

use darling::FromDeriveInput;
use proc_macro2::TokenStream;

/// The derive's entry point.
pub fn derive(input: &syn::DeriveInput) -> TokenStream {
    match attrs::RawResource::from_derive_input(input).and_then(attrs::RawResource::check) {
        Ok(resource) => {
            let mut out = expand::expand(&resource);
            out.extend(listers::expand(&resource));
            out
        }
        Err(e) => e.write_errors(),
    }
}
