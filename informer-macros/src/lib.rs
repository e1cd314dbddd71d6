//! Derive macros for informer-rs, used through `controller-runtime`
//! (`controller_runtime::CustomResource`, `controller_runtime::Controller`),
//! which re-exports them and every path the generated code names.
//!
//! - [`CustomResource`]: a custom resource kind from its spec struct — the
//!   root type, its `Resource` impls and its CustomResourceDefinition with a
//!   structural schema.
//! - [`api_types`]: on an inline module of API types, checks every
//!   JSONPath of its `#[resource(...)]`s through nested and status types.
//! - [`Controller`]: the controller of a reconciler: its registration, finalizer flow
//!   and least-privilege RBAC role.
//!
//! Every attribute is documented, with compiled examples, on the
//! re-exports in `controller-runtime`; `docs/macros.md` has the reasons,
//! the expansions and the comparison with kube-derive and controller-gen.

mod api_types;
mod custom_resource;
mod reconciler;

use proc_macro::TokenStream;

/// Derives a custom resource kind from its spec struct.
///
/// Use it as `controller_runtime::CustomResource`: the documentation of that
/// re-export lists every attribute with compiled examples.
#[proc_macro_derive(CustomResource, attributes(resource, index))]
pub fn derive_custom_resource(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    custom_resource::derive(&input).into()
}

/// Derives the controller of a reconciler (its wiring) and its RBAC from
/// `#[controller(...)]` and `#[rbac(...)]`.
///
/// Use it as `controller_runtime::Controller`: the documentation of that
/// re-export lists every option with compiled examples.
#[proc_macro_derive(Controller, attributes(controller, rbac))]
pub fn derive_controller(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    reconciler::derive(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Checks, at compile time, every JSONPath of the `#[resource(...)]`s in an
/// inline module of API types through the spec, the status and every type
/// the module defines.
///
/// Use it as `controller_runtime::api_types`: the documentation of that
/// re-export says what it follows and where it stops, with compiled
/// examples.
#[proc_macro_attribute]
pub fn api_types(args: TokenStream, input: TokenStream) -> TokenStream {
    api_types::expand(args.into(), input.into()).into()
}
