//! [`LabelSelector`]: requirements on an object's labels, all of which must hold.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use super::SelectorError;
use super::validate::{check_key, check_value};

/// How a [`Requirement`] tests a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value` (or `key==value`): the label is present with that value.
    Equals,
    /// `key!=value`: the label is absent or has another value.
    NotEquals,
    /// `key in (v1,v2)`: the label is present with one of the values.
    In,
    /// `key notin (v1,v2)`: the label is absent or has none of the values.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is present and an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present and an integer less than `n`.
    LessThan,
}

/// One condition of a [`LabelSelector`]: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    /// Builds a requirement, checking the key, the values and that the
    /// number of values suits the operator. `reason`-only errors: the caller
    /// adds the location.
    pub(super) fn new(
        key: String,
        operator: Operator,
        values: BTreeSet<String>,
    ) -> Result<Self, (String, String)> {
        let wrong = |r: &str| Err((key.clone(), r.to_owned()));
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return wrong("'in' and 'notin' need at least one value");
            }
            Operator::Equals | Operator::NotEquals if values.len() != 1 => {
                return wrong("'=' and '!=' need exactly one value");
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return wrong("'exists' and 'does not exist' take no values");
            }
            Operator::GreaterThan | Operator::LessThan
                if values.len() != 1 || values.iter().any(|v| v.parse::<i64>().is_err()) =>
            {
                return wrong("'>' and '<' need exactly one integer value");
            }
            _ => {}
        }
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted (empty for `Exists`/`DoesNotExist`).
    pub fn values(&self) -> &BTreeSet<String> {
        &self.values
    }

    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let int_cmp = |want: std::cmp::Ordering| {
            let bound = self.values.first().and_then(|v| v.parse::<i64>().ok());
            match (value.and_then(|v| v.parse::<i64>().ok()), bound) {
                (Some(have), Some(bound)) => have.cmp(&bound) == want,
                _ => false,
            }
        };
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan => int_cmp(std::cmp::Ordering::Greater),
            Operator::LessThan => int_cmp(std::cmp::Ordering::Less),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = self.values.first().map(String::as_str).unwrap_or_default();
        let list = || {
            self.values
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        match self.operator {
            Operator::Equals => write!(f, "{}={first}", self.key),
            Operator::NotEquals => write!(f, "{}!={first}", self.key),
            Operator::In => write!(f, "{} in ({})", self.key, list()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, list()),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan => write!(f, "{}>{first}", self.key),
            Operator::LessThan => write!(f, "{}<{first}", self.key),
        }
    }
}

/// A label selector: a list of [`Requirement`]s that must all hold. The
/// empty selector matches everything.
///
/// Parse it from the API server's syntax with [`str::parse`]; its
/// [`Display`](fmt::Display) is the canonical form (requirements sorted by
/// key, values sorted, `==` written `=`), suitable for the `labelSelector`
/// query parameter.
///
/// ```
/// use std::collections::BTreeMap;
/// use informer_core::selector::LabelSelector;
///
/// let sel: LabelSelector = "app=web,env notin (dev),!canary".parse().unwrap();
/// let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>();
/// assert!(sel.matches(&labels(&[("app", "web"), ("env", "prod")])));
/// assert!(!sel.matches(&labels(&[("app", "web"), ("canary", "true")])));
/// assert!(LabelSelector::everything().matches(&BTreeMap::new()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches every object (the empty string).
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// Whether this selector has no requirements.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the labels of `obj` satisfy every requirement (an object
    /// without labels has none).
    pub fn matches_object<K: kube_core::Resource>(&self, obj: &K) -> bool {
        static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
        self.matches(obj.meta().labels.as_ref().unwrap_or(&NO_LABELS))
    }

    /// The requirements, in canonical order (sorted by key).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// A selector requiring each `key=value` of `labels` (as `matchLabels`).
    pub fn from_labels<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, SelectorError> {
        let meta = metav1::LabelSelector {
            match_labels: Some(
                labels
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            ),
            match_expressions: None,
        };
        LabelSelector::try_from(&meta)
    }

    pub(super) fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        // Stable: requirements on the same key keep their written order.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector { requirements }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl TryFrom<&metav1::LabelSelector> for LabelSelector {
    type Error = SelectorError;

    /// Converts the structured form used in object specs (`matchLabels` and
    /// `matchExpressions`); an empty one matches everything.
    fn try_from(sel: &metav1::LabelSelector) -> Result<Self, Self::Error> {
        let invalid =
            |field: String, reason: String| SelectorError::InvalidLabelSelector { field, reason };
        let mut requirements = Vec::new();
        for (key, value) in sel.match_labels.iter().flatten() {
            let field = format!("matchLabels[{key:?}]");
            check_key(key).map_err(|r| invalid(field.clone(), format!("invalid key: {r}")))?;
            check_value(value)
                .map_err(|r| invalid(field.clone(), format!("invalid value {value:?}: {r}")))?;
            let req = Requirement::new(
                key.clone(),
                Operator::Equals,
                BTreeSet::from([value.clone()]),
            );
            requirements.push(req.map_err(|(_, r)| invalid(field, r))?);
        }
        for (i, expr) in sel.match_expressions.iter().flatten().enumerate() {
            let field = format!("matchExpressions[{i}] (key {:?})", expr.key);
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    let reason = format!(
                        "unknown operator {other:?} (expected In, NotIn, Exists or DoesNotExist)"
                    );
                    return Err(invalid(field, reason));
                }
            };
            check_key(&expr.key)
                .map_err(|r| invalid(field.clone(), format!("invalid key: {r}")))?;
            let values: BTreeSet<String> = expr.values.iter().flatten().cloned().collect();
            for v in &values {
                check_value(v)
                    .map_err(|r| invalid(field.clone(), format!("invalid value {v:?}: {r}")))?;
            }
            let req = Requirement::new(expr.key.clone(), operator, values);
            requirements.push(req.map_err(|(_, r)| invalid(field, r))?);
        }
        Ok(LabelSelector::from_requirements(requirements))
    }
}
