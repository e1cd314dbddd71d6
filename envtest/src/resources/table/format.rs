//! How `kubectl get` cells are spelled: ages and durations in the API
//! server's short human form (`45s`, `3m20s`, `5h`, `2d3h`, `3y10d`), lists
//! joined with commas, label selectors as `k=v,k2 in (a,b)`, and the
//! `<none>` / `<unknown>` placeholders, read from an object as JSON.

use jiff::Timestamp;
use serde_json::Value;

/// The value at a dotted path (`spec.replicas`), if present.
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path.split('.') {
        cur = cur.get(seg)?;
    }
    (!cur.is_null()).then_some(cur)
}

/// The string at a dotted path, or "".
pub fn text<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

/// The integer at a dotted path, or `default`.
pub fn int(v: &Value, path: &str, default: i64) -> i64 {
    at(v, path).and_then(Value::as_i64).unwrap_or(default)
}

/// The array at a dotted path, or an empty slice.
pub fn list<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The number of entries of the object at a dotted path.
pub fn count(v: &Value, path: &str) -> i64 {
    at(v, path)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

/// `s`, or `<none>` when it is empty.
pub fn or_none(s: impl Into<String>) -> String {
    let s = s.into();
    if s.is_empty() { "<none>".into() } else { s }
}

/// A duration in seconds in the API server's short human form.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    let with = |big: i64, unit: &str, small: i64, unit2: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{unit2}")
        }
    };
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => with(m, "m", s % 60, "s"),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => with(h, "h", m % 60, "m"),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => with(h / 24, "d", h % 24, "h"),
        _ if h < 24 * 365 * 2 => format!("{}d", h / 24),
        _ if h < 24 * 365 * 8 => with(h / 24 / 365, "y", (h / 24) % 365, "d"),
        _ => format!("{}y", h / 24 / 365),
    }
}

/// Seconds from one RFC 3339 timestamp to another, if both parse.
pub fn seconds_between(from: &str, to: &str) -> Option<i64> {
    let from = from.parse::<Timestamp>().ok()?;
    let to = to.parse::<Timestamp>().ok()?;
    Some(to.as_second() - from.as_second())
}

/// How long ago an RFC 3339 timestamp was, or `<unknown>` when there is
/// none (the API server's wording for a zero time).
pub fn since(ts: &str, now: Timestamp) -> String {
    match ts.parse::<Timestamp>() {
        Ok(t) => human_duration(now.as_second() - t.as_second()),
        Err(_) => "<unknown>".into(),
    }
}

/// A label map as `k=v,k2=v2` (sorted by key, as stored), or `<none>`.
pub fn labels(v: Option<&Value>) -> String {
    let Some(m) = v.and_then(Value::as_object) else {
        return "<none>".into();
    };
    or_none(
        m.iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// A `LabelSelector` as the API server prints it: match labels as `k=v`,
/// expressions as `k in (a,b)`, `k notin (a)`, `k` or `!k`, ordered by
/// key; `<none>` when absent.
pub fn selector(v: Option<&Value>) -> String {
    let Some(sel) = v.filter(|s| s.is_object()) else {
        return "<none>".into();
    };
    let mut parts: Vec<(&str, String)> = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        parts.extend(
            m.iter()
                .map(|(k, v)| (k.as_str(), format!("{k}={}", v.as_str().unwrap_or("")))),
        );
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push((
            key,
            match e["operator"].as_str().unwrap_or("") {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                op => format!("{key} {op} ({})", values.join(",")),
            },
        ));
    }
    parts.sort_by(|a, b| a.0.cmp(b.0));
    parts
        .into_iter()
        .map(|(_, p)| p)
        .collect::<Vec<_>>()
        .join(",")
}

/// Names and images of a pod template's containers, comma-joined.
pub fn containers_and_images(pod_spec: Option<&Value>) -> (String, String) {
    let cs = pod_spec.map_or(&[][..], |s| list(s, "containers"));
    let names: Vec<&str> = cs.iter().map(|c| text(c, "name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| text(c, "image")).collect();
    (names.join(","), images.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_read_as_the_api_server_writes_them() {
        let cases = [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60 * 5, "3h5m"),
            (10 * 3600, "10h"),
            (50 * 3600, "2d2h"),
            (48 * 3600, "2d"),
            (10 * 86400, "10d"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn selectors_print_labels_then_expressions() {
        let s = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "gone", "operator": "DoesNotExist"}]});
        assert_eq!(selector(Some(&s)), "app=web,!gone,tier in (a,b)");
        assert_eq!(selector(None), "<none>");
        assert_eq!(labels(Some(&json!({"a": "1", "b": "2"}))), "a=1,b=2");
        assert_eq!(labels(Some(&json!({}))), "<none>");
    }

    #[test]
    fn since_counts_from_now() {
        let now: Timestamp = "2024-01-01T01:00:00Z".parse().unwrap();
        assert_eq!(since("2024-01-01T00:59:00Z", now), "60s");
        assert_eq!(since("", now), "<unknown>");
    }
}
