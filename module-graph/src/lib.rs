//! The layering check shared by the workspace's module-graph tests (every
//! crate's `tests/it/module_graph.rs`; xtask's in its unit tests). It reads a crate's `src/`, resolves every
//! `crate::...` and `super::...` path outside comments and string literals to
//! the module it names, and reports what breaks the crate's layers: a
//! top-level module with no layer, an import that points up a layer or
//! sideways within one, and a circle between top-level modules or between
//! the submodules of any module at any depth (two files of `http/crud/`
//! that import each other are a circle inside `http::crud`).
//!
//! A test tool, not a library of the framework: it is a dev-dependency only,
//! and a source file it cannot read fails the test that asked.
//!
//! ```
//! use module_graph::{Layers, violations};
//! // A crate whose store reaches up into its factory.
//! let src = std::env::temp_dir().join(format!("module-graph-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&src)?;
//! std::fs::write(src.join("lib.rs"), "mod store; mod factory;")?;
//! std::fs::write(src.join("store.rs"), "use crate::factory::Factory;")?;
//! std::fs::write(src.join("factory.rs"), "use crate::store::Store;")?;
//! let layers = Layers { layers: &[("store", 1), ("factory", 2)], tolerated_inner: &[] };
//! let problems = violations(&src, &layers);
//! assert_eq!(problems[0], "upward import: `store` (layer 1) uses `crate::factory` (layer 2)");
//! assert_eq!(problems[1], "circle between top-level modules: factory -> store -> factory");
//! std::fs::remove_dir_all(&src)?;
//! # Ok::<(), std::io::Error>(())
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's layer rules.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    /// Each top-level module and its layer. A module may import only modules
    /// of a lower layer, except that modules of layer 0 (the vocabulary or
    /// shared leaves) may import each other without a circle. A module listed
    /// here that does not exist is fine; a module missing here is reported.
    pub layers: &'a [(&'a str, u8)],
    /// Edges inside one module, `(parent, from, to)`, left out of its circle
    /// check: for a module whose owner is still taking a circle apart. Every
    /// entry should say in a comment why it is there.
    pub tolerated_inner: &'a [(&'a str, &'a str, &'a str)],
}

/// The top-level module graph of the crate whose source is at `src`: each
/// module and the modules it imports.
pub fn top_level_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let (tree, uses) = crate_graph(src);
    edges_among(&[], &tree, &uses)
}

/// [`violations`] of the crate at `src`, plus one line for each edge of
/// `expected` (`(from, to)` between top-level modules) the parser did not
/// find: a crate's test names a few real imports so that a parser that
/// sees nothing cannot pass vacuously.
pub fn check(src: &Path, rules: &Layers<'_>, expected: &[(&str, &str)]) -> Vec<String> {
    let top = top_level_edges(src);
    let mut problems: Vec<String> = expected
        .iter()
        .filter(|(from, to)| !top.get(*from).is_some_and(|t| t.contains(*to)))
        .map(|(from, to)| format!("expected `{from}` to use `{to}`; graph: {top:?}"))
        .collect();
    problems.extend(violations(src, rules));
    problems
}

/// Everything in the crate at `src` that breaks `rules`, one line each,
/// naming the edge (empty when the crate keeps its layers).
pub fn violations(src: &Path, rules: &Layers<'_>) -> Vec<String> {
    let (tree, uses) = crate_graph(src);
    let mut problems = Vec::new();
    let top = edges_among(&[], &tree, &uses);
    let layer = |m: &str| rules.layers.iter().find(|(n, _)| *n == m).map(|(_, l)| *l);
    for m in tree.get(&Vec::new()).into_iter().flatten() {
        if layer(m).is_none() {
            problems.push(format!("top-level module `{m}` has no layer in LAYERS"));
        }
    }
    for (from, tos) in &top {
        for to in tos {
            match (layer(from), layer(to)) {
                (Some(a), Some(b)) if b < a || (a == 0 && b == 0) => {}
                (Some(a), Some(b)) => {
                    let kind = if a == b { "same-layer" } else { "upward" };
                    problems.push(format!(
                        "{kind} import: `{from}` (layer {a}) uses `crate::{to}` (layer {b})"
                    ))
                }
                _ => {}
            }
        }
    }
    if let Some(c) = find_circle(&top) {
        problems.push(format!(
            "circle between top-level modules: {}",
            c.join(" -> ")
        ));
    }
    // Every module at every depth: a circle between the files (or inline
    // submodules) of one module is a circle too.
    for parent in tree.keys().filter(|k| !k.is_empty()) {
        let name = parent.join("::");
        let mut inner = edges_among(parent, &tree, &uses);
        for (p, from, to) in rules.tolerated_inner {
            if name == *p
                && let Some(tos) = inner.get_mut(*from)
            {
                tos.remove(*to);
            }
        }
        if let Some(c) = find_circle(&inner) {
            problems.push(format!("circle inside `{name}`: {}", c.join(" -> ")));
        }
    }
    problems
}

