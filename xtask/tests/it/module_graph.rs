//! xtask's layering, checked from its source (see the `module-graph`
//! crate): the scaffold generator (`new`) is the shared base of the tasks
//! that build on it, tasks do not import each other, and no module at any
//! depth has a circle between its files (`bench/report.rs` is handed its
//! plotter instead of importing `bench/plot.rs` back).

use std::path::Path;

use module_graph::{Layers, check};

const LAYERS: &[(&str, u8)] = &[
    ("new", 1),
    ("bench", 2),
    ("ci", 2),
    ("manifests", 2),
    ("scaffold_check", 2),
    ("stress", 2),
];

#[test]
fn layers_point_down_and_no_module_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules = Layers {
        layers: LAYERS,
        tolerated_inner: &[],
    };
    let problems = check(&src, &rules, &[("ci", "new"), ("stress", "new")]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
