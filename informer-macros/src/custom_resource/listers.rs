//! Code generation for what lister-gen and informer-gen give Go: a typed
//! `FooLister` over the informer cache (with the declared indexes), and a
//! `FooHandler` trait plugged into `SharedIndexInformer<Foo>` through
//! `Foo::handler`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use super::attrs::{IndexSource, Resource};

/// `by-deployment` -> `by_deployment`; `owner` -> `by_owner`.
pub fn index_method(name: &str) -> String {
    let snake = name.replace(['-', '.'], "_").to_ascii_lowercase();
    if snake.starts_with("by_") {
        snake
    } else {
        format!("by_{snake}")
    }
}

pub fn expand(r: &Resource) -> TokenStream {
    let krate = &r.krate;
    let p = quote!(#krate::__private);
    let ic = quote!(#p::informer_core);
    let root = &r.root;
    let vis = &r.vis;
    let kind = &r.kind;
    let lister = format_ident!("{}Lister", root);
    let handler = format_ident!("{}Handler", root);
    let adapter = format_ident!("{}EventHandler", root);
    let plural = format_ident!("{}", r.plural.replace('-', "_"));

    let index_fns = r.indexes.iter().map(|ix| {
        let name = &ix.name;
        let body = match &ix.source {
            IndexSource::Path(jp) => {
                let head = &jp.segments[0];
                let rest = &jp.segments[1..];
                let field = format_ident!("{}", head);
                quote!({
                    let value = #p::serde_json::to_value(&obj.#field).map_err(|e| ::std::string::ToString::to_string(&e))?;
                    ::core::result::Result::Ok(#p::index_values(&value, &[#(#rest),*]))
                })
            }
            IndexSource::Function(f) => quote_spanned! {ix.span=>
                { ::core::result::Result::Ok(#f(obj)) }
            },
        };
        quote! {
            (
                ::std::string::ToString::to_string(#name),
                ::std::sync::Arc::new(|obj: &#root| -> ::core::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String> #body)
                    as #ic::store::IndexFn<#root>,
            )
        }
    });

    let index_methods = r.indexes.iter().map(|ix| {
        let name = &ix.name;
        let method = format_ident!("{}", index_method(name), span = ix.span);
        let doc = format!("The cached `{kind}`s whose index `{name}` holds `value` (all namespaces).");
        quote! {
            #[doc = #doc]
            pub fn #method(&self, value: &str) -> ::core::result::Result<::std::vec::Vec<::std::sync::Arc<#root>>, #ic::lister::ListerError> {
                self.inner.by_index(#name, value)
            }
        }
    });

    let scoped = if r.namespaced {
        let doc = format!(
            "The `{kind}`s of `namespace`: `.get(name)`, `.list(&selector)`, `.by_index(..)`."
        );
        quote! {
            #[doc = #doc]
            pub fn #plural(&self, namespace: &str) -> #ic::lister::NamespaceLister<#root> {
                self.inner.namespace(namespace)
            }
        }
    } else {
        let doc = format!("The cluster-scoped `{kind}` named `name`.");
        quote! {
            #[doc = #doc]
            pub fn get(&self, name: &str) -> ::core::option::Option<::std::sync::Arc<#root>> {
                self.inner.get(name)
            }
        }
    };

    let lister_doc = format!(
        "Typed read access to an informer's cache of `{kind}`s (lister-gen's `{kind}Lister`). Make one from `factory.lister::<{kind}>()` or `informer.lister()` with `From`/`new`; register the declared indexes first with `informer.add_indexers({kind}::indexers())`."
    );
    let handler_doc = format!(
        "Typed callbacks for changes of `{kind}`s (informer-gen's handler funcs); plug one into a `SharedIndexInformer<{kind}>` with `informer.add_event_handler({kind}::handler(h))`. Every method has an empty default."
    );
    let adapter_doc = format!(
        "Adapts a [`{handler}`] to `ResourceEventHandler<{kind}>`; made by `{kind}::handler`."
    );

    quote! {
        impl #root {
            /// The indexes declared with `#[index(...)]`, to register on the
            /// informer (`add_indexers`) before asking the lister for them.
            pub fn indexers() -> ::std::vec::Vec<(::std::string::String, #ic::store::IndexFn<#root>)> {
                ::std::vec![#(#index_fns),*]
            }

            /// Wraps a typed handler for `SharedIndexInformer::add_event_handler`.
            pub fn handler<H: #handler>(handler: H) -> #adapter<H> {
                #adapter(handler)
            }
        }

        #[doc = #lister_doc]
        #[derive(::core::clone::Clone, ::core::fmt::Debug)]
        #vis struct #lister {
            inner: #ic::lister::Lister<#root>,
        }

        impl #lister {
            /// Wraps a lister of this kind.
            pub fn new(lister: #ic::lister::Lister<#root>) -> Self {
                Self { inner: lister }
            }

            #scoped

            /// Every cached object whose labels match `selector`, in all namespaces.
            pub fn list(&self, selector: &#ic::selector::LabelSelector) -> ::std::vec::Vec<::std::sync::Arc<#root>> {
                self.inner.list(selector)
            }

            #(#index_methods)*

            /// The untyped lister underneath.
            pub fn lister(&self) -> &#ic::lister::Lister<#root> {
                &self.inner
            }
        }

        impl ::core::convert::From<#ic::lister::Lister<#root>> for #lister {
            fn from(lister: #ic::lister::Lister<#root>) -> Self {
                Self::new(lister)
            }
        }

        #[doc = #handler_doc]
        #vis trait #handler: ::core::marker::Send + ::core::marker::Sync + 'static {
            /// An object entered the cache (`is_in_initial_list`: from the first list).
            fn on_add(&self, obj: ::std::sync::Arc<#root>, is_in_initial_list: bool) {
                let _ = (obj, is_in_initial_list);
            }
            /// An object changed (or was resynced, when both have the same resourceVersion).
            fn on_update(&self, old: ::std::sync::Arc<#root>, new: ::std::sync::Arc<#root>) {
                let _ = (old, new);
            }
            /// An object left the cache; a tombstone carries the last state known.
            fn on_delete(&self, obj: #ic::key::ObjectOrTombstone<#root>) {
                let _ = obj;
            }
        }

        #[doc = #adapter_doc]
        #vis struct #adapter<H>(pub H);

        impl<H: #handler> #ic::shared_informer::ResourceEventHandler<#root> for #adapter<H> {
            fn on_add(&self, obj: ::std::sync::Arc<#root>, is_in_initial_list: bool) {
                self.0.on_add(obj, is_in_initial_list);
            }
            fn on_update(&self, old: ::std::sync::Arc<#root>, new: ::std::sync::Arc<#root>) {
                self.0.on_update(old, new);
            }
            fn on_delete(&self, obj: #ic::key::ObjectOrTombstone<#root>) {
                self.0.on_delete(obj);
            }
        }
    }
}
