//! Integration tests for the derive macros: compile-fail cases (`ui`), the
//! attribute sets that must compile (`compiles`), checked-in CRDs
//! (`golden`), the generated types against envtest over real HTTP
//! (`envtest`, `informer`, the field rules in `rules`, k8s-openapi types and
//! nested rules in `pool`), a round-trip property (`props`), the layering of
//! the crate's own modules (`module_graph`), and the serde enum shapes a
//! spec may hold (`enums`).

// Helpers outside #[test] functions panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compiles;
mod enums;
mod envtest;
mod golden;
mod informer;
mod module_graph;
mod pool;
mod props;
mod rules;
mod types;
mod ui;
