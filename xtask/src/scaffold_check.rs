//! `cargo xtask test-scaffold`: what a user does after `cargo xtask new`,
//! checked end to end. It scaffolds a project with `--webhooks` into a
//! temporary directory with a path dependency on this checkout, runs its
//! tests (which reconcile against envtest, call its webhooks through
//! envtest's admission and conversion, and install its generated manifests
//! into envtest), runs its demo on the embedded API server, checks that the
//! build without the `demo` feature (the release image's) builds and has no
//! envtest in its dependencies, writes its `deploy/` with the `manifests`
//! binary (for every namespace, and for two namespaces `team-a,team-b`,
//! with a bad name refused) and checks that every file
//! parses as YAML and holds the expected objects.
//!
//! One project, with webhooks: the templates without them are covered by
//! xtask's unit tests (every variant renders), and `--no-webhooks` checks
//! that variant end to end.
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
    /// Scaffold without `--webhooks`.
    #[arg(long)]
    pub no_webhooks: bool,
    /// Depend on the framework at this checkout (default: this checkout).
    #[arg(long)]
    pub framework_path: Option<PathBuf>,
}

/// A kubeconfig whose only cluster refuses every connection (nothing
/// listens on port 1).
const UNREACHABLE_KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: unreachable
  context:
    cluster: unreachable
    user: nobody
current-context: unreachable
users:
- name: nobody
  user:
    token: not-a-token
";

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

