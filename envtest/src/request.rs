//! One HTTP request as every layer sees it once the router has read it:
//! method, decoded query parameters, headers and the whole body. The codec
//! decodes its body, the resource strategies read its options (`dryRun`,
//! `fieldValidation`, selectors) and the handlers answer it.

use crate::error::ApiError;
use bytes::Bytes;
use http::{HeaderMap, Method, header};

/// Decoded query parameters.
#[derive(Debug, Clone, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parse a raw query string.
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let Some(raw) = raw else {
            return Ok(Query::default());
        };
        let uri: http::Uri = format!("/?{raw}")
            .parse()
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        let q = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        Ok(Query(q.0))
    }

    /// The last value of a parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `dryRun=All` was asked for (400 for other values).
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            ))),
        }
    }

    /// Add a parameter (after those already present, so it wins).
    pub fn push(&mut self, key: &str, value: &str) {
        self.0.push((key.to_string(), value.to_string()));
    }

    /// A boolean parameter (`true`/`1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

/// A request as the handlers see it.
pub struct Req {
    /// HTTP method.
    pub method: Method,
    /// Query parameters.
    pub query: Query,
    /// Headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Req {
    /// The Content-Type header.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The Accept header.
    pub fn accept(&self) -> &str {
        self.headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_the_last_value_wins() {
        let mut q = Query::parse(Some("labelSelector=a%3Db&watch=1&x=1")).unwrap();
        assert_eq!(q.get("labelSelector"), Some("a=b"));
        assert!(q.flag("watch"));
        q.push("x", "2");
        assert_eq!(q.get("x"), Some("2"));
        assert!(Query::parse(None).unwrap().get("x").is_none());
    }
}
