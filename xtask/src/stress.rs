//! `cargo xtask stress`: the integration tests and the chaos suite, run
//! while busy threads keep every core saturated, to show that no test's
//! verdict depends on how fast the machine is.
//!
//! The test binaries are built first, without load. Then, for each of
//! `--runs` runs, one spinning thread per core (or `--threads`) is started,
//! the integration tests run (`cargo test -p <crate> --test it`, chaos
//! excluded), then the chaos suite (`cargo test -p controller-runtime --test
//! it -- chaos::` with `CHAOS_SEEDS`), and the load stops. The load also
//! stops by itself after `--max-load-secs`, whatever happens to this
//! process's children. Each run prints its passed and failed counts, its
//! duration and the failed tests; the full output of each run goes to
//! `target/stress/run-N.log`. The task fails when any run had a failure.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::new::workspace_root;

/// The crates with an integration-test binary (`tests/it`).
const CRATES: &[&str] = &[
    "informer-envtest",
    "informer-codec",
    "informer-core",
    "informer-macros",
    "controller-runtime",
    "informer-examples",
    "framework-test",
];

/// `cargo xtask stress [--runs N] [--package P].. [--chaos-seeds N] [-- FILTER..]`
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// How many consecutive runs.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Crates whose integration tests run (repeatable; default: every
    /// crate with a `tests/it` binary).
    #[arg(long = "package", short = 'p')]
    pub packages: Vec<String>,
    /// `CHAOS_SEEDS` for the chaos suite; 0 skips it.
    #[arg(long, default_value_t = 24)]
    pub chaos_seeds: u32,
    /// Busy threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The load stops by itself after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub max_load_secs: u64,
    /// Test name filters passed to the integration tests (as after `--`).
    #[arg(last = true)]
    pub filters: Vec<String>,
}

