//! placeholder

mod reconciler;

/// Derives a reconciler's wiring and its RBAC from `#[reconciler(...)]`
/// and `#[rbac(...)]`; see `docs/macros.md`.
#[proc_macro_derive(Reconciler, attributes(reconciler, rbac))]
pub fn derive_reconciler(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    reconciler::derive(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
