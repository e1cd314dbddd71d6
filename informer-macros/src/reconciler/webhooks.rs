//! `webhooks(...)` inside `#[controller(...)]`: which webhooks the
//! reconciled kind has (`defaulting`, `validating`, `conversion`), their
//! `failure_policy`, `timeout_seconds`, the manager's webhook `service`
//! and, with `cert_dir`, certificates mounted from a directory instead of
//! self-managed ones (the RBAC rules for self-managed certificates are then
//! left out: the mode is chosen here, at compile time, together with the
//! rules); parsed with spanned
//! errors, expanded into a `WebhookDeclaration` constant that
//! `controller_runtime::webhook::WebhookManifests` builds the manifests and
//! RBAC rules from. The generated code needs controller-runtime's `webhook`
//! feature: without it `__private::require_webhook!` fails the build with a
//! message naming the feature.

use super::suggest;
use proc_macro2::TokenStream;
use quote::quote;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Ident, LitInt, LitStr};

/// Words `webhooks(...)` accepts.
pub const WORDS: &[&str] = &[
    "defaulting",
    "validating",
    "conversion",
    "failure_policy",
    "timeout_seconds",
    "service",
    "cert_dir",
];

/// What the API server accepts for `timeoutSeconds`.
pub const TIMEOUTS: std::ops::RangeInclusive<u8> = 1..=30;

/// Values of `failure_policy`.
pub const POLICIES: &[&str] = &["Fail", "Ignore"];

/// A parsed `webhooks(...)`.
pub struct Webhooks {
    /// `defaulting` was given.
    pub defaulting: bool,
    /// `validating` was given.
    pub validating: bool,
    /// `conversion` was given.
    pub conversion: bool,
    /// `Fail` or `Ignore`, when given.
    pub failure_policy: Option<Ident>,
    /// `timeoutSeconds` (in 1..=30), when given.
    pub timeout_seconds: Option<LitInt>,
    /// The Service's name, when given.
    pub service: Option<LitStr>,
    /// The certificate directory, when given.
    pub cert_dir: Option<LitStr>,
}

/// Whether `name` is a DNS-1035 label (a Service name): lowercase letters,
/// digits and `-`, starting with a letter, ending with a letter or digit,
/// at most 63 characters.
fn dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1] != b'-'
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn flag(slot: &mut bool, word: &Ident) -> syn::Result<()> {
    if std::mem::replace(slot, true) {
        return Err(syn::Error::new(
            word.span(),
            format!("`{word}` is given twice in `webhooks(...)`"),
        ));
    }
    Ok(())
}

/// Parses the parenthesised list after `webhooks`.
pub fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Webhooks> {
    let mut out = Webhooks {
        defaulting: false,
        validating: false,
        conversion: false,
        failure_policy: None,
        timeout_seconds: None,
        service: None,
        cert_dir: None,
    };
    let mut any = false;
    let span = meta.path.span();
    let nothing = || {
        syn::Error::new(
            span,
            "`webhooks(...)` needs at least one of `defaulting`, `validating`, `conversion`",
        )
    };
    let fork = meta.input.fork();
    let content;
    syn::parenthesized!(content in fork);
    if content.is_empty() {
        return Err(nothing());
    }
    meta.parse_nested_meta(|inner| {
        let Some(word) = inner.path.get_ident().cloned() else {
            let path = &inner.path;
            return Err(syn::Error::new(
                path.span(),
                suggest::unknown("webhook", &quote!(#path).to_string(), WORDS),
            ));
        };
        match word.to_string().as_str() {
            "defaulting" => flag(&mut out.defaulting, &word)?,
            "validating" => flag(&mut out.validating, &word)?,
            "conversion" => flag(&mut out.conversion, &word)?,
            "failure_policy" => {
                let lit: LitStr = inner.value()?.parse()?;
                let value = lit.value();
                if !POLICIES.contains(&value.as_str()) {
                    return Err(syn::Error::new(
                        lit.span(),
                        suggest::unknown("failure policy", &value, POLICIES),
                    ));
                }
                if out.failure_policy.is_some() {
                    return Err(syn::Error::new(word.span(), "duplicate option `failure_policy`"));
                }
                out.failure_policy = Some(Ident::new(&value, lit.span()));
                return Ok(());
            }
            "timeout_seconds" => {
                let lit: LitInt = inner.value()?.parse()?;
                let seconds = lit.base10_parse::<u8>().ok();
                if !seconds.is_some_and(|s| TIMEOUTS.contains(&s)) {
                    return Err(syn::Error::new(
                        lit.span(),
                        format!(
                            "webhook `timeout_seconds` must be between {} and {} (the API server refuses other values), not {}",
                            TIMEOUTS.start(),
                            TIMEOUTS.end(),
                            lit.base10_digits()
                        ),
                    ));
                }
                if out.timeout_seconds.is_some() {
                    return Err(syn::Error::new(word.span(), "duplicate option `timeout_seconds`"));
                }
                out.timeout_seconds = Some(lit);
                return Ok(());
            }
            "service" => {
                let lit: LitStr = inner.value()?.parse()?;
                if !dns_label(&lit.value()) {
                    return Err(syn::Error::new(
                        lit.span(),
                        format!(
                            "webhook service `{}` must be a Service name: lowercase letters, digits and `-`, starting with a letter, at most 63 characters",
                            lit.value()
                        ),
                    ));
                }
                if out.service.is_some() {
                    return Err(syn::Error::new(word.span(), "duplicate option `service`"));
                }
                out.service = Some(lit);
                return Ok(());
            }
            "cert_dir" => {
                let lit: LitStr = inner.value()?.parse()?;
                if lit.value().is_empty() {
                    return Err(syn::Error::new(
                        lit.span(),
                        "`cert_dir` needs the directory holding `tls.crt` and `tls.key`",
                    ));
                }
                if out.cert_dir.is_some() {
                    return Err(syn::Error::new(word.span(), "duplicate option `cert_dir`"));
                }
                out.cert_dir = Some(lit);
                return Ok(());
            }
            other => {
                return Err(syn::Error::new(
                    word.span(),
                    suggest::unknown("webhook", other, WORDS),
                ));
            }
        }
        any = true;
        Ok(())
    })?;
    if !any {
        return Err(nothing());
    }
    Ok(out)
}

/// The `WebhookDeclaration` constant expression.
pub fn declaration(w: &Webhooks) -> TokenStream {
    let cr = quote!(::controller_runtime);
    let mut calls = Vec::new();
    if w.defaulting {
        calls.push(quote!(.defaulting()));
    }
    if w.validating {
        calls.push(quote!(.validating()));
    }
    if w.conversion {
        calls.push(quote!(.conversion()));
    }
    if let Some(p) = &w.failure_policy {
        calls.push(quote!(.failure_policy(#cr::webhook::FailurePolicy::#p)));
    }
    if let Some(t) = &w.timeout_seconds {
        let t = LitInt::new(&format!("{}u8", t.base10_digits()), t.span());
        calls.push(quote!(.timeout_seconds(#t)));
    }
    if let Some(s) = &w.service {
        calls.push(quote!(.service(#s)));
    }
    if let Some(d) = &w.cert_dir {
        calls.push(quote!(.cert_dir(#d)));
    }
    quote!(#cr::webhook::WebhookDeclaration::new() #(#calls)*)
}
