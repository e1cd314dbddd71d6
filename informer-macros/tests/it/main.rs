//! Integration tests for the derive macros: the generated types against
//! envtest over real HTTP (`envtest`).

// Helpers outside #[test] functions panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod envtest;
mod types;
