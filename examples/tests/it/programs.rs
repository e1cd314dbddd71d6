//! Runs each example binary with no cluster chosen.

use std::path::PathBuf;
use std::process::Command;

/// A fresh, empty home directory, so `~/.kube/config` does not exist.
pub(crate) fn empty_home(program: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "informer-examples-{program}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// Runs `exe` with no cluster chosen and returns its standard output,
/// failing the test (with both outputs) when it does not exit successfully.
fn run_demo(program: &str, exe: &str) -> String {
    let home = empty_home(program);
    let output = Command::new(exe)
        .env_remove("KUBECONFIG")
        .env("HOME", &home)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap_or_else(|e| panic!("starting {exe}: {e}"));
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{program} failed with {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    assert!(
        stdout.starts_with(&format!(
            "{}http",
            informer_examples::cluster::DEMO_BANNER_PREFIX
        )),
        "{program} must say first which server it uses:\n{stdout}"
    );
    stdout
}

fn assert_lines(program: &str, stdout: &str, expected: &[&str]) {
    for line in expected {
        assert!(
            stdout.contains(line),
            "{program}: missing {line:?} in\n{stdout}"
        );
    }
}

#[test]
fn configmap_indexer_answers_from_the_index_as_objects_change() {
    let out = run_demo("configmap-indexer", env!("CARGO_BIN_EXE_configmap-indexer"));
    assert_lines(
        "configmap-indexer",
        &out,
        &[
            "    payments   search/refunds, shop/checkout",
            "  payments in namespace shop only: shop/checkout",
            "    payments   search/ranking, search/refunds, shop/checkout",
            "    catalog    shop/cart",
            "index followed every change",
        ],
    );
}

#[test]
fn sharded_controller_spreads_a_derived_controller_over_three_replicas() {
    let out = run_demo(
        "sharded-controller",
        env!("CARGO_BIN_EXE_sharded-controller"),
    );
    assert_lines(
        "sharded-controller",
        &out,
        &[
            "bound to the derived ClusterRole",
            "   not-a-job: no shard label (outside the replicas' selection)",
            "no request refused by RBAC; every job reconciled and cleaned up by its shard",
        ],
    );
    for replica in ["replica-a", "replica-b", "replica-c"] {
        assert!(
            out.contains(&format!("   {replica} holds job-"))
                && out.contains(&format!("   {replica} cleaned up: job-")),
            "{replica} holds no job:\n{out}"
        );
    }
}

#[test]
fn fleet_reconciles_in_each_member_cluster_as_it_comes_and_goes() {
    let out = run_demo("fleet", env!("CARGO_BIN_EXE_fleet"));
    assert_lines(
        "fleet",
        &out,
        &[
            "   ok: east greeted from east",
            "   ok: west greeted from west",
            "   north, not engaged yet, is untouched",
            "   ok: north greeted from north",
            "   ok: the fleet is east and north",
            "   east/default/app",
            "   north/default/app",
            "   west/default/app",
            "each cluster reconciled in its own cluster; shut down cleanly",
        ],
    );
}

#[test]
fn leader_election_moves_leadership_when_the_leader_stops() {
    let out = run_demo("leader-election", env!("CARGO_BIN_EXE_leader-election"));
    assert_lines(
        "leader-election",
        &out,
        &[
            "   replica-a leads",
            "   job-1 handled by replica-a",
            "lease default/leader-election-demo: holder=replica-a transitions=0",
            "   job-2 handled by replica-b",
            "lease default/leader-election-demo: holder=replica-b transitions=1",
            "leadership moved from replica-a to replica-b",
        ],
    );
}

#[test]
fn secret_syncer_copies_repairs_and_removes_copies() {
    let out = run_demo("secret-syncer", env!("CARGO_BIN_EXE_secret-syncer"));
    assert_lines(
        "secret-syncer",
        &out,
        &[
            "   ok: copies in team-a and team-b",
            "   ok: team-c gets a copy",
            "   ok: the copy is repaired",
            "   ok: team-b's copy is removed",
            "   ok: every copy is removed",
            "secrets synced; shut down cleanly",
        ],
    );
}

/// The programs are built without a test harness (`test = false` in
/// Cargo.toml): a `#[test]` written in one would never run. None has one,
/// and every program is listed, so a new one cannot slip past this check.
#[test]
fn programs_without_a_test_harness_hold_no_tests() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let untested: Vec<&str> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter(|entry| entry.contains("test = false"))
        .filter_map(|entry| {
            let line = entry.lines().find(|l| l.starts_with("name = "))?;
            Some(line.trim_start_matches("name = ").trim_matches('"'))
        })
        .collect();
    let mut programs: Vec<String> = std::fs::read_dir(dir.join("src/bin"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    programs.sort();
    let mut listed: Vec<String> = untested.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        listed, programs,
        "every program is listed with test = false"
    );
    for program in &programs {
        let source = std::fs::read_to_string(dir.join(format!("src/bin/{program}.rs"))).unwrap();
        for marker in ["#[test]", "#[tokio::test", "#[cfg(test)]"] {
            assert!(
                !source.contains(marker),
                "src/bin/{program}.rs holds {marker}, but its harness is off (test = false)"
            );
        }
    }
}
