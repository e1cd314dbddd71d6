//! Field-level validation keywords: `#[resource(minimum = 1, pattern = "...",
//! validation(rule = "...")...)]` on spec fields, checked and turned into the
//! OpenAPI keywords merged into the field's schema.

use darling::util::{Flag, SpannedValue};
use darling::{FromField, FromMeta};
use serde_json::{Map, Value, json};

/// A CEL rule (`x-kubernetes-validations` entry).
#[derive(Debug, Clone, FromMeta)]
pub struct CelRule {
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
    pub reason: Option<SpannedValue<String>>,
    pub field_path: Option<String>,
    pub optional_old_self: Option<bool>,
}

const REASONS: &[&str] = &[
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

impl CelRule {
    pub fn check(&self) -> darling::Result<()> {
        if let Some(r) = &self.reason
            && !REASONS.contains(&r.as_str())
        {
            return Err(darling::Error::custom(format!(
                "reason must be one of {REASONS:?}{}",
                super::names::did_you_mean(r, REASONS)
            ))
            .with_span(&r.span()));
        }
        Ok(())
    }

    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("rule".into(), self.rule.clone().into());
        if let Some(m) = &self.message {
            o.insert("message".into(), m.clone().into());
        }
        if let Some(m) = &self.message_expression {
            o.insert("messageExpression".into(), m.clone().into());
        }
        if let Some(r) = &self.reason {
            o.insert("reason".into(), r.as_str().into());
        }
        if let Some(f) = &self.field_path {
            o.insert("fieldPath".into(), f.clone().into());
        }
        if let Some(b) = self.optional_old_self {
            o.insert("optionalOldSelf".into(), b.into());
        }
        Value::Object(o)
    }
}

/// The validation keywords of one field.
#[derive(Debug, Clone, Default, FromMeta)]
pub struct FieldRules {
    pub minimum: Option<SpannedValue<syn::Expr>>,
    pub maximum: Option<SpannedValue<syn::Expr>>,
    pub exclusive_minimum: Flag,
    pub exclusive_maximum: Flag,
    pub multiple_of: Option<SpannedValue<syn::Expr>>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub pattern: Option<String>,
    pub format: Option<String>,
    /// JSON text of the default value.
    pub default: Option<SpannedValue<String>>,
    pub list_type: Option<SpannedValue<String>>,
    #[darling(multiple)]
    pub list_map_key: Vec<String>,
    pub map_type: Option<SpannedValue<String>>,
    pub preserve_unknown_fields: Flag,
    pub nullable: Flag,
    #[darling(multiple, rename = "validation")]
    pub validations: Vec<CelRule>,
}

fn number(e: &SpannedValue<syn::Expr>) -> darling::Result<Value> {
    let err = || darling::Error::custom("expected a number literal").with_span(&e.span());
    let (neg, lit) = match &**e {
        syn::Expr::Lit(l) => (false, &l.lit),
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            syn::Expr::Lit(l) => (true, &l.lit),
            _ => return Err(err()),
        },
        _ => return Err(err()),
    };
    let text = match lit {
        syn::Lit::Int(i) => i.base10_digits().to_owned(),
        syn::Lit::Float(f) => f.base10_digits().to_owned(),
        _ => return Err(err()),
    };
    let text = if neg { format!("-{text}") } else { text };
    serde_json::from_str(&text).map_err(|_| err())
}

impl FieldRules {
    pub fn is_empty(&self) -> bool {
        self.to_json().map(|m| m.is_empty()).unwrap_or(false)
    }

