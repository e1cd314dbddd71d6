//! The crate's layering, checked from its source: `controller-runtime/src`
//! is read, every `crate::...` and `super::...` path outside comments and
//! string literals is resolved to the module it names, and the graph of
//! top-level modules must point only down the layers and have no circle;
//! inside each module, its submodules must not form a circle either.
//!
//! The layers (see `docs/architecture.md`): vocabulary <- building blocks
//! <- cache and metrics registry <- cluster, typed reconcile <- manager <- controller
//! <- sharding <- derive support. Vocabulary modules (layer 0) may import each other
//! (without a circle); every other module only imports lower layers.

use std::path::Path;

use module_graph::{Layers, check};

/// Each top-level module and its layer; a module may import only modules of
/// a lower layer, except that vocabulary modules (layer 0) may import each
/// other (without a circle). A module listed here that does not exist (yet)
/// is fine: `conditions`, `webhook` and `sharding` have reserved slots
/// (`webhook` and `sharding` are optional features).
const LAYERS: &[(&str, u8)] = &[
    // 0. Vocabulary: what every layer speaks.
    ("action", 0),
    ("error", 0),
    ("object", 0),
    ("request", 0),
    ("terminal", 0),
    // 1. Building blocks, independent of each other.
    ("client", 1),
    ("conditions", 1),
    ("crd", 1),
    ("events", 1),
    ("finalizer", 1),
    ("handler", 1),
    ("healthz", 1),
    ("leaderelection", 1),
    ("manifests", 1),
    ("predicate", 1),
    ("rbac", 1),
    ("tls", 1),
    ("workqueue", 1),
    // 2. The cache and the metrics registry.
    ("cache", 2),
    ("metrics", 2),
    // 3. A cluster as a value (client, informers, cache, event recorder),
    // the typed reconcile (built from cache + client + event recorder),
    // and the webhook server (handlers, HTTPS, certificates) the manager runs.
    ("cluster", 3),
    ("reconcile", 3),
    ("webhook", 3),
    // 4. The manager (runnables, servers, shutdown); never the controller.
    ("manager", 4),
    // 5. The controller (builder, sources, workers, outcome and its metrics).
    ("controller", 5),
    // 6. Controllers spread over replicas (builds on the controller).
    ("sharding", 6),
    // 7. What the derives and `use prelude::*` reach.
    ("macro_support", 7),
    ("prelude", 7),
    // Doc-test-only compile checks of the public API; they import nothing.
    ("visibility", 7),
];

/// Edges inside one module (parent, from, to) that close a circle there and
/// are tolerated for now, in modules still being built (none at present).
/// Any other circle inside a module fails.
const TOLERATED_INNER_EDGES: &[(&str, &str, &str)] = &[];

/// The parser sees the real imports (an empty graph would pass vacuously),
/// and nothing breaks the layers. The checker's own rules are tested in the
/// `module-graph` crate.
#[test]
fn layers_point_down_and_no_module_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules = Layers {
        layers: LAYERS,
        tolerated_inner: TOLERATED_INNER_EDGES,
    };
    let problems = check(
        &src,
        &rules,
        &[
            ("controller", "manager"),
            ("manager", "cache"),
            ("manager", "cluster"),
            ("reconcile", "cache"),
            ("cache", "object"),
            ("handler", "request"),
            ("terminal", "error"),
        ],
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
