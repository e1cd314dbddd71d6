//! The rules a scaffolded project's names must follow, each refusal saying
//! which rule was broken and what would be accepted.

use super::NewError;

/// Rust keywords (strict and reserved, 2024 edition) and names a crate may
/// not take: a project or kind named like this would not compile.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// Crate names that would clash with the standard library, cargo's own
/// targets, or the project's dependencies.
const RESERVED_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "build",
    "deps",
    "examples",
    "benches",
    "controller_runtime",
    "envtest",
    "informer_core",
    "informer_macros",
    "kube_client",
    "kube_core",
    "k8s_openapi",
    "tokio",
    "serde",
    "schemars",
    "tracing",
    "tracing_subscriber",
    "thiserror",
    "serde_saphyr",
    "serde_json",
    "xtask",
];

/// Kinds that would clash with a name the generated code defines or
/// imports, or that Kubernetes treats specially.
const RESERVED_KINDS: &[&str] = &[
    "Self",
    "Status",
    "Spec",
    "Context",
    "CallInfo",
    "Controller",
    "Action",
    "Manager",
    "Object",
    "Api",
    "Client",
    "Error",
    "Result",
    "Option",
    "Some",
    "None",
    "Ok",
    "Err",
    "String",
    "Vec",
    "Box",
    "Arc",
    "List",
    "WatchEvent",
    "DeleteOptions",
    "ListOptions",
];

fn refuse(what: &'static str, value: &str, reason: String) -> NewError {
    NewError::InvalidName {
        what,
        value: value.to_string(),
        reason,
    }
}

/// A project (crate) name: lower case ASCII letters, digits, `-` and `_`,
/// starting with a letter, at most 64 characters, whose `_` form is a Rust
/// identifier that is neither a keyword nor a reserved crate name.
pub fn project_name(name: &str) -> Result<(), NewError> {
    let what = "project name";
    if name.is_empty() || name.len() > 64 {
        return Err(refuse(what, name, "use 1 to 64 characters".into()));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(refuse(
            what,
            name,
            "must start with a lower-case letter (a-z)".into(),
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(refuse(
            what,
            name,
            format!(
                "{bad:?} is not allowed; use a-z, 0-9, '-' and '_' (it becomes a Rust crate name)"
            ),
        ));
    }
    if name.ends_with(['-', '_']) || name.contains("--") || name.contains("__") {
        return Err(refuse(
            what,
            name,
            "must not end with or repeat '-' or '_'".into(),
        ));
    }
    let ident = crate_ident(name);
    if RUST_KEYWORDS.contains(&ident.as_str()) {
        return Err(refuse(what, name, format!("`{ident}` is a Rust keyword")));
    }
    if RESERVED_CRATES.contains(&ident.as_str()) {
        return Err(refuse(
            what,
            name,
            format!("`{ident}` is the name of a standard or dependency crate; pick another"),
        ));
    }
    Ok(())
}

/// The Rust identifier of a crate called `name`.
pub fn crate_ident(name: &str) -> String {
    name.replace('-', "_")
}

/// An API group: a DNS-1123 subdomain (lower-case labels of a-z, 0-9 and
/// `-`, each 1-63 characters starting and ending alphanumeric, dot-separated,
/// at most 253 in all) with at least one dot, as the API server requires of
/// a CRD's group, outside the Kubernetes-owned domains.
pub fn group(group: &str) -> Result<(), NewError> {
    let what = "group";
    if group.is_empty() || group.len() > 253 {
        return Err(refuse(what, group, "use 1 to 253 characters".into()));
    }
    if !group.contains('.') {
        return Err(refuse(
            what,
            group,
            format!("a CRD group needs a dot, like a domain you own: e.g. {group}.example.com"),
        ));
    }
    for label in group.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(refuse(
                what,
                group,
                "each dot-separated part must have 1 to 63 characters".into(),
            ));
        }
        if let Some(bad) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Err(refuse(
                what,
                group,
                format!("{bad:?} is not allowed; a DNS subdomain uses a-z, 0-9, '-' and '.'"),
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(refuse(
                what,
                group,
                format!("part {label:?} must start and end with a letter or digit"),
            ));
        }
    }
    for owned in ["k8s.io", "kubernetes.io"] {
        if group == owned || group.ends_with(&format!(".{owned}")) {
            return Err(refuse(
                what,
                group,
                format!(
                    "groups under {owned} belong to the Kubernetes project; use a domain you own"
                ),
            ));
        }
    }
    Ok(())
}

/// An API version as Kubernetes spells them: `v1`, `v2beta1`, `v1alpha3`.
pub fn version(version: &str) -> Result<(), NewError> {
    let refused = || {
        refuse(
            "version",
            version,
            "use v<N>, v<N>alpha<M> or v<N>beta<M> with N, M >= 1 (e.g. v1, v1alpha1, v2beta3)"
                .into(),
        )
    };
    let rest = version.strip_prefix('v').ok_or_else(refused)?;
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, tail) = rest.split_at(digits_end);
    let positive = |n: &str| !n.is_empty() && !n.starts_with('0') && n.len() <= 9;
    if !positive(major) {
        return Err(refused());
    }
    if tail.is_empty() {
        return Ok(());
    }
    let minor = tail
        .strip_prefix("alpha")
        .or_else(|| tail.strip_prefix("beta"))
        .ok_or_else(refused)?;
    if positive(minor) && minor.chars().all(|c| c.is_ascii_digit()) {
        Ok(())
    } else {
        Err(refused())
    }
}

