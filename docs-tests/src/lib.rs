//! The pages of `docs/`, the README and `envtest/README.md` as doc tests: every Rust code block in
//! them is compiled by `cargo test --doc` (CI runs it with the rest of the
//! workspace), and run unless it is marked `no_run` (blocks that need a
//! cluster). Blocks in other languages (`sh`, `yaml`, `text`) are skipped by
//! rustdoc.
//!
//! To add a page, add one item below. Diagrams go in `text` fences.

/// `README.md`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;

/// `docs/architecture.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/architecture.md")]
pub struct Architecture;

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

/// `docs/webhooks.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/webhooks.md")]
pub struct Webhooks;

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

/// `docs/macros.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/macros.md")]
pub struct Macros;

/// `docs/fleets.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/fleets.md")]
pub struct Fleets;

/// `envtest/README.md`.
#[cfg(doctest)]
#[doc = include_str!("../../envtest/README.md")]
pub struct EnvtestReadme;

/// `docs/protobuf.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/protobuf.md")]
pub struct Protobuf;

/// `docs/sharding.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/sharding.md")]
pub struct Sharding;
