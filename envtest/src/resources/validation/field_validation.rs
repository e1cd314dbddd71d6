//! The `fieldValidation` query parameter, as the API server reads it: how a
//! write treats fields the kind does not know and fields given twice.
//! `Strict` refuses the request (400, `strict decoding error: ...` naming
//! every such field), `Warn` (the default) drops them and answers with one
//! `Warning: 299 - "..."` header per field (what kubectl prints), `Ignore`
//! drops them silently.
//!
//! Duplicate fields are found while parsing the body ([`parse_checked`]),
//! since a parsed JSON value keeps only the last of them.

use crate::error::ApiError;
use crate::request::Query;
use axum::response::Response;
use http::HeaderValue;
use parking_lot::Mutex;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// What the client asked for in `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and answer with a `Warning` header per field.
    #[default]
    Warn,
    /// Refuse the request with 400 listing every unknown or duplicate field.
    Strict,
}

impl FieldValidation {
    /// From the query string; 400 for a value the API server does not know.
    pub fn from_query(q: &Query) -> Result<Self, ApiError> {
        match q.get("fieldValidation") {
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// The field problems of one request: the directive, and the warnings
/// collected so far (for `Warn`).
#[derive(Debug, Default)]
pub struct FieldCheck {
    directive: FieldValidation,
    warnings: Mutex<Vec<String>>,
}

impl FieldCheck {
    /// A check following `directive`.
    pub fn new(directive: FieldValidation) -> Self {
        FieldCheck {
            directive,
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// From a request's query string.
    pub fn from_query(q: &Query) -> Result<Self, ApiError> {
        FieldValidation::from_query(q).map(Self::new)
    }

    /// Report unknown fields (dotted paths) and duplicate fields: an error
    /// under `Strict`, warnings under `Warn`, nothing under `Ignore`.
    pub fn report(&self, unknown: &[String], duplicate: &[String]) -> Result<(), ApiError> {
        if unknown.is_empty() && duplicate.is_empty() {
            return Ok(());
        }
        let problems: Vec<String> = unknown
            .iter()
            .map(|p| format!("unknown field {p:?}"))
            .chain(duplicate.iter().map(|p| format!("duplicate field {p:?}")))
            .collect();
        match self.directive {
            FieldValidation::Ignore => Ok(()),
            FieldValidation::Warn => {
                let mut w = self.warnings.lock();
                for p in problems {
                    if !w.contains(&p) {
                        w.push(p);
                    }
                }
                Ok(())
            }
            FieldValidation::Strict => Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                problems.join(", ")
            ))),
        }
    }

    /// Add warnings from elsewhere (admission webhooks and policies).
    pub fn warn(&self, texts: &[String]) {
        self.warnings.lock().extend(texts.iter().cloned());
    }

    /// Add the collected warnings to a response as `Warning` headers.
    pub fn add_warnings(&self, mut resp: Response) -> Response {
        for w in self.warnings.lock().iter() {
            if let Ok(v) = HeaderValue::from_str(&warning_value(w)) {
                resp.headers_mut().append(http::header::WARNING, v);
            }
        }
        resp
    }
}

/// `299 - "text"`, with quotes and backslashes escaped and anything that
/// cannot travel in a header replaced.
fn warning_value(text: &str) -> String {
    let mut out = String::from("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// Parse a JSON body, also answering the paths of fields given more than
/// once (the last occurrence wins, as in the API server's decoder).
pub fn parse_checked(bytes: &[u8]) -> Result<(Value, Vec<String>), ApiError> {
    super::check_depth(bytes)?;
    let mut dups = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = DupSeed {
        path: String::new(),
        dups: &mut dups,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v))
    .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    Ok((v, dups))
}

struct DupSeed<'a> {
    path: String,
    dups: &'a mut Vec<String>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> DeserializeSeed<'de> for DupSeed<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DupSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let seed = DupSeed {
                path: format!("{}[{}]", self.path, out.len()),
                dups: &mut *self.dups,
            };
            match seq.next_element_seed(seed)? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let path = join(&self.path, &k);
            let v = map.next_value_seed(DupSeed {
                path: path.clone(),
                dups: &mut *self.dups,
            })?;
            if out.insert(k, v).is_some() && !self.dups.contains(&path) {
                self.dups.push(path);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_found_at_every_depth() {
        let (v, dups) = parse_checked(br#"{"a":1,"b":{"c":[{"d":1,"d":2}],"c":3},"a":2}"#).unwrap();
        assert_eq!(v["a"], 2, "the last occurrence wins");
        assert_eq!(dups, vec!["b.c[0].d", "b.c", "a"]);
        assert!(parse_checked(b"{\"a\":1} x").is_err());
        assert!(parse_checked(b"[").is_err());
    }

    #[test]
    fn directives_report_as_the_api_server_does() {
        let unknown = vec!["spec.x".to_string()];
        let strict = FieldCheck::new(FieldValidation::Strict);
        let e = strict.report(&unknown, &["a".into()]).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            r#"strict decoding error: unknown field "spec.x", duplicate field "a""#
        );
        let warn = FieldCheck::new(FieldValidation::Warn);
        warn.report(&unknown, &[]).unwrap();
        warn.report(&unknown, &[]).unwrap();
        let resp = warn.add_warnings(Response::default());
        let got: Vec<_> = resp
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .collect();
        assert_eq!(got, vec![r#"299 - "unknown field \"spec.x\"""#]);
        let ignore = FieldCheck::new(FieldValidation::Ignore);
        ignore.report(&unknown, &[]).unwrap();
        assert!(
            ignore
                .add_warnings(Response::default())
                .headers()
                .is_empty()
        );
        assert_eq!(warning_value("é\n"), r#"299 - "??""#);
    }
}
