//! Lexer and recursive-descent parser for the label selector syntax:
//!
//! ```text
//! selector    := "" | requirement ("," requirement)*
//! requirement := "!" KEY
//!              | KEY
//!              | KEY ("=" | "==" | "!=") VALUE?
//!              | KEY (">" | "<") INTEGER
//!              | KEY ("in" | "notin") "(" VALUE ("," VALUE)* ")"
//! ```
//! Whitespace between tokens is ignored. Positions in errors are 0-based
//! character indexes.

use std::collections::BTreeSet;
use std::str::FromStr;

use super::SelectorError;
use super::label::{LabelSelector, Operator, Requirement};
use super::validate::{check_key, check_value};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Comma,
    Open,
    Close,
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    Gt,
    Lt,
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("{s:?}"),
            Tok::Comma => "','".into(),
            Tok::Open => "'('".into(),
            Tok::Close => "')'".into(),
            Tok::Eq => "'='".into(),
            Tok::DoubleEq => "'=='".into(),
            Tok::NotEq => "'!='".into(),
            Tok::Bang => "'!'".into(),
            Tok::Gt => "'>'".into(),
            Tok::Lt => "'<'".into(),
            Tok::End => "end of selector".into(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | ',' | '(' | ')' | '<' | '>') || c.is_whitespace()
}

/// Splits `input` into tokens with their character positions.
fn lex(input: &str) -> Vec<(usize, Tok)> {
    let chars: Vec<char> = input.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let (tok, width) = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '!' if next == Some('=') => (Tok::NotEq, 2),
            '!' => (Tok::Bang, 1),
            '=' if next == Some('=') => (Tok::DoubleEq, 2),
            '=' => (Tok::Eq, 1),
            ',' => (Tok::Comma, 1),
            '(' => (Tok::Open, 1),
            ')' => (Tok::Close, 1),
            '>' => (Tok::Gt, 1),
            '<' => (Tok::Lt, 1),
            _ => {
                let end = (i..chars.len())
                    .find(|&j| is_special(chars[j]))
                    .unwrap_or(chars.len());
                (Tok::Ident(chars[i..end].iter().collect()), end - i)
            }
        };
        toks.push((i, tok));
        i += width;
    }
    toks.push((chars.len(), Tok::End));
    toks
}

