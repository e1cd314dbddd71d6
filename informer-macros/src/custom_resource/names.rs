//! The naming rules the API server enforces on CRDs, checked at compile
//! time, and "did you mean" suggestions.

/// A DNS subdomain with at least one dot, as CRD groups must be.
pub fn check_group(group: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid group `{group}`: {why}"));
    if group.len() > 253 {
        return bad("longer than 253 characters");
    }
    if !group.contains('.') {
        return bad("a CRD group must be a domain with at least one dot, e.g. `example.com`");
    }
    for label in group.split('.') {
        if let Err(why) = dns_label(label) {
            return bad(&why);
        }
    }
    Ok(())
}

fn dns_label(label: &str) -> Result<(), String> {
    if label.is_empty() || label.len() > 63 {
        return Err(format!("label `{label}` must be 1 to 63 characters"));
    }
    if !label
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(format!(
            "label `{label}` may only hold lowercase letters, digits and `-`"
        ));
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(format!(
            "label `{label}` must start and end with a letter or digit"
        ));
    }
    Ok(())
}

/// `v1`, `v2beta3`, `v1alpha1`: the versions Kubernetes sorts by priority.
pub fn check_version(version: &str) -> Result<(), String> {
    let bad = || {
        Err(format!(
            "invalid version `{version}`: expected `v<N>`, `v<N>alpha<M>` or `v<N>beta<M>` (e.g. `v1`, `v1beta2`)"
        ))
    };
    let Some(rest) = version.strip_prefix('v') else {
        return bad();
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return bad();
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return Ok(());
    }
    let Some(n) = tail
        .strip_prefix("alpha")
        .or_else(|| tail.strip_prefix("beta"))
    else {
        return bad();
    };
    if n.is_empty() || n.starts_with('0') || !n.chars().all(|c| c.is_ascii_digit()) {
        return bad();
    }
    Ok(())
}

/// UpperCamelCase ASCII.
pub fn check_kind(kind: &str) -> Result<(), String> {
    let mut chars = kind.chars();
    let first_upper = chars.next().is_some_and(|c| c.is_ascii_uppercase());
    if !first_upper || !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "invalid kind `{kind}`: a kind is UpperCamelCase ASCII letters and digits, e.g. `Foo` or `CronTab`"
        ));
    }
    Ok(())
}

/// A lowercase DNS-1035 label (plural, singular, short names, categories).
pub fn check_lower_label(value: &str, what: &str) -> Result<(), String> {
    let ok = value.len() <= 63
        && value.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} `{value}`: expected a lowercase DNS label (letters, digits, `-`, starting with a letter)"
        ))
    }
}

/// `"; did you mean `x`?"` for the closest candidate, if close enough
/// (the rule shared with `controller-runtime`, see [`informer_naming::closest`]).
pub fn did_you_mean<S: AsRef<str>>(word: &str, candidates: &[S]) -> String {
    informer_naming::closest(word, candidates)
        .map(|c| format!("; did you mean `{}`?", c.as_ref()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_dns_subdomains_with_a_dot() {
        assert!(check_group("samplecontroller.k8s.io").is_ok());
        assert!(check_group("example").is_err());
        assert!(check_group("Example.com").is_err());
        assert!(check_group("-a.com").is_err());
        assert!(check_group("a..com").is_err());
    }

    #[test]
    fn versions_follow_kube_version_priority_names() {
        for ok in ["v1", "v10", "v1alpha1", "v2beta3"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1", "v0", "v01", "v1alpha", "v1gamma1", "V1", "v1beta01", "",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_are_upper_camel_case() {
        assert!(check_kind("CronTab").is_ok());
        assert!(check_kind("cronTab").is_err());
        assert!(check_kind("Cron_Tab").is_err());
        assert!(check_kind("").is_err());
    }

    #[test]
    fn suggestions_pick_the_closest_candidate() {
        assert_eq!(
            did_you_mean("integr", &["integer", "string"]),
            "; did you mean `integer`?"
        );
        assert_eq!(did_you_mean("zzzzzz", &["integer", "string"]), "");
        assert_eq!(
            did_you_mean("replica", &["replicas", "deploymentName"]),
            "; did you mean `replicas`?"
        );
    }
}
