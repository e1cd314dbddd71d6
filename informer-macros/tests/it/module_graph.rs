//! The derive crate's layering, checked from its source (see the
//! `module-graph` crate): the three derives' modules import only downward,
//! and no module at any depth has a circle between its files.
//!
//! `custom_resource` (parsing, checking and expanding `#[resource]`) and
//! `reconciler` are independent; `api_types` reuses the resource parsing.

use std::path::Path;

use module_graph::{Layers, check};

const LAYERS: &[(&str, u8)] = &[("custom_resource", 1), ("reconciler", 1), ("api_types", 2)];

#[test]
fn layers_point_down_and_no_module_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules = Layers {
        layers: LAYERS,
        tolerated_inner: &[],
    };
    let problems = check(&src, &rules, &[("api_types", "custom_resource")]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
