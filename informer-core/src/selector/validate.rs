//! The API server's rules for label keys (qualified names) and values.

/// Longest name part of a key, and longest value.
const MAX_NAME: usize = 63;
/// Longest key prefix (a DNS subdomain).
const MAX_PREFIX: usize = 253;

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn check_name(part: &str, what: &str) -> Result<(), String> {
    if part.len() > MAX_NAME {
        return Err(format!(
            "{what} must be no more than {MAX_NAME} characters (it has {})",
            part.len()
        ));
    }
    let bytes = part.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    let inner_ok = bytes
        .iter()
        .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'));
    if !inner_ok || !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return Err(format!(
            "{what} must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

/// A lowercase RFC 1123 subdomain: dot-separated labels of `[a-z0-9-]`,
/// each starting and ending with `[a-z0-9]`, at most 253 characters.
fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.len() > MAX_PREFIX {
        return Err(format!(
            "prefix must be no more than {MAX_PREFIX} characters (it has {})",
            prefix.len()
        ));
    }
    let ok = prefix.split('.').all(|label| {
        let b = label.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(edge)
            && b.last().is_some_and(edge)
            && b.iter().all(|c| edge(c) || *c == b'-')
    });
    if !ok {
        return Err("prefix must be a lowercase DNS subdomain (labels of 'a-z', '0-9' and '-' separated by '.', each starting and ending with a letter or digit)".to_owned());
    }
    Ok(())
}

/// Checks a label key: `[prefix/]name`.
pub(super) fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("a key must not be empty".to_owned());
    }
    let mut parts = key.split('/');
    let first = parts.next().unwrap_or_default();
    match (parts.next(), parts.next()) {
        (None, _) => check_name(first, "name part"),
        (Some(name), None) => {
            if first.is_empty() {
                return Err("prefix part must not be empty".to_owned());
            }
            check_prefix(first)?;
            if name.is_empty() {
                return Err("name part must not be empty".to_owned());
            }
            check_name(name, "name part")
        }
        (Some(_), Some(_)) => {
            Err("a key may contain at most one '/' (between prefix and name)".to_owned())
        }
    }
}

/// Checks a label value: empty, or a name of at most 63 characters.
pub(super) fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name(value, "a value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for ok in [
            "a",
            "app",
            "A.b-c_d9",
            "example.com/app",
            "k8s.io/x",
            "a/b",
            &"x".repeat(63),
        ] {
            assert!(check_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a b",
            "/a",
            "a/",
            "a/b/c",
            "Example.com/x",
            "ex_ample.com/x",
            "-a.com/x",
            &"x".repeat(64),
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        assert!(check_key(&format!("{}/x", "a".repeat(254))).is_err());
        assert!(check_key(&format!("{}/x", vec!["a".repeat(60); 4].join("."))).is_ok());
    }

    #[test]
    fn values() {
        for ok in ["", "a", "v1.2", "A_b-c", &"x".repeat(63)] {
            assert!(check_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-a", "a-", "a/b", "a b", &"x".repeat(64)] {
            assert!(check_value(bad).is_err(), "{bad}");
        }
        assert!(check_value(&"x".repeat(64)).unwrap_err().contains("63"));
    }
}