struct Parser<'a> {
    input: &'a str,
    toks: Vec<(usize, Tok)>,
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &(usize, Tok) {
        // `lex` always ends with `End`, and `next` never moves past it.
        &self.toks[self.at.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> (usize, Tok) {
        let t = self.peek().clone();
        if t.1 != Tok::End {
            self.at += 1;
        }
        t
    }

    fn syntax(&self, position: usize, message: String) -> SelectorError {
        SelectorError::Syntax {
            input: self.input.to_owned(),
            position,
            message,
        }
    }

    fn key(&self, position: usize, key: String) -> Result<String, SelectorError> {
        check_key(&key).map_err(|reason| SelectorError::InvalidKey {
            input: self.input.to_owned(),
            position,
            key: key.clone(),
            reason,
        })?;
        Ok(key)
    }

    fn value(&self, position: usize, key: &str, value: String) -> Result<String, SelectorError> {
        check_value(&value).map_err(|reason| SelectorError::InvalidValue {
            input: self.input.to_owned(),
            position,
            key: key.to_owned(),
            value: value.clone(),
            reason,
        })?;
        Ok(value)
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        if self.peek().1 == Tok::End {
            return Ok(reqs);
        }
        loop {
            reqs.push(self.requirement()?);
            match self.next() {
                (_, Tok::Comma) => continue,
                (_, Tok::End) => return Ok(reqs),
                (pos, t) => {
                    return Err(self.syntax(
                        pos,
                        format!("expected ',' or end of selector, found {}", t.describe()),
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (start, tok) = self.next();
        let (key, operator, values) = match tok {
            Tok::Bang => match self.next() {
                (pos, Tok::Ident(k)) => {
                    (self.key(pos, k)?, Operator::DoesNotExist, BTreeSet::new())
                }
                (pos, t) => {
                    return Err(self.syntax(
                        pos,
                        format!("expected a label key after '!', found {}", t.describe()),
                    ));
                }
            },
            Tok::Ident(k) => {
                let key = self.key(start, k)?;
                let (op_pos, op) = self.peek().clone();
                if !matches!(op, Tok::Comma | Tok::End) {
                    self.next(); // a separator is left to `selector`
                }
                match op {
                    Tok::Comma | Tok::End => (key, Operator::Exists, BTreeSet::new()),
                    Tok::Eq | Tok::DoubleEq | Tok::NotEq => {
                        let operator = if op == Tok::NotEq {
                            Operator::NotEquals
                        } else {
                            Operator::Equals
                        };
                        let value = match self.peek().clone() {
                            (pos, Tok::Ident(v)) => {
                                self.next();
                                self.value(pos, &key, v)?
                            }
                            // `key=` means "equals the empty value".
                            (_, Tok::Comma | Tok::End) => String::new(),
                            (pos, t) => {
                                let msg = format!(
                                    "expected a value after {}, found {}",
                                    op.describe(),
                                    t.describe()
                                );
                                return Err(self.syntax(pos, msg));
                            }
                        };
                        (key, operator, BTreeSet::from([value]))
                    }
                    Tok::Gt | Tok::Lt => {
                        let operator = if op == Tok::Gt {
                            Operator::GreaterThan
                        } else {
                            Operator::LessThan
                        };
                        match self.next() {
                            (_, Tok::Ident(v)) if v.parse::<i64>().is_ok() => {
                                (key, operator, BTreeSet::from([v]))
                            }
                            (pos, t) => {
                                let msg = format!(
                                    "expected an integer after {}, found {}",
                                    op.describe(),
                                    t.describe()
                                );
                                return Err(self.syntax(pos, msg));
                            }
                        }
                    }
                    Tok::Ident(word) if word == "in" || word == "notin" => {
                        let operator = if word == "in" {
                            Operator::In
                        } else {
                            Operator::NotIn
                        };
                        let values = self.value_list(&key, &word)?;
                        (key, operator, values)
                    }
                    t => {
                        let msg = format!(
                            "expected an operator ('=', '==', '!=', 'in', 'notin', '>', '<') or ',' after key {key:?}, found {}",
                            t.describe()
                        );
                        return Err(self.syntax(op_pos, msg));
                    }
                }
            }
            t => {
                return Err(self.syntax(
                    start,
                    format!("expected a label key or '!', found {}", t.describe()),
                ));
            }
        };
        Requirement::new(key, operator, values).map_err(|(_, reason)| self.syntax(start, reason))
    }

    /// `"(" VALUE ("," VALUE)* ")"` after `in`/`notin`.
    fn value_list(&mut self, key: &str, word: &str) -> Result<BTreeSet<String>, SelectorError> {
        match self.next() {
            (_, Tok::Open) => {}
            (pos, t) => {
                return Err(self.syntax(
                    pos,
                    format!("expected '(' after '{word}', found {}", t.describe()),
                ));
            }
        }
        let mut values = BTreeSet::new();
        loop {
            match self.next() {
                (pos, Tok::Ident(v)) => {
                    values.insert(self.value(pos, key, v)?);
                }
                (pos, Tok::Close) if values.is_empty() => {
                    return Err(self.syntax(
                        pos,
                        format!("'{word}' needs at least one value in its parentheses"),
                    ));
                }
                (pos, t) => {
                    return Err(
                        self.syntax(pos, format!("expected a value, found {}", t.describe()))
                    );
                }
            }
            match self.next() {
                (_, Tok::Comma) => continue,
                (_, Tok::Close) => return Ok(values),
                (pos, t) => {
                    return Err(self.syntax(
                        pos,
                        format!(
                            "expected ',' or ')' in the values of '{word}', found {}",
                            t.describe()
                        ),
                    ));
                }
            }
        }
    }
}

/// Parses a label selector string into its requirements (in written order).
pub(super) fn parse_label_selector(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    Parser {
        input,
        toks: lex(input),
        at: 0,
    }
    .selector()
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_label_selector(s).map(LabelSelector::from_requirements)
    }
}
