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

/// `docs/kubernetes-versions.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/kubernetes-versions.md")]
pub struct KubernetesVersions;

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

/// `docs/introduction.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/introduction.md")]
pub struct Introduction;

/// `docs/metrics.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/metrics.md")]
pub struct Metrics;

/// `docs/rbac.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/rbac.md")]
pub struct Rbac;

/// `docs/cache.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/cache.md")]
pub struct Cache;

/// `docs/reference.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/reference.md")]
pub struct Reference;

/// `docs/container-image.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/container-image.md")]
pub struct ContainerImage;

/// `docs/troubleshooting.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/troubleshooting.md")]
pub struct Troubleshooting;

/// `docs/upgrading.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/upgrading.md")]
pub struct Upgrading;

/// `docs/glossary.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/glossary.md")]
pub struct Glossary;

#[cfg(test)]
mod links;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every piece of evidence `docs/comparison.md` cites (`path::test_fn`,
    /// or `…::test_fn` for another test of the file named just before)
    /// names a file of the repository that defines that function: a test
    /// renamed or removed turns this red until the table follows.
    #[test]
    fn comparison_cites_only_tests_that_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let page = std::fs::read_to_string(root.join("docs/comparison.md")).unwrap();
        let mut checked = 0;
        let mut missing = Vec::new();
        for line in page.lines().filter(|l| l.starts_with("- **")) {
            let mut file = String::new();
            for cited in line.split('`').skip(1).step_by(2) {
                let Some((path, name)) = cited.rsplit_once("::") else {
                    continue;
                };
                if path != "…" {
                    if !path.ends_with(".rs") || path.contains(' ') {
                        continue;
                    }
                    file = path.to_owned();
                }
                if file.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let source = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
                if !source.contains(&format!("fn {name}(")) {
                    missing.push(format!("{file}::{name}"));
                }
                checked += 1;
            }
        }
        assert!(
            checked > 50,
            "only {checked} citations found: did the format change?"
        );
        assert!(
            missing.is_empty(),
            "comparison.md cites tests that do not exist: {missing:#?}"
        );
    }
}
