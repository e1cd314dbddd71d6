//! The crate's layering, checked from its source: `informer-core/src` is
//! read, every `crate::...` and `super::...` path outside comments and
//! string literals is resolved to the module it names, and the graph of
//! top-level modules must point only down the layers and have no circle;
//! inside each module, its submodules must not form a circle either.
//!
//! The layers follow the data flow (see `docs/architecture.md`): keys,
//! selectors and metrics hooks <- store, list-watch and the handler trait
//! <- delta FIFO, lister and processor <- reflector <- shared informer <-
//! factory. Layer-0 modules may import each other (without a circle).

use std::path::Path;

use module_graph::{Layers, check};

/// Each top-level module and its layer; a module may import only modules of
/// a lower layer, except that layer-0 modules may import each other
/// (without a circle). A listed module that does not exist is fine.
const LAYERS: &[(&str, u8)] = &[
    // 0. Leaf vocabulary: object keys, selectors, metrics hooks.
    ("key", 0),
    ("metrics", 0),
    ("selector", 0),
    // 1. The indexer, the API reader, what an informer calls.
    ("handler", 1),
    ("list_watch", 1),
    ("store", 1),
    // 2. The queue between reflector and informer, the typed reads, fan-out.
    ("delta_fifo", 2),
    ("lister", 2),
    ("processor", 2),
    // 3. List + watch into the FIFO.
    ("reflector", 3),
    // 4. FIFO -> indexer + handlers.
    ("shared_informer", 4),
    // 5. One informer per kind, shared.
    ("factory", 5),
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
            ("shared_informer", "processor"),
            ("processor", "handler"),
            ("reflector", "delta_fifo"),
            ("factory", "shared_informer"),
        ],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