/// The version before a valid `version`, in Kubernetes' version order:
/// `v2` -> `v1`, `v1` -> `v1beta1`, `v1beta2` -> `v1beta1`, `v1beta1` ->
/// `v1alpha1`, `v1alpha2` -> `v1alpha1`; `None` for `v<N>alpha1` (and for
/// anything [`version`] refuses).
pub fn older_version(version: &str) -> Option<String> {
    let rest = version.strip_prefix('v')?;
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, tail) = rest.split_at(digits_end);
    let major: u32 = major.parse().ok()?;
    if tail.is_empty() {
        return Some(if major > 1 {
            format!("v{}", major - 1)
        } else {
            "v1beta1".into()
        });
    }
    let (stage, minor) = if let Some(minor) = tail.strip_prefix("beta") {
        ("beta", minor)
    } else {
        ("alpha", tail.strip_prefix("alpha")?)
    };
    let minor: u32 = minor.parse().ok()?;
    match (stage, minor) {
        (_, m) if m > 1 => Some(format!("v{major}{stage}{}", m - 1)),
        ("beta", _) => Some(format!("v{major}alpha1")),
        _ => None,
    }
}

/// A kind: UpperCamelCase ASCII (a capital letter, then letters and
/// digits), at most 63 characters, not ending in `List` (the API server
/// names the list type `<Kind>List`) and not a name the generated code uses.
pub fn kind(kind: &str) -> Result<(), NewError> {
    let what = "kind";
    if kind.is_empty() || kind.len() > 63 {
        return Err(refuse(what, kind, "use 1 to 63 characters".into()));
    }
    if !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Err(refuse(
            what,
            kind,
            format!(
                "must be UpperCamelCase, starting with a capital letter: e.g. {}",
                upper_camel(kind)
            ),
        ));
    }
    if let Some(bad) = kind.chars().find(|c| !c.is_ascii_alphanumeric()) {
        return Err(refuse(
            what,
            kind,
            format!(
                "{bad:?} is not allowed; UpperCamelCase uses letters and digits only: e.g. {}",
                upper_camel(kind)
            ),
        ));
    }
    if kind.len() > 1
        && kind
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    {
        return Err(refuse(
            what,
            kind,
            format!(
                "must be UpperCamelCase, not all capitals: e.g. {}",
                upper_camel(kind)
            ),
        ));
    }
    if kind.ends_with("List") {
        return Err(refuse(
            what,
            kind,
            "must not end in `List`: the API server names the list type `<Kind>List`".into(),
        ));
    }
    if RESERVED_KINDS.contains(&kind) {
        return Err(refuse(
            what,
            kind,
            "is a name the generated code already uses; pick a domain word (e.g. Widget)".into(),
        ));
    }
    Ok(())
}

/// `foo_bar-baz` -> `FooBarBaz`, for suggestions.
fn upper_camel(s: &str) -> String {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut cs = p.chars();
            match cs.next() {
                Some(first) => {
                    first.to_ascii_uppercase().to_string() + &cs.as_str().to_ascii_lowercase()
                }
                None => String::new(),
            }
        })
        .collect()
}

