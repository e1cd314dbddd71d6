//! The bench's layering, checked from its source (see the `module-graph`
//! crate): the shared pieces (fixtures, the heap probe, the record of
//! results) below the scenarios, scenarios never importing each other, the
//! profiling mode above them, and
//! no module at any depth with a circle between its files.

use std::path::Path;

use module_graph::{Layers, check};

const LAYERS: &[(&str, u8)] = &[
    ("fixtures", 1),
    ("heap", 1),
    ("record", 1),
    ("controller", 2),
    ("fleet", 2),
    ("indexer", 2),
    ("protobuf", 2),
    ("relist", 2),
    ("scope", 2),
    ("sharding", 2),
    ("sync", 2),
    ("watch", 2),
    ("webhook", 2),
    ("workqueue", 2),
    // The profiling mode runs one scenario's phase alone (it seeds with
    // the protobuf scenario's fixtures), so it sits above the scenarios.
    ("profile", 3),
];

#[test]
fn layers_point_down_and_no_module_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules = Layers {
        layers: LAYERS,
        tolerated_inner: &[],
    };
    let problems = check(&src, &rules, &[]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
