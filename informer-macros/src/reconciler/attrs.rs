//! Parsing `#[controller(...)]` and `#[rbac(...)]` into [`ReconcilerArgs`],
//! with every mistake reported as a spanned error on the offending token.

use super::suggest;
use syn::parse::ParseStream;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, DeriveInput, Expr, ExprPath, LitInt, LitStr, Token, Type};

/// Options `#[controller(...)]` accepts.
pub const OPTIONS: &[&str] = &[
    "for",
    "owns",
    "watches",
    "max_concurrent",
    "finalizer",
    "predicate",
    "name",
    "leader_election",
    "webhooks",
    "sharding",
    "fleet",
];

/// Options `#[rbac(...)]` accepts.
pub const RBAC_OPTIONS: &[&str] = &["group", "resources", "verbs", "names"];

/// Verbs an `#[rbac]` rule may name.
pub const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "bind",
    "escalate",
    "impersonate",
    "use",
    "approve",
    "sign",
    "*",
];

/// Built-in predicates `predicate = ...` names, and the types they mean.
pub const PREDICATES: &[(&str, &str)] = &[
    ("generation_changed", "GenerationChanged"),
    ("resource_version_changed", "ResourceVersionChanged"),
    ("labels_changed", "LabelsChanged"),
    ("annotations_changed", "AnnotationsChanged"),
];

/// A kind watched through a map function.
pub struct Watch {
    /// The watched kind.
    pub kind: Type,
    /// The function mapping one of its objects to primary requests.
    pub map: ExprPath,
}

/// The event filter on the primary kind.
pub enum PredicateArg {
    /// A built-in predicate, by the type it names.
    Known(syn::Ident),
    /// Any expression whose value implements the predicate trait.
    Expr(Expr),
}

/// One extra rule from `#[rbac(...)]`.
pub struct RbacRule {
    /// API group (`""` for core).
    pub group: LitStr,
    /// Resources (plural, or `plural/subresource`).
    pub resources: Vec<LitStr>,
    /// Verbs.
    pub verbs: Vec<LitStr>,
    /// Object names the rule is narrowed to.
    pub names: Vec<LitStr>,
}

/// Everything the derive was told.
pub struct ReconcilerArgs {
    /// The reconciled (primary) kind.
    pub for_: Type,
    /// Owned kinds, in declaration order, without duplicates.
    pub owns: Vec<Type>,
    /// Kinds watched through map functions.
    pub watches: Vec<Watch>,
    /// Workers.
    pub max_concurrent: Option<LitInt>,
    /// The finalizer name, when the reconciler cleans up.
    pub finalizer: Option<LitStr>,
    /// Event filter on the primary kind.
    pub predicate: Option<PredicateArg>,
    /// Controller name.
    pub name: Option<LitStr>,
    /// Whether the manager runs with leader election (adds the Lease rule).
    pub leader_election: bool,
    /// Extra RBAC rules.
    pub rbac: Vec<RbacRule>,
    /// The webhooks declared for the primary kind.
    pub webhooks: Option<super::webhooks::Webhooks>,
    /// Whether (and how) the controller can run sharded.
    pub sharding: Option<super::sharding::Sharding>,
    /// Where `fleet` was declared: the controller can also run over the
    /// manager's fleet of clusters.
    pub fleet: Option<proc_macro2::Span>,
}

