//! `cargo xtask test-scaffold`: what a user does after `cargo xtask new`,
//! checked end to end. It scaffolds a project into a temporary directory with
//! a path dependency on this checkout, runs its tests (which reconcile
//! against envtest and install its generated manifests into envtest), runs
//! its demo on the embedded API server, writes its `deploy/` with the
//! `manifests` binary and checks that every file parses as YAML and holds the
//! expected objects.
//!
//! The project builds into this workspace's target directory (or
//! `CARGO_TARGET_DIR`), so dependencies already built for the workspace are
//! reused. Each passed check prints `ok - ...`, which `.ci/run` counts with
//! the test results (a failure ends the run with an error).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::new::{self, Framework, NewError, Project};

/// Errors of the scaffold check.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Scaffolding failed.
    #[error("scaffolding: {0}")]
    New(#[from] NewError),
    /// A command could not be started.
    #[error("cannot run {command}: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A command failed.
    #[error("{command} failed in {dir} ({status})")]
    Failed {
        /// The command.
        command: String,
        /// Where it ran.
        dir: PathBuf,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// A generated manifest is wrong.
    #[error("{file}: {problem}")]
    Manifest {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        problem: String,
    },
}

/// `cargo xtask test-scaffold [--dir DIR] [--keep] [--cluster]`
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Scaffold here instead of a new temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the project afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Scaffold a cluster-scoped kind instead of a namespaced one.
    #[arg(long)]
    pub cluster: bool,
    /// Depend on the framework at this checkout (default: this checkout).
    #[arg(long)]
    pub framework_path: Option<PathBuf>,
}

fn pass(what: &str) {
    println!("ok - scaffold: {what}");
}

fn cargo(dir: &Path, target: &Path, args: &[&str]) -> Result<(), CheckError> {
    let program = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&program);
    cmd.args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target);
    run_command(cmd, format!("cargo {}", args.join(" ")), dir)
}

fn run_command(mut cmd: Command, command: String, dir: &Path) -> Result<(), CheckError> {
    println!("==> {command}");
    let status = cmd.status().map_err(|source| CheckError::Spawn {
        command: command.clone(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(CheckError::Failed {
            command,
            dir: dir.to_path_buf(),
            status,
        })
    }
}

/// Parses every YAML document of `file` and returns their kinds.
pub fn kinds_in(file: &Path) -> Result<Vec<String>, CheckError> {
    let problem = |problem: String| CheckError::Manifest {
        file: file.to_path_buf(),
        problem,
    };
    let text = std::fs::read_to_string(file).map_err(|e| problem(format!("cannot read: {e}")))?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_str_multiple::<serde_json::Value, Vec<_>>(&text)
            .map_err(|e| problem(format!("not YAML: {e}")))?;
    if docs.is_empty() {
        return Err(problem("no YAML documents".into()));
    }
    docs.iter()
        .map(|doc| {
            let kind = doc["kind"].as_str().unwrap_or_default();
            let name = doc["metadata"]["name"].as_str().unwrap_or_default();
            if kind.is_empty() || name.is_empty() || doc["apiVersion"].as_str().is_none() {
                Err(problem(format!(
                    "a document without apiVersion, kind or metadata.name: {doc}"
                )))
            } else {
                Ok(kind.to_string())
            }
        })
        .collect()
}

/// Runs the check.
pub fn run(args: &Args) -> Result<(), CheckError> {
    let root = new::workspace_root();
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("informer-scaffold-check-{}", std::process::id()))
    });
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target = std::path::absolute(&target).unwrap_or(target);

    let framework = match &args.framework_path {
        Some(path) => std::path::absolute(path).unwrap_or_else(|_| path.clone()),
        None => root.clone(),
    };
    let project = Project::new(
        "demo",
        "demo.example.com",
        "v1",
        "Widget",
        !args.cluster,
        Framework::Path(framework.clone()),
    )?;
    new::write(&project, &dir, true)?;
    std::fs::copy(framework.join("Cargo.lock"), dir.join("Cargo.lock")).map_err(|e| {
        CheckError::Manifest {
            file: dir.join("Cargo.lock"),
            problem: format!("cannot copy the workspace lock file: {e}"),
        }
    })?;
    pass(&format!("cargo xtask new demo wrote {}", dir.display()));

    let result = check(&dir, &target);
    if args.keep || result.is_err() {
        println!("project kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn check(dir: &Path, target: &Path) -> Result<(), CheckError> {
    cargo(dir, target, &["test"])?;
    pass("cargo test (reconcile and manifests against envtest)");

    // The demo, as `cargo run` runs it with no cluster configured: no
    // KUBECONFIG and a home without ~/.kube/config. The binary is run
    // directly, since cargo itself needs the real home.
    cargo(dir, target, &["build", "--bins"])?;
    let home = dir.join("empty-home");
    std::fs::create_dir_all(&home).map_err(|e| CheckError::Manifest {
        file: home.clone(),
        problem: format!("cannot create: {e}"),
    })?;
    let mut demo = Command::new(target.join("debug").join("demo"));
    demo.current_dir(dir)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &home);
    run_command(demo, "demo (what cargo run runs)".into(), dir)?;
    pass("cargo run (the demo on the embedded API server)");

    cargo(
        dir,
        target,
        &[
            "run",
            "--quiet",
            "--bin",
            "manifests",
            "--",
            "--out",
            "deploy",
        ],
    )?;
    let mut kinds = BTreeSet::new();
    for file in ["crd.yaml", "rbac.yaml", "manager.yaml"] {
        let path = dir.join("deploy").join(file);
        kinds.extend(kinds_in(&path)?);
        pass(&format!("deploy/{file} parses"));
    }
    for expected in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Namespace",
        "Deployment",
    ] {
        if !kinds.contains(expected) {
            return Err(CheckError::Manifest {
                file: dir.join("deploy"),
                problem: format!("no {expected} among {kinds:?}"),
            });
        }
    }
    pass("deploy/ holds the CRD, RBAC, ServiceAccount, Namespace and Deployment");
    Ok(())
}
