//! The pages of `docs/` and the README as doc tests: every Rust code block in
//! them is compiled by `cargo test --doc` (CI runs it with the rest of the
//! workspace), and run unless it is marked `no_run` (blocks that need a
//! cluster). Blocks in other languages (`sh`, `yaml`, `text`) are skipped by
//! rustdoc.
//!
//! To add a page, add one item below. `docs/architecture.md` is not here:
//! its diagrams are in unlabelled fences, which rustdoc would compile as
//! Rust (label them `text` to include the page).

/// `README.md`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;

/// `docs/tutorial.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/tutorial.md")]
pub struct Tutorial;

/// `docs/operations.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/operations.md")]
pub struct Operations;

/// `docs/comparison.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/comparison.md")]
pub struct Comparison;

/// `docs/testing.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/testing.md")]
pub struct Testing;

/// `docs/performance.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/performance.md")]
pub struct Performance;

/// `docs/reliability.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/reliability.md")]
pub struct Reliability;
