//! Label and field selectors as the API server parses them from the
//! `labelSelector` and `fieldSelector` query parameters. Label selectors
//! support `=`, `==`, `!=`, `in`, `notin`, `key` (exists) and `!key`; field
//! selectors support `=`, `==` and `!=` with `\` escapes. A malformed
//! selector is an error that says what is wrong and where.

use serde_json::Value;
use std::collections::BTreeSet;

/// A selector that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A label selector requirement is malformed.
    #[error("unable to parse requirement: {0}")]
    Label(String),
    /// A field selector term is malformed.
    #[error("invalid field selector: {0}")]
    Field(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    NotExists,
}

/// A parsed label selector (the empty selector matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<(String, Op)>,
}

fn valid_key(k: &str) -> bool {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
    });
    name_ok && prefix_ok
}

fn valid_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// Split on commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError::Label(format!(
                        "unbalanced ')' at position {i} in {s:?}"
                    )));
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::Label(format!("unclosed '(' in {s:?}")));
    }
    out.push(&s[start..]);
    Ok(out)
}

fn parse_set(rest: &str, whole: &str) -> Result<BTreeSet<String>, SelectorError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            SelectorError::Label(format!(
                "{whole:?}: expected a parenthesised value list like (a,b)"
            ))
        })?;
    let mut set = BTreeSet::new();
    for v in inner.split(',') {
        let v = v.trim();
        if !valid_value(v) {
            return Err(SelectorError::Label(format!(
                "{whole:?}: invalid label value {v:?}"
            )));
        }
        set.insert(v.to_string());
    }
    Ok(set)
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { reqs });
        }
        for part in split_top(s)? {
            let p = part.trim();
            if p.is_empty() {
                return Err(SelectorError::Label(format!("empty requirement in {s:?}")));
            }
            let (key, op) = if let Some(k) = p.strip_prefix('!') {
                (k.trim().to_string(), Op::NotExists)
            } else if let Some((k, v)) = p.split_once("!=") {
                (k.trim().to_string(), Op::NotEq(v.trim().to_string()))
            } else if let Some((k, v)) = p.split_once("==") {
                (k.trim().to_string(), Op::Eq(v.trim().to_string()))
            } else if let Some((k, v)) = p.split_once('=') {
                (k.trim().to_string(), Op::Eq(v.trim().to_string()))
            } else if let Some(idx) = p.find(" notin ").or_else(|| p.find(" notin(")) {
                (
                    p[..idx].trim().to_string(),
                    Op::NotIn(parse_set(&p[idx + 6..], p)?),
                )
            } else if let Some(idx) = p.find(" in ").or_else(|| p.find(" in(")) {
                (
                    p[..idx].trim().to_string(),
                    Op::In(parse_set(&p[idx + 3..], p)?),
                )
            } else if p.contains(|c: char| c.is_whitespace() || "()<>".contains(c)) {
                return Err(SelectorError::Label(format!(
                    "{p:?}: expected one of =, ==, !=, in, notin"
                )));
            } else {
                (p.to_string(), Op::Exists)
            };
            if !valid_key(&key) {
                return Err(SelectorError::Label(format!(
                    "{p:?}: invalid label key {key:?}"
                )));
            }
            if let Op::Eq(v) | Op::NotEq(v) = &op
                && !valid_value(v)
            {
                return Err(SelectorError::Label(format!(
                    "{p:?}: invalid label value {v:?}"
                )));
            }
            reqs.push((key, op));
        }
        Ok(LabelSelector { reqs })
    }
}

impl LabelSelector {
    /// Whether this selector is empty.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Does an object's `metadata.labels` match?
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|(k, op)| match op {
            Op::Eq(v) => get(k) == Some(v.as_str()),
            Op::NotEq(v) => get(k) != Some(v.as_str()),
            Op::In(set) => get(k).is_some_and(|x| set.contains(x)),
            Op::NotIn(set) => get(k).is_none_or(|x| !set.contains(x)),
            Op::Exists => get(k).is_some(),
            Op::NotExists => get(k).is_none(),
        })
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>, // (field, equal?, value)
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let (Some(n), Some(last)) = (chars.next(), out.last_mut()) {
                last.push('\\');
                last.push(n);
            }
        } else if c == sep {
            out.push(String::new());
        } else if let Some(last) = out.last_mut() {
            last.push(c);
        }
    }
    out
}

fn unescape(s: &str) -> Result<String, SelectorError> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('\\' | ',' | '=')) => out.push(n),
                other => {
                    return Err(SelectorError::Field(format!(
                        "invalid escape sequence \\{} in {s:?}",
                        other.unwrap_or(' ')
                    )));
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

impl std::str::FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut terms = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { terms });
        }
        for part in split_unescaped(s, ',') {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(SelectorError::Field(format!(
                    "{part:?}: expected field=value, field==value or field!=value"
                )));
            };
            let field = field.trim();
            if field.is_empty() {
                return Err(SelectorError::Field(format!("{part:?}: empty field name")));
            }
            terms.push((field.to_string(), eq, unescape(value)?));
        }
        Ok(FieldSelector { terms })
    }
}

impl FieldSelector {
    /// Whether this selector is empty.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// This selector plus the requirement `field == value`.
    #[must_use]
    pub fn and_equals(mut self, field: &str, value: &str) -> Self {
        self.terms
            .push((field.to_string(), true, value.to_string()));
        self
    }

    /// The field names it uses.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|(f, _, _)| f.as_str())
    }

    /// Does it match, given a way to read a field's value?
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|(f, eq, v)| {
            let actual = get(f).unwrap_or_default();
            (actual == *v) == *eq
        })
    }
}

/// Read a dotted path such as `spec.nodeName` from a JSON object as a string.
pub fn field_value(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for seg in path.trim_start_matches('.').split('.') {
        cur = cur.get(seg)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(s: &str) -> LabelSelector {
        s.parse().unwrap()
    }

    #[test]
    fn label_operators_match_like_the_apiserver() {
        let labels = json!({"app": "web", "tier": "front"});
        let l = Some(&labels);
        assert!(sel("app=web").matches(l));
        assert!(sel("app==web,tier").matches(l));
        assert!(sel("app!=db").matches(l));
        assert!(sel("app in (web, db)").matches(l));
        assert!(!sel("app notin (web)").matches(l));
        assert!(sel("!missing").matches(l));
        assert!(!sel("!app").matches(l));
        assert!(sel("missing notin (x)").matches(l));
        assert!(sel("").matches(None));
        assert!(!sel("app").matches(None));
    }

    #[test]
    fn malformed_label_selectors_are_rejected() {
        for bad in [
            "app in web",
            "a b",
            "app=(x",
            "=x",
            "app=web,",
            "app in (a",
            "Bad Key=1",
            "x=-bad-",
        ] {
            assert!(
                bad.parse::<LabelSelector>().is_err(),
                "{bad} should be rejected"
            );
        }
    }

    #[test]
    fn field_selectors_with_escapes() {
        let f: FieldSelector = "metadata.name=a\\,b,metadata.namespace!=x".parse().unwrap();
        let obj = json!({"metadata": {"name": "a,b", "namespace": "y"}});
        assert!(f.matches(|p| field_value(&obj, p)));
        assert!("metadata.name".parse::<FieldSelector>().is_err());
        assert_eq!(
            f.fields().collect::<Vec<_>>(),
            vec!["metadata.name", "metadata.namespace"]
        );
    }
}
