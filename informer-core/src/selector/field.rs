//! [`FieldSelector`]: `field=value` / `field!=value` terms, all of which must hold.

use std::fmt;
use std::str::FromStr;

use super::SelectorError;

/// How a [`FieldTerm`] compares a field with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `field=value` (or `field==value`).
    Equals,
    /// `field!=value`.
    NotEquals,
}

/// One `field op value` term of a [`FieldSelector`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldTerm {
    /// The field path, e.g. `metadata.name` or `status.phase`.
    pub field: String,
    /// The comparison.
    pub operator: FieldOperator,
    /// The value (unescaped).
    pub value: String,
}

/// A field selector as the API server accepts it:
/// `metadata.name=x,metadata.namespace!=y`. In values, `\`, `,` and `=` are
/// written escaped with a backslash; [`Display`](fmt::Display) escapes them
/// again, so the output can be passed as the `fieldSelector` parameter.
///
/// ```
/// use informer_core::selector::FieldSelector;
///
/// let sel: FieldSelector = "metadata.name=web,status.phase!=Running".parse().unwrap();
/// let pod = |field: &str| match field {
///     "metadata.name" => Some("web".to_string()),
///     "status.phase" => Some("Pending".to_string()),
///     _ => None,
/// };
/// assert!(sel.matches(pod));
/// assert_eq!(sel.to_string(), "metadata.name=web,status.phase!=Running");
/// assert!("metadata.name".parse::<FieldSelector>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// The selector that matches everything (the empty string).
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// A selector of the given terms (values unescaped).
    pub fn from_terms(terms: impl IntoIterator<Item = FieldTerm>) -> Self {
        FieldSelector {
            terms: terms.into_iter().collect(),
        }
    }

    /// Whether this selector has no terms.
    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms, in written order.
    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// Whether every term holds, reading field values through `get`. A field
    /// that `get` does not know reads as the empty string (as on the server).
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = get(&t.field).unwrap_or_default();
            match t.operator {
                FieldOperator::Equals => have == t.value,
                FieldOperator::NotEquals => have != t.value,
            }
        })
    }
}

fn escape(value: &str, out: &mut fmt::Formatter<'_>) -> fmt::Result {
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            fmt::Write::write_char(out, '\\')?;
        }
        fmt::Write::write_char(out, c)?;
    }
    Ok(())
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&t.field)?;
            f.write_str(match t.operator {
                FieldOperator::Equals => "=",
                FieldOperator::NotEquals => "!=",
            })?;
            escape(&t.value, f)?;
        }
        Ok(())
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        if input.trim().is_empty() {
            return Ok(FieldSelector::everything());
        }
        let syntax = |position: usize, message: String| SelectorError::Syntax {
            input: input.to_owned(),
            position,
            message,
        };
        let chars: Vec<char> = input.chars().collect();
        // Split on unescaped commas, remembering where each term starts.
        let mut terms = Vec::new();
        let (mut start, mut i) = (0, 0);
        while i <= chars.len() {
            match chars.get(i) {
                Some('\\') => i = (i + 2).min(chars.len()),
                Some(',') | None => {
                    terms.push(parse_term(
                        &chars[start..i.min(chars.len())],
                        start,
                        &syntax,
                    )?);
                    i += 1;
                    start = i;
                }
                Some(_) => i += 1,
            }
        }
        Ok(FieldSelector { terms })
    }
}

/// Parses one `field op value` term that starts at character `offset`.
fn parse_term(
    term: &[char],
    offset: usize,
    syntax: &impl Fn(usize, String) -> SelectorError,
) -> Result<FieldTerm, SelectorError> {
    let text: String = term.iter().collect();
    let mut i = 0;
    let (op_at, operator, width) = loop {
        match (term.get(i), term.get(i + 1)) {
            (None, _) => {
                let msg = format!("expected an operator ('=', '==' or '!=') in term {text:?}");
                return Err(syntax(offset + term.len(), msg));
            }
            (Some('\\'), _) => i += 2,
            (Some('!'), Some('=')) => break (i, FieldOperator::NotEquals, 2),
            (Some('='), Some('=')) => break (i, FieldOperator::Equals, 2),
            (Some('='), _) => break (i, FieldOperator::Equals, 1),
            _ => i += 1,
        }
    };
    let field: String = term[..op_at].iter().collect::<String>().trim().to_owned();
    if field.is_empty() {
        return Err(syntax(
            offset,
            format!("missing field name before the operator in term {text:?}"),
        ));
    }
    let mut value = String::new();
    let mut j = op_at + width;
    while let Some(&c) = term.get(j) {
        let pos = offset + j;
        match c {
            '\\' => match term.get(j + 1) {
                Some(&e @ ('\\' | ',' | '=')) => {
                    value.push(e);
                    j += 1;
                }
                Some(e) => {
                    return Err(syntax(
                        pos,
                        format!(
                            "invalid escape sequence '\\{e}' (only \\\\, \\, and \\= are allowed)"
                        ),
                    ));
                }
                None => {
                    return Err(syntax(
                        pos,
                        "a value may not end with a lone '\\'".to_owned(),
                    ));
                }
            },
            '=' => {
                return Err(syntax(
                    pos,
                    "unescaped '=' in value (write it as '\\=')".to_owned(),
                ));
            }
            c => value.push(c),
        }
        j += 1;
    }
    Ok(FieldTerm {
        field,
        operator,
        value,
    })
}
