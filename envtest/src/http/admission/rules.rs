//! Which admission webhooks (and policies) a request goes to, as
//! kube-apiserver decides it: `rules` (API groups, versions, resources with
//! subresources and `*`, operations, scope), `matchPolicy`,
//! `namespaceSelector` and `objectSelector`. The CEL `matchConditions` are
//! evaluated in `review`, once a webhook matched on these.

use crate::resources::selectors::LabelSelector;
use serde_json::Value;

/// What a request is, as rules see it.
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    /// API group of the resource.
    pub group: &'a str,
    /// Version of the request.
    pub version: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
    /// Subresource, empty for the main resource.
    pub sub: &'a str,
    /// `CREATE`, `UPDATE`, `DELETE` (`CONNECT` is never sent).
    pub operation: &'a str,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array()
        .map(|a| a.as_slice())
        .unwrap_or(&[])
        .iter()
        .filter_map(Value::as_str)
}

fn any_is(v: &Value, want: &str) -> bool {
    strings(v).any(|s| s == "*" || s == want)
}

fn resource_matches(resources: &Value, resource: &str, sub: &str) -> bool {
    strings(resources).any(|r| {
        let (res, rsub) = r.split_once('/').unwrap_or((r, ""));
        (res == "*" || res == resource) && (rsub == "*" || rsub == sub)
    })
}

/// Does one rule (`RuleWithOperations`) match? With `any_version` (the
/// `Equivalent` match policy, where the caller knows the rule's versions
/// name the same resource) the version is not compared.
pub fn rule_matches(rule: &Value, s: &Scope<'_>, any_version: bool) -> bool {
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !s.namespaced,
        "Namespaced" => s.namespaced,
        _ => true,
    };
    scope_ok
        && any_is(&rule["operations"], s.operation)
        && any_is(&rule["apiGroups"], s.group)
        && (any_version || any_is(&rule["apiVersions"], s.version))
        && resource_matches(&rule["resources"], s.resource, s.sub)
}

/// Which other versions of a request's resource a webhook's rules may
/// match it through (its match policy, and what envtest knows of the
/// resource's versions).
#[derive(Debug, Clone, Copy)]
pub enum Equivalents<'a> {
    /// `matchPolicy: Exact`: only the request's version.
    Exact,
    /// `Equivalent` for a kind envtest serves in one version (built-in
    /// kinds): a rule naming any version matches, in the request's version.
    AnyVersion,
    /// `Equivalent` for a custom resource: these served versions, in the
    /// CRD's order.
    Versions(&'a [String]),
}

/// The version a webhook's `rules` match a request in: the request's own
/// when a rule names it, else (`Equivalent`) the first equivalent version
/// a rule names, earlier rules first, as kube-apiserver picks it; `None`
/// when nothing matches.
pub fn matched_version(rules: &Value, s: &Scope<'_>, eq: Equivalents<'_>) -> Option<String> {
    let rules = rules.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if rules.iter().any(|r| rule_matches(r, s, false)) {
        return Some(s.version.to_string());
    }
    match eq {
        Equivalents::Exact => None,
        Equivalents::AnyVersion => rules
            .iter()
            .any(|r| rule_matches(r, s, true))
            .then(|| s.version.to_string()),
        Equivalents::Versions(versions) => rules.iter().find_map(|r| {
            versions
                .iter()
                .filter(|v| v.as_str() != s.version)
                .find(|v| {
                    let other = Scope {
                        version: v.as_str(),
                        ..s.clone()
                    };
                    rule_matches(r, &other, false)
                })
                .cloned()
        }),
    }
}

