//! `cargo xtask ci`: the checks CI runs, in one command. First the lints
//! (`cargo fmt --check`, `cargo clippy --workspace --all-targets -D
//! warnings`), then `.ci/run`, which installs kubectl and runs every test
//! binary, the doc tests, the kubectl script and the scaffold check, and ends
//! with one `ci: N passed, N failed` line.

use std::path::PathBuf;
use std::process::Command;

use crate::new::workspace_root;

/// Errors of `cargo xtask ci`.
#[derive(Debug, thiserror::Error)]
pub enum CiError {
    /// A step could not be started.
    #[error("cannot run {step}: {source}")]
    Spawn {
        /// The step.
        step: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A step failed.
    #[error("{step} failed ({status})")]
    Failed {
        /// The step.
        step: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
}

/// `cargo xtask ci [--no-lint]`
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Skip fmt and clippy.
    #[arg(long)]
    pub no_lint: bool,
}

/// Runs `program args` in the workspace root, failing on a non-zero exit.
pub fn step(program: &str, args: &[&str], dir: &PathBuf) -> Result<(), CiError> {
    let name = format!("{program} {}", args.join(" "));
    println!("==> {name}");
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .status()
        .map_err(|source| CiError::Spawn {
            step: name.clone(),
            source,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(CiError::Failed { step: name, status })
    }
}

/// Runs `cargo xtask ci`.
pub fn run(args: &Args) -> Result<(), CiError> {
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if !args.no_lint {
        step(&cargo, &["fmt", "--all", "--", "--check"], &root)?;
        step(
            &cargo,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            &root,
        )?;
    }
    step("bash", &[".ci/run"], &root)
}
