//! Label and field selectors, parsed from the API server's string syntax.
//!
//! Layer 0: imports nothing else of this crate.
//!
//! A [`LabelSelector`] (`app=web,tier!=db,env in (prod,staging),!canary,team`)
//! is used in two places: client-side, to filter the cache
//! ([`LabelSelector::matches`], used by listers), and server-side, by passing
//! its canonical [`Display`](std::fmt::Display) form as the `labelSelector`
//! query parameter of a list or watch. A [`FieldSelector`]
//! (`metadata.name=x,status.phase!=Running`) does the same for the
//! `fieldSelector` parameter.
//!
//! Parsing reports what is wrong and where (a 0-based character position in
//! the input); label keys and values are validated with the API server's
//! rules (optional DNS-subdomain prefix, name and value at most 63
//! characters of alphanumerics, `-`, `_` and `.`).
//!
//! ```
//! use std::collections::BTreeMap;
//! use informer_core::selector::LabelSelector;
//!
//! let sel: LabelSelector = "tier in (web, api), env!=dev, !canary".parse().unwrap();
//! assert_eq!(sel.to_string(), "!canary,env!=dev,tier in (api,web)");
//!
//! let labels = BTreeMap::from([("tier".to_string(), "web".to_string())]);
//! assert!(sel.matches(&labels));
//!
//! let err = "tier in web".parse::<LabelSelector>().unwrap_err();
//! assert_eq!(err.to_string(), "invalid selector \"tier in web\" at position 8: expected '(' after 'in', found \"web\"");
//! ```

mod field;
mod label;
mod parse;
mod validate;

pub use field::{FieldOperator, FieldSelector, FieldTerm};
pub use label::{LabelSelector, Operator, Requirement};

/// Errors from parsing or converting selectors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The string does not follow the selector grammar.
    #[error("invalid selector {input:?} at position {position}: {message}")]
    Syntax {
        /// The selector string.
        input: String,
        /// 0-based character position of the problem.
        position: usize,
        /// What is wrong.
        message: String,
    },
    /// A label key breaks the API server's naming rules.
    #[error(
        "invalid selector {input:?} at position {position}: invalid label key {key:?}: {reason}"
    )]
    InvalidKey {
        /// The selector string.
        input: String,
        /// 0-based character position of the key.
        position: usize,
        /// The key.
        key: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A label value breaks the API server's naming rules.
    #[error(
        "invalid selector {input:?} at position {position}: invalid value {value:?} for label key {key:?}: {reason}"
    )]
    InvalidValue {
        /// The selector string.
        input: String,
        /// 0-based character position of the value.
        position: usize,
        /// The key the value belongs to.
        key: String,
        /// The value.
        value: String,
        /// Which rule it breaks.
        reason: String,
    },
    /// A structured (`metav1.LabelSelector`) selector is invalid.
    #[error("invalid label selector at {field}: {reason}")]
    InvalidLabelSelector {
        /// Where, e.g. `matchExpressions[1]` or `matchLabels["app"]`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

#[cfg(test)]
mod tests;