/// Types compared by their tokens (`Deployment` and `apps::v1::Deployment`
/// count as different; that is as far as a macro can see).
fn same_type(a: &Type, b: &Type) -> bool {
    quote::quote!(#a).to_string() == quote::quote!(#b).to_string()
}

fn set_once<T>(slot: &mut Option<T>, value: T, key: &syn::Path) -> syn::Result<()> {
    if slot.is_some() {
        let name = key.get_ident().map(ToString::to_string).unwrap_or_default();
        return Err(syn::Error::new(
            key.span(),
            format!("duplicate option `{name}`"),
        ));
    }
    *slot = Some(value);
    Ok(())
}

/// A string, or a bare identifier read as one (`resources(pods, "foos")`).
fn string_or_ident(input: ParseStream) -> syn::Result<LitStr> {
    if input.peek(LitStr) {
        input.parse()
    } else if input.peek(Token![*]) {
        let star: Token![*] = input.parse()?;
        Ok(LitStr::new("*", star.span))
    } else {
        let ident: syn::Ident = syn::ext::IdentExt::parse_any(input)?;
        Ok(LitStr::new(&ident.to_string(), ident.span()))
    }
}

fn string_list(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Vec<LitStr>> {
    let content;
    syn::parenthesized!(content in meta.input);
    let list = Punctuated::<LitStr, Token![,]>::parse_terminated_with(&content, string_or_ident)?;
    Ok(list.into_iter().collect())
}

fn parse_watch(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Watch> {
    let content;
    let parens = syn::parenthesized!(content in meta.input);
    let kind: Type = content.parse()?;
    let mut map = None;
    while !content.is_empty() {
        content.parse::<Token![,]>()?;
        if content.is_empty() {
            break;
        }
        let key: syn::Ident = syn::ext::IdentExt::parse_any(&content)?;
        if key != "map" {
            return Err(syn::Error::new(
                key.span(),
                suggest::unknown("`watches` option", &key.to_string(), &["map"]),
            ));
        }
        content.parse::<Token![=]>()?;
        let path: ExprPath = content.parse()?;
        if map.replace(path).is_some() {
            return Err(syn::Error::new(key.span(), "duplicate option `map`"));
        }
    }
    let map = map.ok_or_else(|| {
        syn::Error::new(
            parens.span.join(),
            "`watches` needs a map function: `watches(Kind, map = Self::kind_to_requests)`, \
             where `fn kind_to_requests(obj: Arc<Kind>) -> Vec<Request>`",
        )
    })?;
    Ok(Watch { kind, map })
}

/// Parses `fleet` (a flag: it takes no arguments); returns its span.
fn parse_fleet(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<proc_macro2::Span> {
    let span = meta.path.span();
    if meta.input.peek(syn::token::Paren) || meta.input.peek(syn::Token![=]) {
        return Err(syn::Error::new(
            span,
            "`fleet` takes no arguments: write `#[controller(for = Kind, fleet)]`; the clusters \
             come from the manager's providers at run time",
        ));
    }
    Ok(span)
}

/// The error for `fleet` beside `sharding(mode = "label")`.
fn fleet_with_label_mode(span: proc_macro2::Span) -> syn::Error {
    syn::Error::new(
        span,
        "`fleet` shards in filter mode only (the sharder would have to label objects in every \
         member cluster): write `sharding` or `sharding(mode = \"filter\")` beside `fleet`",
    )
}

fn parse_predicate(expr: Expr) -> syn::Result<PredicateArg> {
    let Expr::Path(p) = &expr else {
        return Ok(PredicateArg::Expr(expr));
    };
    let Some(ident) = p.path.get_ident() else {
        return Ok(PredicateArg::Expr(expr));
    };
    let word = ident.to_string();
    if let Some((_, ty)) = PREDICATES.iter().find(|(n, _)| *n == word) {
        return Ok(PredicateArg::Known(syn::Ident::new(ty, ident.span())));
    }
    // A lower-case bare word is meant as a built-in name; anything else
    // (a constant, a unit struct) is an expression.
    if word.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        let known: Vec<&str> = PREDICATES.iter().map(|(n, _)| *n).collect();
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "{} (or give an expression implementing `Predicate`, e.g. `predicate = my_filter()`)",
                suggest::unknown("predicate", &word, &known)
            ),
        ));
    }
    Ok(PredicateArg::Expr(expr))
}

/// A finalizer name must be qualified (`domain/name`), as the API server
/// warns for anything else.
fn check_finalizer(lit: &LitStr) -> syn::Result<()> {
    let value = lit.value();
    let ok = match value.split_once('/') {
        Some((domain, name)) => {
            !domain.is_empty()
                && !name.is_empty()
                && domain.contains('.')
                && !name.contains('/')
                && domain
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        }
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(syn::Error::new(
            lit.span(),
            format!(
                "finalizer `{value}` must be a domain-qualified name such as `example.com/cleanup`"
            ),
        ))
    }
}

