//! Derive macros for informer-rs, used through `controller-runtime`
//! (`controller_runtime::CustomResource`), which re-exports them and every
//! path the generated code names.
//!
//! - [`CustomResource`]: a custom resource kind from its spec struct — the
//!   root type, its `Resource` impls and its CustomResourceDefinition with a
//!   structural schema. See `docs/macros.md` for every attribute.

mod custom_resource;

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
