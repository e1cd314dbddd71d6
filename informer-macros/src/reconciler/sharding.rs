//! `sharding(...)` in `#[controller(...)]`: the derived controller runs
//! sharded over the replicas of a ring (`setup_sharded`), and its RBAC
//! gains the shard Leases' rules and, in label mode, the sharder's label
//! rules on the reconciled and owned kinds.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{LitStr, Type};

use super::suggest;

/// Keys `sharding(...)` accepts.
pub const KEYS: &[&str] = &["mode"];

/// Values of `mode = "..."`.
pub const MODES: &[&str] = &["filter", "label"];

/// How the derived controller is sharded.
pub struct Sharding {
    /// Label mode (else filter mode).
    pub label: bool,
    /// The attribute's span, for errors about it.
    pub span: proc_macro2::Span,
}

/// Parses `sharding` or `sharding(mode = "filter" | "label")`.
pub fn parse(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Sharding> {
    let span = meta.path.span();
    let mut mode: Option<LitStr> = None;
    if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|inner| {
            let key = inner
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            if key != "mode" {
                return Err(syn::Error::new(
                    inner.path.span(),
                    suggest::unknown("`sharding` option", &key, KEYS),
                ));
            }
            let lit: LitStr = inner.value()?.parse()?;
            if !MODES.contains(&lit.value().as_str()) {
                return Err(syn::Error::new(
                    lit.span(),
                    suggest::unknown("sharding mode", &lit.value(), MODES),
                ));
            }
            if mode.replace(lit).is_some() {
                return Err(syn::Error::new(
                    inner.path.span(),
                    "duplicate option `mode`",
                ));
            }
            Ok(())
        })?;
    }
    Ok(Sharding {
        label: mode.is_some_and(|m| m.value() == "label"),
        span,
    })
}

/// The permissions a sharded controller adds: the shard Leases', and in
/// label mode the sharder's on the reconciled and each owned kind.
pub fn permissions(sharding: &Sharding, for_: &Type, owns: &[Type]) -> Vec<TokenStream> {
    let mut calls = vec![quote!(.sharded_leases())];
    if sharding.label {
        calls.push(quote_spanned!(for_.span()=> .sharded_labels::<#for_>()));
        for kind in owns {
            calls.push(quote_spanned!(kind.span()=> .sharded_labels::<#kind>()));
        }
    }
    calls
}

/// `setup_sharded`: `setup`'s wiring behind `.sharded(..)` (label mode
/// labels the owned kinds wherever they are declared).
pub fn setup_sharded(
    sharding: &Sharding,
    for_: &Type,
    owned: &[TokenStream],
    before: &[TokenStream],
    reconciler: &TokenStream,
) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let mode = if sharding.label {
        quote!(#cr::sharding::config::ShardMode::Label)
    } else {
        quote!(#cr::sharding::config::ShardMode::Filter)
    };
    let mode_doc = if sharding.label { "label" } else { "filter" };
    let doc = format!(
        " Registers this reconciler's controller with `mgr`, sharded over the\n \
         replicas of `config`'s ring in {mode_doc} mode (the mode declared in\n \
         `sharding(...)`; `config`'s own mode is replaced by it): the wiring of\n \
         [`Self::setup`], finalizer included, behind the shard's gate.\n \
         Each replica calls it with its own identity (the default: a fresh one\n \
         per process). The rules it needs are in [`Self::permissions`]."
    );
    quote! {
        #[doc = #doc]
        pub fn setup_sharded(
            self,
            mgr: &#cr::manager::Manager,
            config: #cr::sharding::config::ShardingConfig,
        ) -> ::core::result::Result<#cr::controller::Controller, #cr::manager::ManagerError> {
            #cr::__private::require_sharding!();
            let membership = #cr::sharding::membership::Membership::new(
                mgr.client(),
                config.mode(#mode),
            )?;
            #cr::sharding::controller::ShardedExt::sharded(
                mgr.controller::<#for_>()
                    .named(Self::CONTROLLER_NAME)
                    #(#before)*,
                &membership,
            )
            #(#owned)*
            .complete(#reconciler)
        }
    }
}
