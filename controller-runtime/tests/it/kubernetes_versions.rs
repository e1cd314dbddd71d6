//! The offered Kubernetes versions agree everywhere: every crate that picks
//! `k8s-openapi`'s version (directly or through controller-runtime) has the
//! same `v1_*` features with the same default, and the version matrix of
//! `docs/kubernetes-versions.md` lists exactly those, the default marked.
//! CI checks each listed version (`.ci/run` reads them from this crate's
//! `Cargo.toml`), so a version added to one crate and not the others, or
//! not to the page, fails here.

use std::collections::BTreeSet;
use std::path::Path;

/// The crates with `v1_*` features, by directory.
const CRATES: [&str; 6] = [
    "codec",
    "informer-core",
    "envtest",
    "controller-runtime",
    "examples",
    "framework-test",
];

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `v1_*` features of a `Cargo.toml` and the one its defaults enable.
fn features(manifest: &str) -> (BTreeSet<String>, Option<String>) {
    let mut in_features = false;
    let (mut offered, mut default) = (BTreeSet::new(), None);
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if !in_features {
            continue;
        }
        let Some((name, value)) = line.split_once(" = ") else {
            continue;
        };
        if name.starts_with("v1_") {
            offered.insert(name.to_string());
        } else if name == "default" {
            default = value
                .split('"')
                .find(|f| f.starts_with("v1_"))
                .map(str::to_string);
        }
    }
    (offered, default)
}

/// The rows of the page's matrix: feature and whether it is the default.
fn matrix(page: &str) -> Vec<(String, bool)> {
    let section = page
        .split("## The version matrix")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/kubernetes-versions.md has a \"The version matrix\" section");
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let feature = cells.get(1)?.strip_prefix("`v1_")?.strip_suffix('`')?;
            Some((format!("v1_{feature}"), cells.get(3) == Some(&"yes")))
        })
        .collect()
}

#[test]
fn every_crate_offers_the_same_versions_and_the_docs_list_them() {
    let (offered, default) = features(&read("controller-runtime/Cargo.toml"));
    assert!(offered.len() >= 2, "controller-runtime offers {offered:?}");
    let default = default.expect("controller-runtime enables a version by default");
    for krate in CRATES {
        let (theirs, their_default) = features(&read(&format!("{krate}/Cargo.toml")));
        assert_eq!(theirs, offered, "{krate}'s v1_* features");
        assert_eq!(
            their_default.as_ref(),
            Some(&default),
            "{krate}'s default version"
        );
    }
    let rows = matrix(&read("docs/kubernetes-versions.md"));
    let listed: BTreeSet<String> = rows.iter().map(|(f, _)| f.clone()).collect();
    assert_eq!(
        listed, offered,
        "the version matrix lists every offered version once"
    );
    assert_eq!(rows.len(), offered.len(), "no version listed twice");
    let marked: Vec<&str> = rows
        .iter()
        .filter(|(_, is_default)| *is_default)
        .map(|(f, _)| f.as_str())
        .collect();
    assert_eq!(marked, [default.as_str()], "the matrix marks the default");
}

#[test]
fn the_matrix_reader_sees_rows_and_the_default() {
    let page = "## The version matrix\n\n| feature | k | default | ci |\n| --- | --- | --- | --- |\n\
                | `v1_1` | 1.1 | | checked |\n| `v1_2` | 1.2 | yes | all |\n\n## Next\n| `v1_9` | | yes | |\n";
    assert_eq!(
        matrix(page),
        [("v1_1".to_string(), false), ("v1_2".to_string(), true)]
    );
    let (offered, default) = features(
        "[package]\nname = \"x\"\n\n[features]\ndefault = [\"v1_2\", \"tls\"]\nv1_1 = [\"a/v1_1\"]\nv1_2 = []\n\n[dependencies]\nv1_3 = \"1\"\n",
    );
    assert_eq!(
        offered,
        BTreeSet::from(["v1_1".to_string(), "v1_2".to_string()])
    );
    assert_eq!(default.as_deref(), Some("v1_2"));
}
