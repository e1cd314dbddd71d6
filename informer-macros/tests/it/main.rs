//! Integration tests for the derive macros: compile-fail and compile-pass
//! cases (`ui`), checked-in CRDs (`golden`), the generated types against
//! envtest over real HTTP (`envtest`, `informer`, and the field rules in
//! `rules`) and a round-trip property (`props`).

// Helpers outside #[test] functions panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod envtest;
mod golden;
mod informer;
mod props;
mod rules;
mod types;
mod ui;
