//! `cargo xtask <task>`: the project's own tasks, run through the cargo
//! alias in `.cargo/config.toml`. Each task is a module with a clap `Args`
//! struct and a `run` function; add a task by adding a module and a variant.

mod bench;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command line.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "informer-rs project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// The tasks.
#[derive(Debug, Subcommand)]
enum Task {
    /// Run every performance scenario next to kube-runtime and write docs/performance.md.
    Bench(bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Bench(args) => bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err}");
            ExitCode::FAILURE
        }
    }
}
