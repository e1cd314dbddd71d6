//! `cargo xtask <task>`: the project's own tasks, run through the cargo
//! alias in `.cargo/config.toml`. Each task is a module with a clap `Args`
//! struct and a `run` function; add a task by adding a module and a variant.

mod bench;
mod ci;
mod manifests;
mod new;
mod scaffold_check;
mod stress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "informer-rs project tasks"
)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// The tasks.
#[derive(Debug, Subcommand)]
enum Task {
    /// Scaffold a controller project: a custom resource, its controller, tests, manifests, Dockerfile.
    New(new::Args),
    /// Write the CRD YAML of the workspace's derived types.
    Crd(manifests::Args),
    /// Write the RBAC YAML of the workspace's reconcilers.
    Rbac(manifests::Args),
    /// fmt, clippy -D warnings, then everything .ci/run runs (tests, doc tests, kubectl, scaffold).
    Ci(ci::Args),
    /// Scaffold a project into a temporary directory, build it, run its tests and demo, check its manifests.
    TestScaffold(scaffold_check::Args),
    /// Run every performance scenario next to kube-runtime and write docs/performance.md.
    Bench(bench::Args),
    /// Run the integration tests and the chaos suite while busy threads keep every core saturated.
    Stress(stress::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::New(args) => new::run(&args).map_err(|e| e.to_string()),
        Task::Crd(args) => manifests::run(manifests::What::Crd, &args).map_err(|e| e.to_string()),
        Task::Rbac(args) => manifests::run(manifests::What::Rbac, &args).map_err(|e| e.to_string()),
        Task::Ci(args) => ci::run(&args).map_err(|e| e.to_string()),
        Task::TestScaffold(args) => scaffold_check::run(&args).map_err(|e| e.to_string()),
        Task::Bench(args) => bench::run(&args),
        Task::Stress(args) => stress::run(&args).map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err}");
            ExitCode::FAILURE
        }
    }
}
