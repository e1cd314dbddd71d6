//! The value constraints of a CRD schema beyond types and bounds: `pattern`
//! (a regular expression, unanchored as in the API server), `format` (the
//! string formats the API server checks: `date`, `date-time`, `duration`,
//! `uuid`, `ipv4`, `ipv6`, `cidr`, `mac`, `hostname`, `email`, `uri`,
//! `byte`, `hexcolor`, and `int32`/`int64` ranges; other formats are
//! accepted, as the API server accepts unknown ones), `multipleOf`,
//! `minProperties`/`maxProperties`, and item uniqueness of
//! `x-kubernetes-list-type: set` and `map` (by `x-kubernetes-list-map-keys`).

use crate::error::Cause;
use parking_lot::Mutex;
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Most compiled patterns kept; the cache starts over past it.
const PATTERN_CACHE: usize = 512;

/// A compiled `pattern`, or why it does not compile.
pub fn compile(pattern: &str) -> Result<Arc<Regex>, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(re) = cache.lock().get(pattern) {
        return Ok(re.clone());
    }
    let re = Arc::new(Regex::new(pattern).map_err(|e| e.to_string())?);
    let mut c = cache.lock();
    if c.len() >= PATTERN_CACHE {
        c.clear();
    }
    c.insert(pattern.to_string(), re.clone());
    Ok(re)
}

fn push(causes: &mut Vec<Cause>, reason: &str, field: &str, message: String) {
    causes.push(Cause {
        reason: reason.into(),
        message,
        field: field.to_string(),
    });
}

fn is_hostname(s: &str) -> bool {
    s.len() <= 253
        && !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn is_duration(s: &str) -> bool {
    // Go's time.ParseDuration: [-+]? then one or more <number><unit>.
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    let mut rest = s;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num == 0 {
            return false;
        }
        rest = &rest[num..];
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

fn is_base64(s: &str) -> bool {
    let t = s.trim_end_matches('=');
    s.len().is_multiple_of(4)
        && s.len() - t.len() <= 2
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
}

/// Whether `s` has `format` (true for formats not checked here).
pub fn has_format(format: &str, s: &str) -> bool {
    match format {
        "date" => s.parse::<jiff::civil::Date>().is_ok() && s.len() == 10,
        "date-time" | "datetime" => s.parse::<jiff::Timestamp>().is_ok(),
        "duration" => is_duration(s),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => {
            s.len() == 36
                && uuid::Uuid::parse_str(s).is_ok_and(|u| match format {
                    "uuid3" => u.get_version_num() == 3,
                    "uuid4" => u.get_version_num() == 4,
                    "uuid5" => u.get_version_num() == 5,
                    _ => true,
                })
        }
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.parse::<std::net::Ipv4Addr>().is_ok() {
                32
            } else if ip.parse::<std::net::Ipv6Addr>().is_ok() {
                128
            } else {
                return false;
            };
            bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        "mac" => {
            let parts: Vec<&str> = s.split([':', '-']).collect();
            matches!(parts.len(), 6 | 8 | 20)
                && parts
                    .iter()
                    .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        }
        "hostname" => is_hostname(s),
        "email" => s
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && is_hostname(host)),
        "uri" => s.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }),
        "byte" => is_base64(s),
        "hexcolor" => {
            s.len() == 7 && s.starts_with('#') && s[1..].chars().all(|c| c.is_ascii_hexdigit())
        }
        _ => true,
    }
}

/// Check a string against `pattern` and `format`.
pub fn check_string(schema: &Value, s: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(p) = schema["pattern"].as_str() {
        // A pattern that does not compile was refused with its CRD.
        if compile(p).is_ok_and(|re| !re.is_match(s)) {
            push(
                causes,
                "FieldValueInvalid",
                path,
                format!("Invalid value: {s:?}: {path} in body should match '{p}'"),
            );
        }
    }
    if let Some(f) = schema["format"].as_str()
        && !has_format(f, s)
    {
        push(
            causes,
            "FieldValueInvalid",
            path,
            format!("Invalid value: {s:?}: {path} in body must be of type {f}: {s:?}"),
        );
    }
}

