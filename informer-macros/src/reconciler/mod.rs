//! `#[derive(Controller)]`: a reconciler's wiring declared once, in
//! `#[controller(...)]`, and everything derived from it — the controller
//! registration with the manager, the finalizer flow, and the least-privilege
//! RBAC role that covers exactly what the wiring uses, plus the extra rules
//! declared with `#[rbac(...)]`; with `webhooks(...)`, the declaration the
//! webhook manifests are built from, and the rules its certificates need;
//! with `fleet`, the registration over the manager's fleet of clusters and
//! the RBAC of its member clusters and of its own.
//!
//! Parsing ([`attrs`]) is kept apart from code generation ([`expand`]), so
//! every mistake is reported with a span before any code is written.

mod attrs;
mod expand;
mod fleet;
mod sharding;
mod suggest;
mod webhooks;

use proc_macro2::TokenStream;
use syn::DeriveInput;

/// Expand `#[derive(Controller)]` on `input`.
pub fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    if !matches!(input.data, syn::Data::Struct(_)) {
        return Err(syn::Error::new(
            input.ident.span(),
            "`#[derive(Controller)]` goes on a struct (the reconciler's state)",
        ));
    }
    if let Some(param) = input.generics.params.first() {
        return Err(syn::Error::new_spanned(
            param,
            "`#[derive(Controller)]` does not support generic reconcilers",
        ));
    }
    let args = attrs::ReconcilerArgs::from_input(&input)?;
    Ok(expand::expand(&input, &args))
}
