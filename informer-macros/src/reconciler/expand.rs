//! Code generation for `#[derive(Controller)]` from parsed
//! [`ReconcilerArgs`](super::attrs::ReconcilerArgs).

use super::attrs::{PredicateArg, ReconcilerArgs};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
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

/// The `controller_permissions()` body: one builder call per wired kind,
/// each spanned on the kind so a type that is not a `Resource` is reported
/// where it was written. The webhook certificates' rules are not in it
/// (see [`webhook_permissions`]).
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
    if let Some(sharding) = &args.sharding {
        calls.extend(super::sharding::permissions(sharding, for_, &args.owns));
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

/// What `permissions()` adds to `controller_permissions()`: the rules of
/// the declared webhooks' certificates (none with `cert_dir`), decided at
/// compile time with the certificate source, so a manager serving mounted
/// certificates is never granted the Secret and `caBundle` rules.
fn webhook_permissions(args: &ReconcilerArgs) -> TokenStream {
    let for_ = &args.for_;
    if args.webhooks.is_some() {
        quote!(.merge(Self::WEBHOOKS.permissions::<#for_>()))
    } else {
        TokenStream::new()
    }
}

/// `WEBHOOKS` and `webhooks(namespace)`, when `webhooks(...)` is declared.
fn webhook_items(args: &ReconcilerArgs) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    let Some(w) = &args.webhooks else {
        return TokenStream::new();
    };
    let decl = super::webhooks::declaration(w);
    quote! {
        /// The webhooks declared in `#[controller(webhooks(...))]` for the
        /// reconciled kind.
        pub const WEBHOOKS: #cr::webhook::WebhookDeclaration = #decl;

        /// The manifests of the declared webhooks with their Service in
        /// `namespace`: the webhook configurations, the Service, the
        /// conversion stanza of the kind's CRD, the manager's
        /// `WebhookOptions` and the certificates' RBAC rules (also in
        /// [`Self::permissions`]).
        pub fn webhooks(namespace: &str) -> #cr::webhook::WebhookManifests {
            #cr::__private::require_webhook!();
            #cr::webhook::WebhookManifests::for_kind::<#for_>(namespace, Self::WEBHOOKS)
        }
    }
}

/// The predicate given to `for_event_filter`, if any.
fn predicate(args: &ReconcilerArgs) -> Option<TokenStream> {
    let cr = quote!(::controller_runtime);
    args.predicate.as_ref().map(|p| match p {
        PredicateArg::Known(ty) => quote_spanned!(ty.span()=> #cr::predicate::#ty),
        PredicateArg::Expr(e) => quote!(#e),
    })
}

/// `FooReconciler::setup`: the controller registration with the manager.
fn setup(wrapper: &syn::Ident, args: &ReconcilerArgs) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    let mut owned = Vec::new();
    for kind in &args.owns {
        owned.push(quote_spanned!(kind.span()=> .owns::<#kind>()));
    }
    let mut calls = Vec::new();
    for w in &args.watches {
        let (kind, map) = (&w.kind, &w.map);
        calls.push(quote_spanned!(map.span()=> .watches_map::<#kind>(#map)));
    }
    if let Some(n) = &args.max_concurrent {
        calls.push(quote!(.max_concurrent_reconciles(#n)));
    }
    if let Some(p) = predicate(args) {
        calls.push(quote!(.for_event_filter(#p)));
    }
    let reconciler = if args.finalizer.is_some() {
        quote!(#wrapper(::std::sync::Arc::new(self)))
    } else {
        quote!(self)
    };
    let sharded = args.sharding.as_ref().map(|sharding| {
        super::sharding::setup_sharded(sharding, for_, &owned, &calls, &reconciler)
    });
    let fleet = super::fleet::items(args, &owned, &calls, &reconciler);
    quote! {
        /// Registers this reconciler's controller with `mgr`: the kinds
        /// it is for, owns and watches, its event filter and workers, as
        /// declared in `#[controller(...)]`. The manager starts it when it
        /// runs (and leads).
        pub fn setup(
            self,
            mgr: &#cr::manager::Manager,
        ) -> ::core::result::Result<#cr::controller::Controller, #cr::manager::ManagerError> {
            mgr.controller::<#for_>()
                .named(Self::CONTROLLER_NAME)
                #(#owned)*
                #(#calls)*
                .complete(#reconciler)
        }

        #sharded

        #fleet
    }
}

/// The finalizer flow: a local wrapper running `reconcile` or `cleanup`
/// inside `ObjectContext::finalizer`.
fn finalizer_flow(input: &DeriveInput, wrapper: &syn::Ident, args: &ReconcilerArgs) -> TokenStream {
    let ident = &input.ident;
    let vis = &input.vis;
    let cr = quote!(::controller_runtime);
    let for_ = &args.for_;
    let Some(fin) = &args.finalizer else {
        return TokenStream::new();
    };
    let vis_doc = format!("Runs [`{ident}`] inside its finalizer flow (generated).");
    let cleanup_check = quote_spanned! {fin.span()=>
        #cr::__private::assert_cleanup::<#for_, #ident>();
    };
    quote! {
        #[doc = #vis_doc]
        #[doc(hidden)]
        #vis struct #wrapper(::std::sync::Arc<#ident>);

        #[automatically_derived]
        impl #cr::reconcile::ObjectReconciler<#for_> for #wrapper {
            type Error = #cr::finalizer::FinalizerError<
                <#ident as #cr::reconcile::ObjectReconciler<#for_>>::Error,
            >;

            async fn reconcile(
                &self,
                obj: ::std::sync::Arc<#for_>,
                ctx: &#cr::reconcile::ObjectContext<#for_>,
            ) -> ::core::result::Result<#cr::Action, Self::Error> {
                let inner = &*self.0;
                ctx.finalizer(#fin, obj, |event| async move {
                    match event {
                        #cr::finalizer::FinalizerEvent::Apply(obj) => {
                            #cr::reconcile::ObjectReconciler::<#for_>::reconcile(inner, obj, ctx).await
                        }
                        #cr::finalizer::FinalizerEvent::Cleanup(obj) => {
                            #cr::reconcile::Cleanup::<#for_>::cleanup(inner, obj, ctx).await
                        }
                    }
                })
                .await
            }

            async fn deleted(
                &self,
                req: &#cr::Request,
                ctx: &#cr::reconcile::ObjectContext<#for_>,
            ) -> ::core::result::Result<#cr::Action, Self::Error> {
                #cr::reconcile::ObjectReconciler::<#for_>::deleted(&*self.0, req, ctx)
                    .await
                    .map_err(#cr::finalizer::FinalizerError::Apply)
            }
        }

        #[allow(dead_code)]
        const _: () = {
            fn check() {
                #cleanup_check
            }
        };
    }
}

/// The code generated for one reconciler.
pub fn expand(input: &DeriveInput, args: &ReconcilerArgs) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let ident = &input.ident;
    let wrapper = format_ident!("__{}Finalizing", ident);
    let for_ = &args.for_;
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
    let webhook_perms = webhook_permissions(args);
    let map_checks = args.watches.iter().map(|w| {
        let kind = &w.kind;
        let map = &w.map;
        quote_spanned! {map.span()=>
            let _: fn(&#kind) -> ::std::vec::Vec<#cr::Request> = #map;
        }
    });
    let reconciler_check = quote_spanned! {ident.span()=>
        #cr::__private::assert_reconciler::<#for_, #ident>();
    };
    let setup = setup(&wrapper, args);
    let webhooks = webhook_items(args);
    let flow = finalizer_flow(input, &wrapper, args);
    quote! {
        #[automatically_derived]
        impl #ident {
            /// The controller's name (metrics, logs, events, the RBAC role).
            pub const CONTROLLER_NAME: &'static str = #name;
            /// The finalizer this reconciler manages, if it declared one.
            pub const FINALIZER: ::core::option::Option<&'static str> = #finalizer;

            /// The permissions the wiring needs, with those of the declared
            /// webhooks' self-managed certificates if any: what
            /// [`Self::rbac`] renders.
            pub fn permissions() -> #cr::rbac::Permissions {
                Self::controller_permissions() #webhook_perms
            }

            /// The permissions of the controller's own wiring, without the
            /// webhook certificates' (whose Secret lives in the webhook
            /// Service's namespace, not in the watched ones: see
            /// `webhooks(namespace).permissions()`): what
            /// [`Self::rbac_role`] and [`Self::rbac_for_namespaces`] render.
            pub fn controller_permissions() -> #cr::rbac::Permissions {
                #perms
            }

            /// The least-privilege `ClusterRole` for this controller, named
            /// after it, with every rule of [`Self::permissions`] (for a
            /// manager watching every namespace).
            pub fn rbac() -> #cr::rbac::ClusterRole {
                Self::permissions().cluster_role(Self::CONTROLLER_NAME)
            }

            /// The rules of [`Self::controller_permissions`] on namespaced
            /// resources as a `Role` in `namespace` (for a manager confined
            /// to some namespaces, one per namespace). Rules on
            /// cluster-scoped resources are not in it (a Role cannot grant
            /// them): [`Self::rbac_for_namespaces`] gives them as a
            /// `ClusterRole` too.
            pub fn rbac_role(namespace: &str) -> #cr::rbac::Role {
                Self::controller_permissions().role(Self::CONTROLLER_NAME, namespace)
            }

            /// The roles, named after the controller, of a manager watching
            /// `namespaces` (every namespace when none): a `Role` in each
            /// namespace and a `ClusterRole` for the rules on
            /// cluster-scoped resources — or one `ClusterRole` of every
            /// rule when watching every namespace (see
            /// `Permissions::for_namespaces`). From
            /// [`Self::controller_permissions`].
            pub fn rbac_for_namespaces<I, S>(namespaces: I) -> #cr::rbac::ScopedRbac
            where
                I: ::core::iter::IntoIterator<Item = S>,
                S: ::core::convert::AsRef<str>,
            {
                Self::controller_permissions().for_namespaces(Self::CONTROLLER_NAME, namespaces)
            }

            #setup

            #webhooks

            #[doc(hidden)]
            #[allow(dead_code)]
            fn __reconciler_signature_checks() {
                #reconciler_check
                #(#map_checks)*
            }
        }

        #flow
    }
}