fn cargo_output(dir: &Path, target: &Path, args: &[&str]) -> Result<String, CheckError> {
    let program = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let command = format!("cargo {}", args.join(" "));
    println!("==> {command}");
    let output = Command::new(&program)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .map_err(|source| CheckError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(CheckError::Failed {
            command,
            dir: dir.to_path_buf(),
            status: output.status,
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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
    Ok(objects_in(file)?
        .into_iter()
        .map(|(kind, _, _)| kind)
        .collect())
}

/// Parses every YAML document of `file` and returns their kind, name and
/// namespace (empty when cluster-scoped).
pub fn objects_in(file: &Path) -> Result<Vec<(String, String, String)>, CheckError> {
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
                let namespace = doc["metadata"]["namespace"].as_str().unwrap_or_default();
                Ok((kind.to_string(), name.to_string(), namespace.to_string()))
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
    let mut project = Project::new(
        "demo",
        "demo.example.com",
        "v1",
        "Widget",
        !args.cluster,
        Framework::Path(framework.clone()),
    )?;
    let webhooks = !args.no_webhooks;
    if webhooks {
        project = project.with_webhooks()?;
    }
    new::write(&project, &dir, true)?;
    std::fs::copy(framework.join("Cargo.lock"), dir.join("Cargo.lock")).map_err(|e| {
        CheckError::Manifest {
            file: dir.join("Cargo.lock"),
            problem: format!("cannot copy the workspace lock file: {e}"),
        }
    })?;
    pass(&format!(
        "cargo xtask new demo{} wrote {}",
        if webhooks { " --webhooks" } else { "" },
        dir.display()
    ));

    let result = check(&dir, &target, webhooks, !args.cluster);
    if args.keep || result.is_err() {
        println!("project kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn check(dir: &Path, target: &Path, webhooks: bool, namespaced: bool) -> Result<(), CheckError> {
    cargo(dir, target, &["test"])?;
    pass(if webhooks {
        "cargo test (reconcile, webhooks and manifests against envtest)"
    } else {
        "cargo test (reconcile and manifests against envtest)"
    });

    // The release image's build: without `demo`, so without envtest.
    cargo(
        dir,
        target,
        &["build", "--no-default-features", "--bin", "demo"],
    )?;
    let tree = cargo_output(
        dir,
        target,
        &[
            "tree",
            "--no-default-features",
            "--edges",
            "normal,build",
            "--prefix",
            "none",
        ],
    )?;
    if let Some(line) = tree.lines().find(|l| l.starts_with("envtest ")) {
        return Err(CheckError::Manifest {
            file: dir.join("Cargo.toml"),
            problem: format!("without the demo feature the binary still depends on {line}"),
        });
    }
    pass("cargo build --no-default-features (no envtest in the controller binary)");

    // The demo, as `cargo run` runs it with no cluster chosen, on a
    // machine whose ~/.kube/config and KUBECONFIG name a cluster: a server
    // that refuses every connection, so a demo that used it would fail. The
    // binary is run directly, since cargo itself needs the real home.
    cargo(dir, target, &["build", "--bins"])?;
    let home = dir.join("home");
    let kube = home.join(".kube");
    let kubeconfig = kube.join("config");
    std::fs::create_dir_all(&kube)
        .and_then(|()| std::fs::write(&kubeconfig, UNREACHABLE_KUBECONFIG))
        .map_err(|e| CheckError::Manifest {
            file: kubeconfig.clone(),
            problem: format!("cannot write: {e}"),
        })?;
    let mut demo = Command::new(target.join("debug").join("demo"));
    demo.current_dir(dir)
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &home);
    run_command(demo, "demo (what cargo run runs)".into(), dir)?;
    pass("cargo run (the demo on the embedded API server, the kubeconfig's cluster untouched)");

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
    let mut files = vec!["crd.yaml", "rbac.yaml", "manager.yaml"];
    let mut expected = vec![
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Namespace",
        "Deployment",
    ];
    if webhooks {
        files.push("webhooks.yaml");
        expected.extend([
            "Service",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ]);
    }
    let deploy = dir.join("deploy");
    let kinds = kinds_of(&deploy, &files)?;
    expect_kinds(&deploy, &kinds, &expected)?;
    pass(&format!("deploy/ holds {}", expected.join(", ")));

    // Confined to two namespaces: the controller's rules become a Role in
    // each (a namespaced kind), and the Deployment watches both.
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
            "deploy-teams",
            "--watch-namespace",
            "team-a, team-b",
        ],
    )?;
    let rbac = dir.join("deploy-teams").join("rbac.yaml");
    let roles = objects_in(&rbac)?;
    let controller = |kind: &str, namespace: &str| {
        roles
            .iter()
            .any(|(k, name, ns)| k == kind && name == "demo-controller" && ns == namespace)
    };
    let in_both = ["team-a", "team-b"]
        .iter()
        .all(|ns| controller("Role", ns) && controller("RoleBinding", ns));
    if namespaced && (!in_both || controller("ClusterRole", "")) {
        return Err(CheckError::Manifest {
            file: rbac,
            problem: format!(
                "--watch-namespace team-a,team-b: expected the controller's Role and RoleBinding in team-a and in team-b and no ClusterRole, got {roles:?}"
            ),
        });
    }
    let manager = dir.join("deploy-teams").join("manager.yaml");
    let text = std::fs::read_to_string(&manager).map_err(|e| CheckError::Manifest {
        file: manager.clone(),
        problem: format!("cannot read: {e}"),
    })?;
    if !text.contains("WATCH_NAMESPACE") || !text.contains("team-a,team-b") {
        return Err(CheckError::Manifest {
            file: manager,
            problem: "--watch-namespace team-a,team-b: the Deployment does not set WATCH_NAMESPACE=team-a,team-b".into(),
        });
    }
    pass(
        "manifests --watch-namespace team-a,team-b: a Role in each, WATCH_NAMESPACE=team-a,team-b",
    );
    // A name that is not a namespace name is refused.
    let refused = cargo(
        dir,
        target,
        &[
            "run",
            "--quiet",
            "--bin",
            "manifests",
            "--",
            "--stdout",
            "--watch-namespace",
            "team-a,Team_B",
        ],
    );
    if refused.is_ok() {
        return Err(CheckError::Manifest {
            file: dir.join("src/bin/manifests.rs"),
            problem: "--watch-namespace team-a,Team_B was accepted".into(),
        });
    }
    pass("manifests --watch-namespace team-a,Team_B: refused");
    Ok(())
}

fn kinds_of(deploy: &Path, files: &[&str]) -> Result<BTreeSet<String>, CheckError> {
    let mut kinds = BTreeSet::new();
    for file in files {
        kinds.extend(kinds_in(&deploy.join(file))?);
        pass(&format!("deploy/{file} parses"));
    }
    Ok(kinds)
}

fn expect_kinds(
    deploy: &Path,
    kinds: &BTreeSet<String>,
    expected: &[&str],
) -> Result<(), CheckError> {
    match expected.iter().find(|k| !kinds.contains(**k)) {
        Some(missing) => Err(CheckError::Manifest {
            file: deploy.to_path_buf(),
            problem: format!("no {missing} among {kinds:?}"),
        }),
        None => Ok(()),
    }
}
