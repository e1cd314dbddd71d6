//! `cargo xtask bench [--quick]`: builds `envtest-server` and the
//! `informer-bench` program, starts one server process, runs every scenario
//! against it (informer-rs and kube-runtime alternating), then writes the
//! report: `docs/performance.md` and one SVG plot per scenario.
//!
//! `--only a,b --merge docs/performance.json` measures some scenarios
//! again and puts their rows in place of the earlier session's, the report
//! naming the later run.
//!
//! `--quick` uses small sizes and two runs, builds with the dev profile
//! (CI has those artifacts already) and writes its report under
//! `target/bench-quick/` instead of `docs/`: it proves the harness and every
//! scenario still work, and fails only if something crashes, never on timing.

mod plot;
mod report;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Small sizes, two runs, dev build, report under target/bench-quick.
    #[arg(long)]
    quick: bool,
    /// Runs per measurement (default 5; 2 with --quick).
    #[arg(long)]
    runs: Option<usize>,
    /// Only these scenarios (comma-separated: workqueue, indexer,
    /// controller, watch, fanout, sync, protobuf, scope, relist, webhook, sharding,
    /// fleet; sharding-recovery: only the sharding scenario's kill recovery,
    /// whose records must not be merged, as they replace every sharding row).
    #[arg(long)]
    only: Option<String>,
    /// Build with the release profile even with --quick.
    #[arg(long)]
    release: bool,
    /// With --quick: run the dev binaries already in the target directory
    /// instead of building them (`cargo test --workspace` builds both, with
    /// the workspace's features; a build of the two packages alone resolves
    /// other features and builds the framework again). CI uses it.
    #[arg(long, requires = "quick", conflicts_with = "release")]
    prebuilt: bool,
    /// Where to write the report (default docs/, or target/bench-quick with --quick).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Only write the report again from this earlier session's JSON (after
    /// editing the prose templates); measures nothing.
    #[arg(long)]
    render: Option<PathBuf>,
    /// With --only: merge this run's records into this earlier session's
    /// JSON (replacing the rows of the scenarios run, the report naming the
    /// later run) and write the report from it.
    #[arg(long, requires = "only")]
    merge: Option<PathBuf>,
}

/// Kills the server process when dropped, so no exit path leaves it running.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the task.
pub fn run(args: &Args) -> Result<(), String> {
    let root = workspace_root()?;
    let release = args.release || !args.quick;
    let profile_dir = if release { "release" } else { "debug" };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let out_dir = args.out_dir.clone().unwrap_or_else(|| {
        if args.quick {
            target.join("bench-quick")
        } else {
            root.join("docs")
        }
    });

    if let Some(json) = &args.render {
        return render(json, &out_dir, release);
    }

    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build.current_dir(&root).args([
        "build",
        "-p",
        "informer-envtest",
        "--bin",
        "envtest-server",
        "-p",
        "informer-bench",
        "--bin",
        "informer-bench",
    ]);
    if release {
        build.arg("--release");
    }
    let bin = target.join(profile_dir);
    if args.prebuilt {
        for program in ["envtest-server", "informer-bench"] {
            if !bin.join(program).is_file() {
                return Err(format!(
                    "--prebuilt: {} is not built (run `cargo test --workspace --all-targets` first)",
                    bin.join(program).display()
                ));
            }
        }
    } else {
        status(build, "building the bench")?;
    }

    let mut server = Server(
        Command::new(bin.join("envtest-server"))
            .args(["--port", "0", "--history-window", "200000", "--admin"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start envtest-server: {e}"))?,
    );
    let url = server_url(&mut server.0)?;
    eprintln!("xtask bench: envtest-server at {url}");

    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let json = match &args.merge {
        Some(_) => target.join("bench-merge.json"),
        None => out_dir.join("performance.json"),
    };
    let mut bench = Command::new(bin.join("informer-bench"));
    bench
        .args(["--server", &url, "--server-bin"])
        .arg(bin.join("envtest-server"))
        .arg("--out")
        .arg(&json);
    if args.quick {
        bench.arg("--quick");
    }
    if let Some(runs) = args.runs {
        bench.args(["--runs", &runs.to_string()]);
    }
    if let Some(only) = &args.only {
        bench.args(["--only", only]);
    }
    if let Some(commit) = commit(&root) {
        bench.args(["--commit", &commit]);
    }
    status(bench, "the bench")?;
    drop(server);
    if let Some(into) = &args.merge {
        let mut session = read(into)?;
        session.merge(read(&json)?)?;
        let text = serde_json::to_string_pretty(&session)
            .map_err(|e| format!("cannot write the merged session: {e}"))?;
        std::fs::write(into, text).map_err(|e| format!("cannot write {}: {e}", into.display()))?;
        eprintln!("xtask bench: merged into {}", into.display());
        return render(into, &out_dir, release);
    }
    render(&json, &out_dir, release)
}

/// The session in `json`.
fn read(json: &Path) -> Result<report::Session, String> {
    let text = std::fs::read_to_string(json)
        .map_err(|e| format!("cannot read {}: {e}", json.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a bench result: {e}", json.display()))
}

/// Writes the report of the session in `json` into `out_dir`.
fn render(json: &Path, out_dir: &Path, release: bool) -> Result<(), String> {
    let session = read(json)?;
    let written = report::write(&session, out_dir, release, &plot::scenario)?;
    eprintln!("xtask bench: wrote {}", written.display());
    Ok(())
}

/// The commit checked out at `root` (short hash, `+dirty` when tracked
/// files differ from it), or `None` outside a git work tree.
fn commit(root: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let hash = git(&["rev-parse", "--short=12", "HEAD"])?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|changes| !changes.is_empty());
    Some(if dirty { format!("{hash}+dirty") } else { hash })
}

/// Runs `cmd`, failing with `what` unless it exits successfully.
fn status(mut cmd: Command, what: &str) -> Result<(), String> {
    let st = cmd
        .status()
        .map_err(|e| format!("{what}: cannot start: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{what} failed: {st}"))
    }
}

/// Reads the server's stdout until it names its URL; a thread drains the rest.
fn server_url(child: &mut Child) -> Result<String, String> {
    let stdout = child.stdout.take().ok_or("envtest-server has no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.map_err(|e| format!("reading envtest-server output: {e}"))?;
        if let Some(url) = line.strip_prefix("envtest-server listening on ") {
            let url = url.trim().to_owned();
            std::thread::spawn(move || lines.for_each(drop));
            return Ok(url);
        }
    }
    Err("envtest-server exited before it was listening".into())
}

/// The workspace root: the parent of this crate's directory.
fn workspace_root() -> Result<PathBuf, String> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "xtask has no parent directory".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_report_is_what_its_json_renders() {
        let root = workspace_root().expect("a workspace");
        let dir = std::env::temp_dir().join(format!("informer-perf-render-{}", std::process::id()));
        let rendered = render(&root.join("docs/performance.json"), &dir, true);
        let got = std::fs::read_to_string(dir.join("performance.md"));
        let _ = std::fs::remove_dir_all(&dir);
        rendered.expect("docs/performance.json renders");
        let want = std::fs::read_to_string(root.join("docs/performance.md")).expect("the report");
        assert!(
            got.expect("a rendered report") == want,
            "docs/performance.md is not what `cargo xtask bench --render docs/performance.json` \
             writes (a template changed without a render?): run it"
        );
    }
}