impl ReconcilerArgs {
    /// Read the `#[controller]` and `#[rbac]` attributes of `input`.
    pub fn from_input(input: &DeriveInput) -> syn::Result<Self> {
        let mut for_: Option<Type> = None;
        let mut owns: Vec<Type> = Vec::new();
        let mut watches = Vec::new();
        let mut max_concurrent = None;
        let mut finalizer = None;
        let mut predicate = None;
        let mut name = None;
        let mut leader_election = None;
        let mut rbac = Vec::new();
        let mut webhooks = None;
        let mut sharding: Option<super::sharding::Sharding> = None;
        let mut fleet = None;
        let mut leader_span = None;
        let mut first_attr: Option<&Attribute> = None;
        for attr in &input.attrs {
            if attr.path().is_ident("rbac") {
                rbac.push(parse_rbac(attr)?);
                continue;
            }
            if !attr.path().is_ident("controller") {
                continue;
            }
            first_attr.get_or_insert(attr);
            attr.parse_nested_meta(|meta| {
                let key = meta
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                match key.as_str() {
                    "for" => set_once(&mut for_, meta.value()?.parse::<Type>()?, &meta.path),
                    "owns" => {
                        let content;
                        syn::parenthesized!(content in meta.input);
                        let kinds = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
                        for kind in kinds {
                            if owns.iter().any(|k| same_type(k, &kind)) {
                                return Err(syn::Error::new(
                                    kind.span(),
                                    format!("duplicate `owns` kind `{}`", quote::quote!(#kind)),
                                ));
                            }
                            owns.push(kind);
                        }
                        Ok(())
                    }
                    "watches" => {
                        watches.push(parse_watch(&meta)?);
                        Ok(())
                    }
                    "max_concurrent" => {
                        let n: LitInt = meta.value()?.parse()?;
                        if n.base10_parse::<usize>()? == 0 {
                            return Err(syn::Error::new(
                                n.span(),
                                "`max_concurrent` must be at least 1",
                            ));
                        }
                        set_once(&mut max_concurrent, n, &meta.path)
                    }
                    "finalizer" => {
                        let lit: LitStr = meta.value()?.parse()?;
                        check_finalizer(&lit)?;
                        set_once(&mut finalizer, lit, &meta.path)
                    }
                    "predicate" => {
                        let p = parse_predicate(meta.value()?.parse()?)?;
                        set_once(&mut predicate, p, &meta.path)
                    }
                    "name" => {
                        let lit: LitStr = meta.value()?.parse()?;
                        if lit.value().is_empty() {
                            return Err(syn::Error::new(lit.span(), "`name` must not be empty"));
                        }
                        set_once(&mut name, lit, &meta.path)
                    }
                    "leader_election" => {
                        leader_span = Some(meta.path.span());
                        set_once(&mut leader_election, (), &meta.path)
                    }
                    "sharding" => {
                        let sh = super::sharding::parse(&meta)?;
                        set_once(&mut sharding, sh, &meta.path)
                    }
                    "fleet" => {
                        let span = parse_fleet(&meta)?;
                        set_once(&mut fleet, span, &meta.path)
                    }
                    "webhooks" => {
                        let w = super::webhooks::parse(&meta)?;
                        set_once(&mut webhooks, w, &meta.path)
                    }
                    other => Err(syn::Error::new(
                        meta.path.span(),
                        suggest::unknown("controller option", other, OPTIONS),
                    )),
                }
            })?;
        }
        let for_ = for_.ok_or_else(|| {
            let msg = "missing `for = Kind`: name the kind this reconciler reconciles, \
                       e.g. `#[controller(for = Foo)]`";
            match first_attr {
                Some(attr) => syn::Error::new(attr.span(), msg),
                None => syn::Error::new(input.ident.span(), msg),
            }
        })?;
        if let (Some(sh), Some(_)) = (&sharding, leader_span) {
            return Err(syn::Error::new(
                sh.span,
                "`sharding` and `leader_election` exclude each other: every replica of a \
                 sharded controller works (its ring elects its own sharder)",
            ));
        }
        if let (Some(_), Some(sh)) = (fleet, &sharding)
            && sh.label
        {
            return Err(fleet_with_label_mode(sh.span));
        }
        Ok(ReconcilerArgs {
            for_,
            owns,
            watches,
            max_concurrent,
            finalizer,
            predicate,
            name,
            leader_election: leader_election.is_some(),
            rbac,
            webhooks,
            sharding,
            fleet,
        })
    }
}

fn parse_rbac(attr: &Attribute) -> syn::Result<RbacRule> {
    let mut group: Option<LitStr> = None;
    let mut resources: Option<Vec<LitStr>> = None;
    let mut verbs: Option<Vec<LitStr>> = None;
    let mut names: Option<Vec<LitStr>> = None;
    attr.parse_nested_meta(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "group" => set_once(&mut group, meta.value()?.parse()?, &meta.path),
            "resources" => set_once(&mut resources, string_list(&meta)?, &meta.path),
            "names" => set_once(&mut names, string_list(&meta)?, &meta.path),
            "verbs" => {
                let list = string_list(&meta)?;
                for v in &list {
                    let word = v.value();
                    if !VERBS.contains(&word.as_str()) {
                        return Err(syn::Error::new(
                            v.span(),
                            suggest::unknown("verb", &word, VERBS),
                        ));
                    }
                }
                set_once(&mut verbs, list, &meta.path)
            }
            other => Err(syn::Error::new(
                meta.path.span(),
                suggest::unknown("rbac option", other, RBAC_OPTIONS),
            )),
        }
    })?;
    let missing = |what: &str| {
        syn::Error::new(
            attr.span(),
            format!(
                "`#[rbac]` needs `{what}`: e.g. `#[rbac(group = \"\", resources(configmaps), verbs(get, list))]`"
            ),
        )
    };
    let group = group.ok_or_else(|| missing("group"))?;
    let resources = resources
        .filter(|r| !r.is_empty())
        .ok_or_else(|| missing("resources"))?;
    let verbs = verbs
        .filter(|v| !v.is_empty())
        .ok_or_else(|| missing("verbs"))?;
    Ok(RbacRule {
        group,
        resources,
        verbs,
        names: names.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests;