/// Errors of `cargo xtask stress`.
#[derive(Debug, thiserror::Error)]
pub enum StressError {
    /// A command could not be started or its log written.
    #[error("cannot run {what}: {source}")]
    Io {
        /// The command or file.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The test binaries did not build.
    #[error("building the tests failed: {0}")]
    Build(String),
    /// An argument names no crate with integration tests.
    #[error("{0:?} has no tests/it binary; one of {CRATES:?}")]
    UnknownPackage(String),
    /// Some run had failures (the counts are printed above).
    #[error("{failed} of {runs} runs under load had failures")]
    Failed {
        /// Runs with a failure.
        failed: u32,
        /// Runs.
        runs: u32,
    },
}

/// Passed and failed tests of one run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Tests that passed.
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Names of the failed tests (and of commands that failed without a
    /// test summary, such as a crash).
    pub failures: Vec<String>,
}

impl Counts {
    /// Adds the results in `output`, the output of one `cargo test`
    /// command that exited successfully or not (`ok`).
    pub fn add_output(&mut self, command: &str, output: &str, ok: bool) {
        let mut summaries = 0;
        for line in output.lines() {
            if let Some(rest) = line.strip_prefix("test result: ") {
                summaries += 1;
                self.passed += count_before(rest, " passed");
                self.failed += count_before(rest, " failed");
            } else if let Some(name) = line
                .strip_prefix("test ")
                .and_then(|l| l.strip_suffix(" ... FAILED"))
            {
                self.failures.push(name.to_string());
            }
        }
        if !ok && (summaries == 0 || self.failures.is_empty()) {
            // A crash or a timeout: count the command as one failure.
            self.failed += 1;
            self.failures
                .push(format!("{command} (exited without a test verdict)"));
        }
    }
}

/// The number just before `word` in a `test result:` line.
fn count_before(summary: &str, word: &str) -> u64 {
    summary
        .split(';')
        .find_map(|part| part.trim().strip_suffix(word.trim_start()))
        .and_then(|n| n.trim().rsplit(' ').next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Threads spinning until stopped or until their deadline.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(threads: usize, max: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let until = Instant::now() + max;
        let threads = (0..threads)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x: u64 = 1;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// One `cargo test` command of a run.
struct Step {
    package: String,
    filters: Vec<String>,
    chaos_seeds: Option<u32>,
}

impl Step {
    fn command(&self, root: &Path, no_run: bool) -> Command {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.current_dir(root)
            .args(["test", "-p", &self.package, "--test", "it"]);
        if no_run {
            cmd.arg("--no-run");
        } else {
            cmd.arg("--").args(&self.filters);
        }
        if let Some(seeds) = self.chaos_seeds {
            cmd.env("CHAOS_SEEDS", seeds.to_string());
        }
        cmd
    }

    fn describe(&self) -> String {
        let mut s = format!("cargo test -p {} --test it", self.package);
        if !self.filters.is_empty() {
            let _ = write!(s, " -- {}", self.filters.join(" "));
        }
        if let Some(seeds) = self.chaos_seeds {
            s = format!("CHAOS_SEEDS={seeds} {s}");
        }
        s
    }
}

fn steps(args: &Args) -> Result<Vec<Step>, StressError> {
    let packages: Vec<String> = if args.packages.is_empty() {
        CRATES.iter().map(|c| c.to_string()).collect()
    } else {
        args.packages.clone()
    };
    let mut steps = Vec::new();
    for package in packages {
        if !CRATES.contains(&package.as_str()) {
            return Err(StressError::UnknownPackage(package));
        }
        let mut filters = args.filters.clone();
        if package == "controller-runtime" {
            // The chaos suite is its own step, with its seeds.
            filters.extend(["--skip".to_string(), "chaos::".to_string()]);
        }
        steps.push(Step {
            package,
            filters,
            chaos_seeds: None,
        });
    }
    if args.chaos_seeds > 0 {
        steps.push(Step {
            package: "controller-runtime".into(),
            filters: vec!["chaos::".into()],
            chaos_seeds: Some(args.chaos_seeds),
        });
    }
    Ok(steps)
}

/// Runs the task.
pub fn run(args: &Args) -> Result<(), StressError> {
    let root = workspace_root();
    let steps = steps(args)?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
    });
    let logs = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("stress");
    std::fs::create_dir_all(&logs).map_err(|source| StressError::Io {
        what: logs.display().to_string(),
        source,
    })?;
    println!("==> building the tests (no load)");
    for step in &steps {
        let out = step
            .command(&root, true)
            .output()
            .map_err(|source| StressError::Io {
                what: step.describe(),
                source,
            })?;
        if !out.status.success() {
            return Err(StressError::Build(
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ));
        }
    }
    let mut failed_runs = 0;
    for run in 1..=args.runs {
        println!("==> run {run}/{}: {threads} busy threads", args.runs);
        let load = Load::start(threads, Duration::from_secs(args.max_load_secs));
        let started = Instant::now();
        let mut counts = Counts::default();
        let mut log = String::new();
        for step in &steps {
            let what = step.describe();
            let out = step.command(&root, false).output();
            let out = match out {
                Ok(out) => out,
                Err(source) => {
                    load.stop();
                    return Err(StressError::Io { what, source });
                }
            };
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            counts.add_output(&what, &text, out.status.success());
            let _ = writeln!(log, "==> {what}\n{text}");
        }
        load.stop();
        let took = started.elapsed();
        let file = logs.join(format!("run-{run}.log"));
        std::fs::write(&file, log).map_err(|source| StressError::Io {
            what: file.display().to_string(),
            source,
        })?;
        println!(
            "run {run}: {} passed, {} failed in {:.1}s (log: {})",
            counts.passed,
            counts.failed,
            took.as_secs_f64(),
            file.display()
        );
        for name in &counts.failures {
            println!("  FAILED {name}");
        }
        if counts.failed > 0 {
            failed_runs += 1;
        }
    }
    if failed_runs > 0 {
        return Err(StressError::Failed {
            failed: failed_runs,
            runs: args.runs,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is a workspace package with a `tests/it` binary (a
    /// directory name in place of the package's name failed every run).
    #[test]
    fn every_crate_is_a_package_with_an_it_binary() {
        let root = workspace_root();
        let members: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|dir| {
                let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
                let name = manifest
                    .lines()
                    .find_map(|l| l.strip_prefix("name = \""))?
                    .trim_end_matches('"')
                    .to_string();
                Some((name, dir))
            })
            .collect();
        for krate in CRATES {
            let dir = members
                .iter()
                .find(|(name, _)| name == krate)
                .map(|(_, dir)| dir)
                .unwrap_or_else(|| panic!("{krate} is no workspace package"));
            assert!(
                dir.join("tests/it/main.rs").is_file(),
                "{krate} has no tests/it/main.rs"
            );
        }
    }

    #[test]
    fn counts_are_read_from_the_test_summaries() {
        let mut counts = Counts::default();
        let out = "test a::b ... ok\ntest a::c ... FAILED\n\
                   test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 3 filtered out; finished in 1.00s\n";
        counts.add_output("cargo test", out, false);
        assert_eq!(
            counts,
            Counts {
                passed: 1,
                failed: 1,
                failures: vec!["a::c".into()],
            }
        );
        counts.add_output(
            "cargo test",
            "test result: ok. 7 passed; 0 failed; 0 ignored\n",
            true,
        );
        assert_eq!((counts.passed, counts.failed), (8, 1));
    }

    #[test]
    fn a_crash_without_a_verdict_counts_as_a_failure() {
        let mut counts = Counts::default();
        counts.add_output(
            "cargo test -p x",
            "error: process didn't exit successfully\n",
            false,
        );
        assert_eq!(counts.failed, 1);
        assert!(counts.failures[0].contains("without a test verdict"));
    }

    #[test]
    fn chaos_is_its_own_step_and_unknown_crates_are_refused() {
        let args = Args {
            runs: 1,
            packages: vec!["controller-runtime".into()],
            chaos_seeds: 4,
            threads: None,
            max_load_secs: 1,
            filters: vec!["shutdown::".into()],
        };
        let steps = steps(&args).unwrap();
        let described: Vec<String> = steps.iter().map(Step::describe).collect();
        assert_eq!(
            described,
            [
                "cargo test -p controller-runtime --test it -- shutdown:: --skip chaos::",
                "CHAOS_SEEDS=4 cargo test -p controller-runtime --test it -- chaos::",
            ]
        );
        let bad = Args {
            packages: vec!["nope".into()],
            ..args
        };
        assert!(matches!(steps_err(&bad), Some(StressError::UnknownPackage(p)) if p == "nope"));
    }

    fn steps_err(args: &Args) -> Option<StressError> {
        steps(args).err()
    }

    #[test]
    fn the_load_stops_by_itself() {
        let load = Load::start(1, Duration::from_millis(10));
        for t in load.threads {
            t.join().unwrap();
        }
    }
}
