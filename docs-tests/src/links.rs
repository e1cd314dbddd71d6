//! The link check of the book: every relative Markdown link of
//! `docs/*.md` points at a file that exists and, when it names a section
//! (`page.md#anchor` or `#anchor`), at a heading of that page. Anchors are
//! computed as mdBook and GitHub compute them. External links (`http:`,
//! `https:`, `mailto:`) are not fetched.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The text of a page with fenced code blocks and inline code removed,
/// line by line (headings and links inside code are not headings or links).
fn prose(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in page.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) {
                fence = None;
            }
            out.push(String::new());
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let marker: String = trimmed
                .chars()
                .take_while(|c| *c == '`' || *c == '~')
                .collect();
            fence = Some(marker);
            out.push(String::new());
            continue;
        }
        out.push(line.to_owned());
    }
    out
}

/// `text` without inline code spans (their content is kept for headings by
/// [`heading_text`], dropped here so that `[a](b)` in code is no link).
fn without_code(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in text.chars() {
        if c == '`' {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            out.push(c);
        }
    }
    out
}

/// The text a heading renders: inline code keeps its content, a link its
/// text, emphasis markers go.
fn heading_text(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' | '*' => {}
            '[' => {}
            ']' if chars.peek() == Some(&'(') => {
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out.trim().to_owned()
}

/// mdBook's `normalize_id` (GitHub's rule gives the same for the headings
/// of this book): lower case; letters, digits, `_` and `-` kept; spaces
/// become `-`; everything else dropped.
pub(crate) fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered `-1`, `-2`
/// as mdBook and GitHub number them.
fn anchors(page: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose(page) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let id = anchor(&heading_text(&line[hashes..]));
        let n = seen.entry(id.clone()).or_insert(0);
        out.insert(if *n == 0 {
            id.clone()
        } else {
            format!("{id}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the inline links (`[text](target)`, `![alt](target)`)
/// of a page, with their line numbers.
fn links(page: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose(page).iter().enumerate() {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((i + 1, target.to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// Every broken link of the pages in `dir`: `page:line: target (why)`.
pub(crate) fn broken_links(dir: &Path) -> Vec<String> {
    let mut pages: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("the docs directory") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("a UTF-8 file name")
                .to_owned();
            pages.insert(name, std::fs::read_to_string(&path).expect("a page"));
        }
    }
    let mut broken = Vec::new();
    for (name, page) in &pages {
        for (line, target) in links(page) {
            if target.is_empty()
                || target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target.as_str(), None),
            };
            let problem = if file.is_empty() {
                fragment
                    .filter(|f| !anchors(page).contains(*f))
                    .map(|f| format!("no heading #{f} on this page"))
            } else if let Some(other) = pages.get(file) {
                fragment
                    .filter(|f| !anchors(other).contains(*f))
                    .map(|f| format!("no heading #{f} in {file}"))
            } else if file.ends_with(".md") && !file.contains('/') {
                Some(format!("no page {file} in docs/"))
            } else if !dir.join(file).exists() {
                Some(format!("no file {file}"))
            } else {
                None
            };
            if let Some(why) = problem {
                broken.push(format!("docs/{name}:{line}: {target} ({why})"));
            }
        }
    }
    broken
}

#[test]
fn every_link_of_the_book_points_at_a_page_and_heading_that_exist() {
    let broken = broken_links(&root().join("docs"));
    assert!(
        broken.is_empty(),
        "broken links in docs/:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_book_has_links_to_check() {
    // A parser that finds nothing passes trivially: make sure it finds the
    // links the book is built of.
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).expect("SUMMARY.md");
    assert!(links(&summary).len() >= 10, "SUMMARY.md's links not found");
}

#[test]
fn anchors_follow_mdbook() {
    assert_eq!(
        anchor(&heading_text("`ManagerBuilder` reference")),
        "managerbuilder-reference"
    );
    assert_eq!(
        anchor(&heading_text("Cache scope: namespaces, selectors")),
        "cache-scope-namespaces-selectors"
    );
    assert_eq!(
        anchor(&heading_text("6. Webhooks (`--webhooks`)")),
        "6-webhooks---webhooks"
    );
    assert_eq!(
        anchor(&heading_text("Running N replicas (sharding)")),
        "running-n-replicas-sharding"
    );
    let page = "# A\n## B\n## B\n```sh\n# not a heading\n```\n";
    let found = anchors(page);
    assert!(found.contains("b") && found.contains("b-1") && !found.contains("not-a-heading"));
}

#[test]
fn a_broken_link_is_reported() {
    let dir = std::env::temp_dir().join(format!("informer-docs-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    std::fs::write(dir.join("a.md"), "# A\n## Here\n[ok](#here) [ok](b.md#there) [bad](b.md#nowhere)\n[bad](c.md) [bad](#gone) `[code](c.md)` [web](https://example.com/x)\n").expect("a page");
    std::fs::write(dir.join("b.md"), "# B\n\n## There\n").expect("a page");
    let broken = broken_links(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("b.md#nowhere"));
    assert!(broken[1].contains("c.md"));
    assert!(broken[2].contains("#gone"));
}