/// Module path -> the paths it uses (whole, e.g. `["http", "crud",
/// "admit", "Admission"]`), from one crate's source directory.
type Uses = BTreeMap<Vec<String>, BTreeSet<Vec<String>>>;

/// Blank out comments (line, doc and nested block comments) and the contents
/// of string and char literals, keeping everything else in place.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !ident(b[i - 1]))
        {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // An escaped char literal such as '\n' or '\''.
            i += 2;
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// A tiny tokenizer over stripped source: identifiers, `::` and single
/// punctuation characters.
fn tokens(src: &str) -> Vec<String> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Parse a path or use tree starting at `t[*i]` (just after a `::`), giving
/// every path it names (segments only; `self`, `*` and renames dropped).
fn tree(t: &[String], i: &mut usize) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    loop {
        match t.get(*i).map(String::as_str) {
            Some("{") => {
                *i += 1;
                let mut all = Vec::new();
                while let Some(tok) = t.get(*i) {
                    if tok == "}" {
                        *i += 1;
                        break;
                    }
                    if tok == "," {
                        *i += 1;
                        continue;
                    }
                    let before = *i;
                    for sub in tree(t, i) {
                        let mut p = prefix.clone();
                        p.extend(sub);
                        all.push(p);
                    }
                    if *i == before {
                        *i += 1;
                    }
                }
                return all;
            }
            Some(s) if s.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                if s != "self" {
                    prefix.push(s.to_string());
                }
                *i += 1;
                if t.get(*i).map(String::as_str) == Some("::") {
                    *i += 1;
                    continue;
                }
                if t.get(*i).map(String::as_str) == Some("as") {
                    *i += 2;
                }
                return vec![prefix];
            }
            _ => return vec![prefix],
        }
    }
}

/// The absolute module paths (crate-relative) used by one file whose own
/// module path is `here`.
fn paths_used(src: &str, here: &[String]) -> Vec<Vec<String>> {
    let t = tokens(&strip(src));
    let mut found = Vec::new();
    let mut i = 0;
    while i < t.len() {
        let after_path = i > 0 && t[i - 1] == "::";
        let base: Option<Vec<String>> = match t[i].as_str() {
            "crate" if !after_path => Some(Vec::new()),
            "super" if !after_path => {
                let mut up = here.to_vec();
                up.pop();
                let mut j = i + 1;
                while t.get(j).map(String::as_str) == Some("::")
                    && t.get(j + 1).map(String::as_str) == Some("super")
                {
                    up.pop();
                    j += 2;
                }
                i = j - 1;
                Some(up)
            }
            _ => None,
        };
        i += 1;
        if let Some(base) = base
            && t.get(i).map(String::as_str) == Some("::")
        {
            i += 1;
            for p in tree(&t, &mut i) {
                let mut full = base.clone();
                for seg in p {
                    if seg == "super" {
                        full.pop();
                    } else {
                        full.push(seg);
                    }
                }
                found.push(full);
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file (`http/crud/mod.rs` -> `http::crud`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut segs: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// The module tree (module path -> child names) and the uses of every
/// module of the crate at `src`. The crate root (`lib.rs`, `main.rs`) and
/// `bin/` are not modules of the tree.
fn crate_graph(src: &Path) -> (BTreeMap<Vec<String>, BTreeSet<String>>, Uses) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut tree: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    let mut uses = Uses::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let here = module_of(rel);
        let root = here.len() == 1 && matches!(here[0].as_str(), "lib" | "main");
        if root || here.first().is_some_and(|m| m == "bin") {
            continue;
        }
        for depth in 0..here.len() {
            tree.entry(here[..depth].to_vec())
                .or_default()
                .insert(here[depth].clone());
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for p in paths_used(&text, &here) {
            uses.entry(here.clone()).or_default().insert(p);
        }
    }
    (tree, uses)
}

/// Edges between the children of `parent` (only paths naming a child count).
fn edges_among(
    parent: &[String],
    tree: &BTreeMap<Vec<String>, BTreeSet<String>>,
    uses: &Uses,
) -> BTreeMap<String, BTreeSet<String>> {
    let children = tree.get(parent).cloned().unwrap_or_default();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in uses {
        let Some(from_child) = from.get(parent.len()) else {
            continue;
        };
        if !from.starts_with(parent) || !children.contains(from_child) {
            continue;
        }
        for to in targets {
            if to.len() > parent.len()
                && to.starts_with(parent)
                && children.contains(&to[parent.len()])
                && to[parent.len()] != *from_child
            {
                g.entry(from_child.clone())
                    .or_default()
                    .insert(to[parent.len()].clone());
            }
        }
    }
    g
}

/// One circle of `g`, if any, as the list of nodes from its start back to it.
fn find_circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == n) {
            let mut circle = stack[at..].to_vec();
            circle.push(n.to_string());
            return Some(circle);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut done, &mut Vec::new()))
}

#[cfg(test)]
mod tests;