/// A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) as a
/// selector; `None` when it cannot be understood (it then matches nothing).
pub fn label_selector(sel: &Value) -> Option<LabelSelector> {
    let mut parts = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str()?));
        }
    }
    for e in sel["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
    {
        let key = e["key"].as_str()?;
        let values: Vec<&str> = strings(&e["values"]).collect();
        parts.push(match e["operator"].as_str()? {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    parts.join(",").parse().ok()
}

/// Does a selector (absent = everything) match these labels?
pub fn selector_matches(sel: &Value, labels: Option<&Value>) -> bool {
    if sel.is_null() {
        return true;
    }
    label_selector(sel).is_some_and(|s| s.matches(labels))
}

/// `objectSelector`: the new object's or the old object's labels match.
pub fn object_selector_matches(sel: &Value, object: Option<&Value>, old: Option<&Value>) -> bool {
    if sel.is_null() || label_selector(sel).is_some_and(|s| s.is_empty()) {
        return true;
    }
    [object, old]
        .into_iter()
        .flatten()
        .any(|o| selector_matches(sel, o["metadata"].get("labels")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scope<'a>(resource: &'a str, sub: &'a str, op: &'a str) -> Scope<'a> {
        Scope {
            group: "",
            version: "v1",
            resource,
            sub,
            operation: op,
            namespaced: true,
        }
    }

    #[test]
    fn resources_subresources_and_wildcards() {
        let rule = |res: &str| json!({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": [res]});
        let pods = scope("pods", "", "CREATE");
        let status = scope("pods", "status", "UPDATE");
        assert!(rule_matches(&rule("pods"), &pods, false));
        assert!(!rule_matches(&rule("pods"), &status, false));
        assert!(rule_matches(&rule("pods/status"), &status, false));
        assert!(rule_matches(&rule("pods/*"), &status, false));
        // As kube-apiserver reads it, `pods/*` covers the main resource too.
        assert!(rule_matches(&rule("pods/*"), &pods, false));
        assert!(rule_matches(&rule("*"), &pods, false));
        assert!(!rule_matches(&rule("*"), &status, false));
        assert!(rule_matches(&rule("*/*"), &status, false));
        assert!(rule_matches(&rule("*/status"), &status, false));
        let mut r = rule("pods");
        r["scope"] = json!("Cluster");
        assert!(!rule_matches(&r, &pods, false));
        r["scope"] = json!("Namespaced");
        assert!(rule_matches(&r, &pods, false));
        let r = json!({"apiGroups": [""], "apiVersions": ["v2"], "operations": ["DELETE"], "resources": ["pods"]});
        assert!(!rule_matches(&r, &scope("pods", "", "CREATE"), true));
        assert!(rule_matches(&r, &scope("pods", "", "DELETE"), true));
        assert!(!rule_matches(&r, &scope("pods", "", "DELETE"), false));
    }

    #[test]
    fn equivalent_versions_are_picked_earlier_rules_first() {
        let s = Scope {
            group: "example.com",
            version: "v1alpha1",
            resource: "foos",
            sub: "",
            operation: "CREATE",
            namespaced: true,
        };
        let rule = |v: &str| json!({"apiGroups": ["example.com"], "apiVersions": [v], "operations": ["*"], "resources": ["foos"]});
        let served = [
            "v1".to_string(),
            "v1beta1".to_string(),
            "v1alpha1".to_string(),
        ];
        let eq = Equivalents::Versions(&served);
        let two = json!([rule("v1beta1"), rule("v1")]);
        assert_eq!(matched_version(&two, &s, eq).as_deref(), Some("v1beta1"));
        let own = json!([rule("v1"), rule("v1alpha1")]);
        assert_eq!(matched_version(&own, &s, eq).as_deref(), Some("v1alpha1"));
        let unserved = json!([rule("v2")]);
        assert_eq!(matched_version(&unserved, &s, eq), None);
        assert_eq!(
            matched_version(&unserved, &s, Equivalents::AnyVersion).as_deref(),
            Some("v1alpha1")
        );
        assert_eq!(
            matched_version(&json!([rule("v1")]), &s, Equivalents::Exact),
            None
        );
    }

    #[test]
    fn selectors() {
        let sel = json!({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}]});
        assert!(selector_matches(&sel, Some(&json!({"a": "1"}))));
        assert!(!selector_matches(&sel, Some(&json!({"a": "1", "b": "x"}))));
        assert!(selector_matches(&json!({}), None));
        assert!(selector_matches(&Value::Null, None));
        let new = json!({"metadata": {"labels": {"a": "2"}}});
        let old = json!({"metadata": {"labels": {"a": "1"}}});
        let sel = json!({"matchLabels": {"a": "1"}});
        assert!(object_selector_matches(&sel, Some(&new), Some(&old)));
        assert!(!object_selector_matches(&sel, Some(&new), None));
    }
}
