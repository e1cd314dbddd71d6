//! Code generation for `#[derive(Reconciler)]` from parsed
//! [`ReconcilerArgs`](super::attrs::ReconcilerArgs).

use super::attrs::ReconcilerArgs;
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::DeriveInput;
use syn::spanned::Spanned;

/// `FooReconciler` -> `foo-reconciler`.
pub fn kebab(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The `permissions()` body: one builder call per wired kind, each spanned
/// on the kind so a type that is not a `Resource` is reported where it was
/// written.
fn permissions(args: &ReconcilerArgs) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    let mut calls = vec![quote_spanned!(for_.span()=> .primary::<#for_>())];
    for kind in &args.owns {
        calls.push(quote_spanned!(kind.span()=> .owns::<#kind>()));
    }
    for w in &args.watches {
        let kind = &w.kind;
        calls.push(quote_spanned!(kind.span()=> .watches::<#kind>()));
    }
    calls.push(quote!(.events()));
    if args.leader_election {
        calls.push(quote!(.leases()));
    }
    for rule in &args.rbac {
        let group = &rule.group;
        let resources = &rule.resources;
        let verbs = &rule.verbs;
        let names = &rule.names;
        let names = if names.is_empty() {
            quote!(::core::iter::empty::<&str>())
        } else {
            quote!([#(#names),*])
        };
        for resource in resources {
            calls.push(quote!(.named_rule(#group, #resource, #names, [#(#verbs),*])));
        }
    }
    quote!(#cr::rbac::Permissions::new() #(#calls)*)
}

/// The code generated for one reconciler.
pub fn expand(input: &DeriveInput, args: &ReconcilerArgs) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let ident = &input.ident;
    let name = args
        .name
        .as_ref()
        .map(syn::LitStr::value)
        .unwrap_or_else(|| kebab(&ident.to_string()));
    let finalizer = match &args.finalizer {
        Some(f) => quote!(::core::option::Option::Some(#f)),
        None => quote!(::core::option::Option::None),
    };
    let perms = permissions(args);
    let map_checks = args.watches.iter().map(|w| {
        let kind = &w.kind;
        let map = &w.map;
        quote_spanned! {map.span()=>
            let _: fn(&#kind) -> ::std::vec::Vec<#cr::reconcile::Request> = #map;
        }
    });
    quote! {
        #[automatically_derived]
        impl #ident {
            /// The controller's name (metrics, logs, events, the RBAC role).
            pub const CONTROLLER_NAME: &'static str = #name;
            /// The finalizer this reconciler manages, if it declared one.
            pub const FINALIZER: ::core::option::Option<&'static str> = #finalizer;

            /// The permissions the wiring needs: what
            /// [`Self::rbac`] and [`Self::rbac_role`] render.
            pub fn permissions() -> #cr::rbac::Permissions {
                #perms
            }

            /// The least-privilege `ClusterRole` for this controller, named
            /// after it (for a manager watching every namespace).
            pub fn rbac() -> #cr::rbac::ClusterRole {
                Self::permissions().cluster_role(Self::CONTROLLER_NAME)
            }

            /// The same rules as a `Role` in `namespace` (for a manager
            /// confined to one namespace).
            pub fn rbac_role(namespace: &str) -> #cr::rbac::Role {
                Self::permissions().role(Self::CONTROLLER_NAME, namespace)
            }

            #[doc(hidden)]
            #[allow(dead_code)]
            fn __reconciler_signature_checks() {
                #(#map_checks)*
            }
        }
    }
}
