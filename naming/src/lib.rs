//! Naming rules that must give the same answer wherever they run: in the
//! derive macros (a proc-macro crate, which cannot depend on
//! `controller-runtime`), in `controller-runtime`'s CRD checks and in the
//! `cargo xtask new` scaffold.
//!
//! - [`plural`]: the resource name of a kind (`Policy` -> `policies`), so a
//!   scaffolded project's manifests name the resource the derive does;
//! - [`edit_distance`] and [`closest`]: "did you mean" for a misspelt
//!   option, field or path segment.
//!
//! No dependencies: every crate of the workspace may use it.
//!
//! ```
//! assert_eq!(informer_naming::plural("Policy"), "policies");
//! assert_eq!(informer_naming::closest("onws", &["for", "owns"]), Some(&"owns"));
//! ```

/// Kinds whose plural is not made by the rules: already plural
/// (`Endpoints`) or the same in both numbers.
const IRREGULAR: &[(&str, &str)] = &[
    ("chassis", "chassis"),
    ("endpoints", "endpoints"),
    ("series", "series"),
    ("species", "species"),
];

/// The plural resource name of `kind`, lower case, as Kubernetes and
/// kubebuilder name resources: `-es` after `s`, `x`, `z`, `ch` and `sh`
/// (`Ingress` -> `ingresses`, `Status` -> `statuses`), `-ies` for a `y`
/// after a consonant (`Proxy` -> `proxies`, but `Gateway` -> `gateways`),
/// `-s` otherwise; a few kinds are irregular (`Endpoints` -> `endpoints`,
/// `Chassis` -> `chassis`).
///
/// ```
/// use informer_naming::plural;
/// for (kind, resource) in [("Widget", "widgets"), ("Policy", "policies"), ("Ingress", "ingresses"),
///     ("Status", "statuses"), ("Proxy", "proxies"), ("Chassis", "chassis"), ("Endpoints", "endpoints")] {
///     assert_eq!(plural(kind), resource);
/// }
/// ```
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if let Some((_, p)) = IRREGULAR.iter().find(|(s, _)| *s == lower) {
        return (*p).to_string();
    }
    let before_y = lower.strip_suffix('y');
    if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        format!("{lower}es")
    } else if let Some(stem) = before_y.filter(|s| s.chars().last().is_some_and(is_consonant)) {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

fn is_consonant(c: char) -> bool {
    c.is_ascii_alphabetic() && !matches!(c, 'a' | 'e' | 'i' | 'o' | 'u')
}

/// The edit distance between `a` and `b` (insertions, deletions and
/// substitutions of one character each).
///
/// ```
/// assert_eq!(informer_naming::edit_distance("kitten", "sitting"), 3);
/// ```
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The candidate closest to `word` ignoring case, when it is close enough
/// to be a typo: at most a third of the candidate's length away (at least
/// 2). Ties go to the first candidate.
///
/// ```
/// use informer_naming::closest;
/// let known = ["for", "owns", "watches", "max_concurrent"];
/// assert_eq!(closest("watch", &known), Some(&"watches"));
/// assert_eq!(closest("Max_Concurrency", &known), Some(&"max_concurrent"));
/// assert_eq!(closest("zzzzzzzz", &known), None);
/// ```
pub fn closest<'a, S: AsRef<str>>(word: &str, candidates: &'a [S]) -> Option<&'a S> {
    let word = word.to_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&word, &c.as_ref().to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.as_ref().chars().count() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_of_tricky_kinds() {
        for (kind, resource) in [
            ("Foo", "foos"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Ingress", "ingresses"),
            ("Status", "statuses"),
            ("Proxy", "proxies"),
            ("Chassis", "chassis"),
            ("Endpoints", "endpoints"),
            ("Box", "boxes"),
            ("Box2", "box2s"),
            ("Mailbox", "mailboxes"),
            ("Patch", "patches"),
            ("Bus", "buses"),
            ("Buy", "buys"),
            ("Y", "ys"),
        ] {
            assert_eq!(plural(kind), resource, "{kind}");
        }
    }

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("replica", "replicas"), 1);
        assert_eq!(edit_distance("flaw", "lawn"), 2);
    }
}
