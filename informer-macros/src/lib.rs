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
//! See `docs/macros.md` for every attribute.

mod api_types;
mod custom_resource;
mod reconciler;

use proc_macro::TokenStream;

/// Derives a custom resource kind from its spec struct.
///
/// ```text
/// #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
/// #[resource(group = "samplecontroller.k8s.io", version = "v1alpha1", kind = "Foo",
///            namespaced, status = "FooStatus")]
/// pub struct FooSpec {
///     deployment_name: String,
///     replicas: Option<i32>,
/// }
/// ```
///
/// generates `pub struct Foo { metadata, spec: FooSpec, status: Option<FooStatus> }`
/// with `Foo::new(name, spec)`, `Foo::crd()`, and the `k8s_openapi::Resource`
/// impls that make `Api<Foo>`, informers, listers and controllers accept it.
/// Runnable examples live in `controller_runtime::crd`.
#[proc_macro_derive(CustomResource, attributes(resource, index))]
pub fn derive_custom_resource(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    custom_resource::derive(&input).into()
}

/// Derives the controller of a reconciler (its wiring) and its RBAC from
/// `#[controller(...)]` and `#[rbac(...)]`; see `docs/macros.md`.
#[proc_macro_derive(Controller, attributes(controller, rbac))]
pub fn derive_controller(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    reconciler::derive(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Checks, at compile time, every JSONPath of the `#[resource(...)]`s in an
/// inline module of API types (printer columns, scale paths, selectable
/// fields, index paths) through the spec, the status and every type the
/// module defines, honouring serde's renames; a segment that names no field
/// is a compile error on the path string, with "did you mean".
///
/// ```text
/// #[api_types]
/// mod v1alpha1 {
///     #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
///     #[resource(group = "example.com", version = "v1alpha1", kind = "Foo",
///                status = "FooStatus",
///                printcolumn(name = "Image", json_path = ".spec.template.image", type = "string"),
///                printcolumn(name = "Ready", json_path = ".status.readyReplicas", type = "integer"))]
///     pub struct FooSpec { pub template: Template }
///     // Template and FooStatus (with `#[derive(JsonSchema)]`) defined here too.
/// }
/// ```
///
/// Where a path leaves the module (a type from elsewhere, a map, an enum, a
/// generic, `serde(with)`...), checking stops and the rest is left to the
/// check `crd()` makes against the finished schema. The module is re-emitted
/// unchanged. See `docs/macros.md`.
#[proc_macro_attribute]
pub fn api_types(args: TokenStream, input: TokenStream) -> TokenStream {
    api_types::expand(args.into(), input.into()).into()
}
