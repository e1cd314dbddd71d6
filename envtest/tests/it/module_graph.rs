//! The crate's layering, checked from its source: `envtest/src` is read,
//! every `crate::...` and `super::...` path outside comments and string
//! literals is resolved to the module it names, and the graph of top-level
//! modules must point only down the layers (storage <- resources <- codec <-
//! http <- env, with the shared leaf modules usable by all) and have no
//! circle; inside each layer, its submodules must not form a circle either.

use std::path::Path;

use module_graph::{Layers, check};

/// Each top-level module and its layer; a module may import only modules of
/// a lower layer, except that shared leaf modules (layer 0) may import each
/// other (without a circle).
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("request", 0),
    ("tls", 0),
    ("kubeconfig", 0),
    ("storage", 1),
    ("resources", 2),
    ("codec", 3),
    ("http", 4),
    ("env", 5),
];

/// The parser sees the real imports (an empty graph would pass vacuously),
/// and nothing breaks the layers. The checker's own rules are tested in the
/// `module-graph` crate.
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
        &[
            ("http", "resources"),
            ("resources", "storage"),
            ("codec", "resources"),
        ],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
