//! "Did you mean": the closest known word to a misspelt one.

/// Edit distance between two words (insertions, deletions, substitutions).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(row[j + 1])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

/// The known word closest to `word`, when it is close enough to be a typo.
pub fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (distance(word, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
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
        assert_eq!(distance("kitten", "sitting"), 3);
        assert!(unknown("option", "zzz", &known).contains("expected one of: `for`"));
    }
}
