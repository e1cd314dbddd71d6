//! The checker on scratch crates: each rule reported, naming the edge.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{Layers, check, paths_used, violations};

#[test]
fn parser_ignores_comments_and_strings_and_reads_use_trees() {
    let src = r##"
        //! [`crate::controller::worker`] in a doc comment
        /* crate::manager::x in /* a nested */ block comment */
        use crate::{error::BoxError, reconcile::{object::ObjectContext, adapter as a}};
        use super::{sibling, super::cousin::Thing};
        fn f() { let _ = "crate::controller::y"; let _ = r#"crate::manager"#; crate::workqueue::Queue::new(); }
    "##;
    let here: Vec<String> = ["reconcile", "object", "inner"].map(String::from).to_vec();
    let found: BTreeSet<Vec<String>> = paths_used(src, &here)
        .into_iter()
        .map(|p| p.into_iter().take(2).collect())
        .collect();
    let expect: BTreeSet<Vec<String>> = [
        vec!["error", "BoxError"],
        vec!["reconcile", "object"],
        vec!["reconcile", "adapter"],
        vec!["reconcile", "cousin"],
        vec!["workqueue", "Queue"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    assert_eq!(found, expect);
}

/// A scratch crate source tree under the temp directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("module-graph-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const LAYERS: Layers<'static> = Layers {
    layers: &[
        ("action", 0),
        ("object", 0),
        ("store", 1),
        ("queue", 1),
        ("factory", 5),
    ],
    tolerated_inner: &[],
};

#[test]
fn circles_and_upward_imports_are_reported() {
    let dir = Scratch::new("bad");
    dir.write("lib.rs", "mod store; mod factory;");
    dir.write("store/mod.rs", "use crate::factory::server::Thing;");
    dir.write("factory/mod.rs", "");
    dir.write(
        "factory/server.rs",
        "use crate::store::Store; use super::state::S;",
    );
    dir.write("factory/state.rs", "use crate::factory::server::X;");
    let all = violations(&dir.0, &LAYERS).join("\n");
    assert!(
        all.contains("upward import: `store` (layer 1) uses `crate::factory` (layer 5)"),
        "{all}"
    );
    assert!(all.contains("circle between top-level modules"), "{all}");
    assert!(
        all.contains("circle inside `factory`: server -> state -> server")
            || all.contains("circle inside `factory`: state -> server -> state"),
        "{all}"
    );
    // A tolerated edge takes that inner circle out, and only that one.
    let tolerant = Layers {
        tolerated_inner: &[("factory", "state", "server")],
        ..LAYERS
    };
    let all = violations(&dir.0, &tolerant).join("\n");
    assert!(!all.contains("circle inside"), "{all}");
    assert!(all.contains("upward import"), "{all}");
}

#[test]
fn same_layer_imports_are_reported_except_in_the_vocabulary() {
    let dir = Scratch::new("same");
    dir.write("lib.rs", "mod store; mod queue; mod action; mod object;");
    dir.write("store.rs", "use crate::queue::Q;");
    dir.write("queue.rs", "use crate::action::A;");
    dir.write("action.rs", "use crate::object::O;");
    dir.write("object.rs", "");
    assert_eq!(
        violations(&dir.0, &LAYERS),
        vec!["same-layer import: `store` (layer 1) uses `crate::queue` (layer 1)".to_string()]
    );
}

#[test]
fn listed_modules_that_are_absent_do_not_fail() {
    // A crate may reserve slots for modules being added elsewhere; a crate
    // without them is fine, and a module with no slot is reported.
    let dir = Scratch::new("absent");
    dir.write("lib.rs", "mod object; mod store;");
    dir.write("store.rs", "use crate::object::X;");
    dir.write("object.rs", "");
    assert_eq!(violations(&dir.0, &LAYERS), Vec::<String>::new());
    dir.write("unlisted.rs", "");
    assert_eq!(
        violations(&dir.0, &LAYERS),
        vec!["top-level module `unlisted` has no layer in LAYERS".to_string()]
    );
}

#[test]
fn an_expected_edge_the_parser_missed_is_reported() {
    let dir = Scratch::new("expected");
    dir.write("lib.rs", "mod object; mod store;");
    dir.write("store.rs", "use crate::object::X;");
    dir.write("object.rs", "");
    assert_eq!(
        check(&dir.0, &LAYERS, &[("store", "object")]),
        Vec::<String>::new()
    );
    let missed = check(&dir.0, &LAYERS, &[("object", "store")]);
    assert_eq!(missed.len(), 1, "{missed:?}");
    assert!(
        missed[0].starts_with("expected `object` to use `store`"),
        "{missed:?}"
    );
}

/// A circle between two files of a module two levels down (`http/crud/`)
/// is reported, by its whole module path; the same files without the
/// circle are clean. (The check once read only the top-level modules and
/// their direct children.)
#[test]
fn a_circle_between_two_files_deep_inside_a_module_is_reported() {
    let dir = Scratch::new("deep");
    dir.write("lib.rs", "mod store;");
    dir.write("store/mod.rs", "mod http;");
    dir.write("store/http/mod.rs", "mod crud;");
    dir.write("store/http/crud/mod.rs", "mod admit; mod write;");
    dir.write("store/http/crud/write.rs", "use super::admit::admit;");
    dir.write(
        "store/http/crud/admit.rs",
        "pub fn admit() { crate::store::http::crud::write::stamp(); }",
    );
    let all = violations(&dir.0, &LAYERS).join("\n");
    assert!(
        all.contains("circle inside `store::http::crud`: admit -> write -> admit"),
        "{all}"
    );
    // A tolerated edge, named by the module's whole path, takes it out.
    let tolerant = Layers {
        tolerated_inner: &[("store::http::crud", "admit", "write")],
        ..LAYERS
    };
    assert!(violations(&dir.0, &tolerant).is_empty());
    // Broken: admit no longer calls back into write.
    dir.write("store/http/crud/admit.rs", "pub fn admit() {}");
    assert!(violations(&dir.0, &LAYERS).is_empty());
}

/// A binary crate's root (`main.rs`) is the crate, not a module.
#[test]
fn a_binary_crate_root_is_not_a_module() {
    let dir = Scratch::new("bin");
    dir.write("main.rs", "mod store; fn main() { crate::store::run(); }");
    dir.write("store.rs", "pub fn run() {}");
    assert!(violations(&dir.0, &LAYERS).is_empty());
}
