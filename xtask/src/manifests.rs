//! `cargo xtask crd` and `cargo xtask rbac`: the CRD and RBAC YAML of the
//! derived types and reconcilers, regenerated from the code rather than
//! edited by hand. They run the `manifests` binary of a package (the
//! workspace's examples by default; a scaffolded project has its own, run
//! with `cargo run --bin manifests`).

use std::path::PathBuf;
use std::process::Command;

use crate::new::workspace_root;

/// Errors of `cargo xtask crd|rbac`.
#[derive(Debug, thiserror::Error)]
pub enum ManifestsError {
    /// The manifests binary could not be started.
    #[error("cannot run cargo: {0}")]
    Spawn(#[source] std::io::Error),
    /// The manifests binary failed.
    #[error("`cargo run -p {package} --bin manifests` failed ({status})")]
    Failed {
        /// The package.
        package: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
}

/// Which manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// CustomResourceDefinitions.
    Crd,
    /// Roles, bindings and service accounts.
    Rbac,
}

/// `cargo xtask crd|rbac [--out DIR] [--package P]`
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Write the YAML files into this directory (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The package whose `manifests` binary to run.
    #[arg(long, default_value = "informer-examples")]
    pub package: String,
}

/// Runs `cargo xtask crd` or `cargo xtask rbac`.
pub fn run(what: What, args: &Args) -> Result<(), ManifestsError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args([
        "run",
        "--quiet",
        "-p",
        &args.package,
        "--bin",
        "manifests",
        "--",
        "--only",
        match what {
            What::Crd => "crd",
            What::Rbac => "rbac",
        },
    ]);
    match &args.out {
        // The binary runs in the workspace root: pass the directory as the
        // caller meant it.
        Some(out) => {
            let out = std::path::absolute(out).unwrap_or_else(|_| out.clone());
            cmd.arg("--out").arg(out);
        }
        None => {
            cmd.arg("--stdout");
        }
    }
    let status = cmd.status().map_err(ManifestsError::Spawn)?;
    if status.success() {
        Ok(())
    } else {
        Err(ManifestsError::Failed {
            package: args.package.clone(),
            status,
        })
    }
}
