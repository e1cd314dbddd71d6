//! The codec's layering, checked from its source (see the `module-graph`
//! crate): the field-by-field bridge and the kinds' table <- envelopes
//! and lists <- typed
//! decoding and watch frames <- the unit tests.

use std::path::Path;

use module_graph::{Layers, check};

const LAYERS: &[(&str, u8)] = &[
    ("bridge", 0),
    // Not a module: the tables `bridge` includes (`include!`), one per version.
    ("bridge_tables", 0),
    // The table of built-in kinds, as a macro `proto` and `typed` expand.
    ("kinds", 0),
    // The Go facts of the bridged types (and their tables, `include!`d).
    ("facts", 0),
    ("proto", 1),
    ("typed", 2),
    ("frames", 2),
    ("tests", 3),
    ("schema_tests", 3),
    ("go_style_tests", 3),
    ("skew_tests", 3),
];

#[test]
fn layers_point_down_and_no_module_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules = Layers {
        layers: LAYERS,
        tolerated_inner: &[],
    };
    let problems = check(
        &src,
        &rules,
        &[("proto", "bridge"), ("typed", "proto"), ("frames", "proto")],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
