//! "Did you mean": the closest known word to a misspelt one.

/// The known word closest to `word`, when it is close enough to be a typo
/// (the rule shared with the `CustomResource` derive and
/// `controller-runtime`, see [`informer_naming::closest`]).
pub fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    informer_naming::closest(word, known).copied()
}

/// `unknown {what} `{word}`` with a suggestion or the list of known words.
pub fn unknown(what: &str, word: &str, known: &[&str]) -> String {
    match closest(word, known) {
        Some(k) => format!("unknown {what} `{word}`; did you mean `{k}`?"),
        None => format!(
            "unknown {what} `{word}`; expected one of: {}",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_words_only() {
        let known = ["for", "owns", "watches", "max_concurrent"];
        assert_eq!(closest("onws", &known), Some("owns"));
        assert_eq!(closest("watch", &known), Some("watches"));
        assert_eq!(closest("max_concurrency", &known), Some("max_concurrent"));
        assert_eq!(closest("zzzzzzzz", &known), None);
        assert!(unknown("option", "zzz", &known).contains("expected one of: `for`"));
    }
}