    /// Spanned errors for keywords that do not fit together.
    pub fn check(&self) -> darling::Result<()> {
        let mut errors = darling::Error::accumulator();
        if let Err(e) = self.to_json() {
            errors.push(e);
        }
        if let Some(lt) = &self.list_type {
            if !["atomic", "set", "map"].contains(&lt.as_str()) {
                errors.push(
                    darling::Error::custom("list_type must be `atomic`, `set` or `map`")
                        .with_span(&lt.span()),
                );
            }
            if lt.as_str() == "map" && self.list_map_key.is_empty() {
                errors.push(
                    darling::Error::custom(
                        "list_type = \"map\" needs at least one `list_map_key = \"...\"`",
                    )
                    .with_span(&lt.span()),
                );
            }
        }
        if !self.list_map_key.is_empty()
            && self.list_type.as_ref().map(|l| l.as_str()) != Some("map")
        {
            errors.push(darling::Error::custom(
                "list_map_key needs list_type = \"map\"",
            ));
        }
        if let Some(mt) = &self.map_type
            && !["atomic", "granular"].contains(&mt.as_str())
        {
            errors.push(
                darling::Error::custom("map_type must be `atomic` or `granular`")
                    .with_span(&mt.span()),
            );
        }
        if self.exclusive_minimum.is_present() && self.minimum.is_none() {
            errors.push(
                darling::Error::custom("exclusive_minimum needs minimum")
                    .with_span(&self.exclusive_minimum.span()),
            );
        }
        if self.exclusive_maximum.is_present() && self.maximum.is_none() {
            errors.push(
                darling::Error::custom("exclusive_maximum needs maximum")
                    .with_span(&self.exclusive_maximum.span()),
            );
        }
        if let (Some(min), Some(max)) = (&self.minimum, &self.maximum)
            && let (Ok(a), Ok(b)) = (number(min), number(max))
            && a.as_f64() > b.as_f64()
        {
            errors.push(
                darling::Error::custom("minimum is greater than maximum").with_span(&min.span()),
            );
        }
        for (lo, hi, what) in [
            (
                self.min_length,
                self.max_length,
                "min_length is greater than max_length",
            ),
            (
                self.min_items,
                self.max_items,
                "min_items is greater than max_items",
            ),
            (
                self.min_properties,
                self.max_properties,
                "min_properties is greater than max_properties",
            ),
        ] {
            if let (Some(lo), Some(hi)) = (lo, hi)
                && lo > hi
            {
                errors.push(darling::Error::custom(what));
            }
        }
        for v in &self.validations {
            if let Err(e) = v.check() {
                errors.push(e);
            }
        }
        errors.finish()
    }

    /// The OpenAPI keywords these rules stand for.
    pub fn to_json(&self) -> darling::Result<Map<String, Value>> {
        let mut o = Map::new();
        if let Some(m) = &self.minimum {
            o.insert("minimum".into(), number(m)?);
        }
        if let Some(m) = &self.maximum {
            o.insert("maximum".into(), number(m)?);
        }
        if self.exclusive_minimum.is_present() {
            o.insert("exclusiveMinimum".into(), true.into());
        }
        if self.exclusive_maximum.is_present() {
            o.insert("exclusiveMaximum".into(), true.into());
        }
        if let Some(m) = &self.multiple_of {
            o.insert("multipleOf".into(), number(m)?);
        }
        for (key, v) in [
            ("minLength", self.min_length),
            ("maxLength", self.max_length),
            ("minItems", self.min_items),
            ("maxItems", self.max_items),
            ("minProperties", self.min_properties),
            ("maxProperties", self.max_properties),
        ] {
            if let Some(v) = v {
                o.insert(key.into(), v.into());
            }
        }
        if let Some(p) = &self.pattern {
            o.insert("pattern".into(), p.clone().into());
        }
        if let Some(f) = &self.format {
            o.insert("format".into(), f.clone().into());
        }
        if let Some(d) = &self.default {
            let v: Value = serde_json::from_str(d).map_err(|e| {
                darling::Error::custom(format!(
                    "default must be JSON text (e.g. \"3\" or \"\\\"fast\\\"\"): {e}"
                ))
                .with_span(&d.span())
            })?;
            o.insert("default".into(), v);
        }
        if let Some(l) = &self.list_type {
            o.insert("x-kubernetes-list-type".into(), l.as_str().into());
        }
        if !self.list_map_key.is_empty() {
            o.insert(
                "x-kubernetes-list-map-keys".into(),
                json!(self.list_map_key),
            );
        }
        if let Some(m) = &self.map_type {
            o.insert("x-kubernetes-map-type".into(), m.as_str().into());
        }
        if self.preserve_unknown_fields.is_present() {
            o.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
        }
        if self.nullable.is_present() {
            o.insert("nullable".into(), true.into());
        }
        if !self.validations.is_empty() {
            o.insert(
                "x-kubernetes-validations".into(),
                Value::Array(self.validations.iter().map(CelRule::to_json).collect()),
            );
        }
        Ok(o)
    }
}

/// A spec field with its `#[resource(...)]` validation keywords.
#[derive(Debug, FromField)]
#[darling(attributes(resource), forward_attrs(serde))]
pub struct SpecField {
    pub ident: Option<syn::Ident>,
    pub attrs: Vec<syn::Attribute>,
    #[darling(flatten)]
    pub rules: FieldRules,
}