/// The plural resource name of `kind`: the `CustomResource` derive's own
/// rule ([`informer_naming::plural`]), so the scaffold's manifests and the
/// derived CRD name the same resource.
pub fn plural(kind: &str) -> String {
    informer_naming::plural(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(r: Result<(), NewError>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(()) => "accepted".into(),
        }
    }

    #[test]
    fn project_names() {
        for ok in ["demo", "my-operator", "widget_ctl2", "a"] {
            assert!(project_name(ok).is_ok(), "{ok}");
        }
        assert!(reason(project_name("")).contains("1 to 64"));
        assert!(reason(project_name("Demo")).contains("lower-case letter"));
        assert!(reason(project_name("1demo")).contains("lower-case letter"));
        assert!(reason(project_name("my.operator")).contains("'.' is not allowed"));
        assert!(reason(project_name("demo-")).contains("must not end"));
        assert!(reason(project_name("fn")).contains("Rust keyword"));
        assert!(reason(project_name("async")).contains("Rust keyword"));
        assert!(reason(project_name("test")).contains("standard or dependency crate"));
        assert!(reason(project_name("controller-runtime")).contains("dependency crate"));
        assert!(project_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn groups() {
        for ok in [
            "demo.example.com",
            "samplecontroller.k8s.example.io",
            "a-b.c1",
        ] {
            assert!(group(ok).is_ok(), "{ok}");
        }
        assert!(reason(group("demo")).contains("needs a dot"));
        assert!(reason(group("Demo.example.com")).contains("'D' is not allowed"));
        assert!(reason(group("demo_x.example.com")).contains("'_' is not allowed"));
        assert!(reason(group("-demo.example.com")).contains("start and end"));
        assert!(reason(group("demo..com")).contains("1 to 63"));
        assert!(reason(group("apps.k8s.io")).contains("Kubernetes project"));
        assert!(reason(group("x.kubernetes.io")).contains("Kubernetes project"));
        assert!(group(&format!("{}.com", "a".repeat(64))).is_err());
    }

    #[test]
    fn versions() {
        for ok in ["v1", "v2", "v10", "v1alpha1", "v1beta2", "v3beta10"] {
            assert!(version(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1",
            "v",
            "v0",
            "v01",
            "V1",
            "v1alpha",
            "v1beta0",
            "v1gamma1",
            "v1-beta1",
            "v1alpha1x",
        ] {
            assert!(reason(version(bad)).contains("use v<N>"), "{bad}");
        }
    }

    #[test]
    fn older_versions() {
        for (version, older) in [
            ("v1", Some("v1beta1")),
            ("v2", Some("v1")),
            ("v1beta2", Some("v1beta1")),
            ("v1beta1", Some("v1alpha1")),
            ("v3alpha2", Some("v3alpha1")),
            ("v1alpha1", None),
            ("x1", None),
        ] {
            assert_eq!(older_version(version).as_deref(), older, "{version}");
        }
    }

    #[test]
    fn kinds() {
        for ok in ["Widget", "Foo", "CronTab", "Db2Cluster", "X"] {
            assert!(kind(ok).is_ok(), "{ok}");
        }
        assert!(reason(kind("widget")).contains("e.g. Widget"));
        assert!(reason(kind("cron_tab")).contains("e.g. CronTab"));
        assert!(reason(kind("Cron-Tab")).contains("'-' is not allowed"));
        assert!(reason(kind("CRONTAB")).contains("not all capitals"));
        assert!(reason(kind("WidgetList")).contains("List"));
        assert!(reason(kind("Self")).contains("generated code"));
        assert!(reason(kind("Status")).contains("generated code"));
    }

    #[test]
    fn plurals() {
        assert_eq!(plural("Widget"), "widgets");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(plural("Box2"), "box2s");
        assert_eq!(plural("Mailbox"), "mailboxes");
        assert_eq!(plural("Patch"), "patches");
        assert_eq!(plural("Bus"), "buses");
    }

    /// The scaffold names the resource as the `CustomResource` derive does
    /// (both call `informer_naming::plural`), on the kinds where simple
    /// rules go wrong.
    #[test]
    fn plurals_agree_with_the_derive_on_tricky_kinds() {
        for (kind, resource) in [
            ("Policy", "policies"),
            ("Ingress", "ingresses"),
            ("Status", "statuses"),
            ("Proxy", "proxies"),
            ("Chassis", "chassis"),
            ("Endpoints", "endpoints"),
        ] {
            assert_eq!(plural(kind), resource, "{kind}");
            assert_eq!(plural(kind), informer_naming::plural(kind), "{kind}");
        }
    }
}