/// Check a number against `multipleOf` and the `int32`/`int64` formats.
pub fn check_number(schema: &Value, n: &serde_json::Number, path: &str, causes: &mut Vec<Cause>) {
    let x = n.as_f64().unwrap_or(0.0);
    if let Some(m) = schema["multipleOf"].as_f64()
        && m > 0.0
    {
        let q = x / m;
        if (q - q.round()).abs() > 1e-9 {
            push(
                causes,
                "FieldValueInvalid",
                path,
                format!("Invalid value: {n}: {path} in body should be a multiple of {m}"),
            );
        }
    }
    if schema["format"] == "int32" && n.as_i64().is_none_or(|i| i32::try_from(i).is_err()) {
        push(
            causes,
            "FieldValueInvalid",
            path,
            format!("Invalid value: {n}: {path} in body must be of type int32: \"{n}\""),
        );
    }
}

/// Check an object's property count.
pub fn check_object(schema: &Value, map: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    let n = map.len() as u64;
    if let Some(max) = schema["maxProperties"].as_u64()
        && n > max
    {
        push(
            causes,
            "FieldValueTooMany",
            path,
            format!("Too many: {n}: must have at most {max} items"),
        );
    }
    if let Some(min) = schema["minProperties"].as_u64()
        && n < min
    {
        push(
            causes,
            "FieldValueInvalid",
            path,
            format!("Invalid value: {n}: {path} in body should have at least {min} properties"),
        );
    }
}

/// Check the item uniqueness an `x-kubernetes-list-type` asks for.
pub fn check_list(schema: &Value, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
    let key_of = |item: &Value| -> Value {
        match schema["x-kubernetes-list-type"].as_str() {
            Some("map") => {
                let keys = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                Value::Array(
                    keys.iter()
                        .map(|k| item[k.as_str().unwrap_or("")].clone())
                        .collect(),
                )
            }
            _ => item.clone(),
        }
    };
    if !matches!(
        schema["x-kubernetes-list-type"].as_str(),
        Some("set" | "map")
    ) {
        return;
    }
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let k = key_of(item);
        if seen.contains(&k) {
            let shown = match schema["x-kubernetes-list-type"].as_str() {
                Some("map") => k.to_string(),
                _ => item.to_string(),
            };
            push(
                causes,
                "FieldValueDuplicate",
                &format!("{path}[{i}]"),
                format!("Duplicate value: {shown}"),
            );
        } else {
            seen.push(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats() {
        for (f, ok, bad) in [
            ("date", "2024-02-29", "2024-02-30"),
            ("date-time", "2024-01-01T00:00:00Z", "yesterday"),
            ("duration", "1h30m", "90 minutes"),
            ("uuid", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "not-a-uuid"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "::1", "::g"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "00:1a:2b:3c:4d:5e", "00:1a:2b"),
            ("hostname", "a.example.com", "-a.com"),
            ("email", "me@example.com", "me"),
            ("uri", "https://example.com/x", "example"),
            ("byte", "aGVsbG8=", "hello!"),
            ("hexcolor", "#00ff00", "green"),
        ] {
            assert!(has_format(f, ok), "{f}: {ok}");
            assert!(!has_format(f, bad), "{f}: {bad}");
        }
        assert!(has_format("something-else", "anything"));
    }

    #[test]
    fn patterns_numbers_objects_and_lists() {
        let mut c = Vec::new();
        check_string(
            &json!({"pattern": "^[a-z]+$"}),
            "UPPER-123",
            "spec.name",
            &mut c,
        );
        check_string(&json!({"pattern": "^[a-z]+$"}), "lower", "spec.ok", &mut c);
        check_number(&json!({"multipleOf": 5}), &7.into(), "spec.n", &mut c);
        check_number(
            &json!({"multipleOf": 0.5}),
            &serde_json::Number::from_f64(1.5).unwrap(),
            "spec.ok",
            &mut c,
        );
        check_number(
            &json!({"format": "int32"}),
            &(1i64 << 40).into(),
            "spec.i",
            &mut c,
        );
        let m = json!({"a": 1, "b": 2});
        check_object(
            &json!({"maxProperties": 1}),
            m.as_object().unwrap(),
            "spec.m",
            &mut c,
        );
        check_list(
            &json!({"x-kubernetes-list-type": "set"}),
            &[json!("a"), json!("b"), json!("a")],
            "spec.s",
            &mut c,
        );
        check_list(
            &json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
            &[json!({"name": "a", "v": 1}), json!({"name": "a", "v": 2})],
            "spec.l",
            &mut c,
        );
        check_list(
            &json!({"x-kubernetes-list-type": "atomic"}),
            &[json!(1), json!(1)],
            "spec.ok",
            &mut c,
        );
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "spec.name",
                "spec.n",
                "spec.i",
                "spec.m",
                "spec.s[2]",
                "spec.l[1]"
            ]
        );
        assert!(compile("(unclosed").is_err());
    }
}
