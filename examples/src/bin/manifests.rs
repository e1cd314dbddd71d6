//! The sample controller's manifests, generated from its code (see
//! `informer_examples::sample::manifests`): `crd.yaml` (the Foo
//! CustomResourceDefinition, v1alpha1 and v1 from
//! `#[derive(CustomResource)]` joined, converted by the webhook Service
//! `default/foo-webhook-service`), `rbac.yaml` (the least-privilege
//! ClusterRole of its reconciler from `#[derive(Controller)]`, the webhook
//! certificates' rules included, its ServiceAccount and binding) and
//! `webhooks.yaml` (the webhook Service and the Mutating- and
//! ValidatingWebhookConfiguration declared by `webhooks(...)` in
//! `#[controller(...)]`). It is the `manifests` binary that `cargo xtask
//! crd` and `cargo xtask rbac` run, with the same flags as a scaffolded
//! project's `manifests` binary.
//!
//! Run: `cargo run -p informer-examples --bin manifests -- --stdout`
//! (`--only crd|rbac|webhooks` for one file; `--out DIR` writes into DIR,
//! default `deploy/`).

use std::path::PathBuf;
use std::process::ExitCode;

use informer_examples::sample::manifests;

const FILES: &[&str] = &["crd", "rbac", "webhooks"];
const USAGE: &str = "usage: manifests [--out DIR | --stdout] [--only crd|rbac|webhooks]";
/// The namespace the sample's manager runs in.
const NAMESPACE: &str = "default";

fn main() -> ExitCode {
    let mut out = PathBuf::from("deploy");
    let mut stdout = false;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => match args.next() {
                Some(dir) => out = PathBuf::from(dir),
                None => return fail("--out needs a directory"),
            },
            "--stdout" => stdout = true,
            "--only" => match args.next() {
                Some(which) if FILES.contains(&which.as_str()) => only = Some(which),
                _ => return fail(&format!("--only needs one of {}", FILES.join(", "))),
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return fail(&format!("unknown argument {other:?}")),
        }
    }
    let manifests = match manifests::render(NAMESPACE) {
        Ok(m) => m,
        Err(error) => return fail(&error.to_string()),
    };
    let selected = manifests.iter().filter(|m| {
        only.as_deref()
            .is_none_or(|o| m.file == format!("{o}.yaml"))
    });
    if stdout {
        let docs: Vec<&str> = selected.map(|m| m.yaml.as_str()).collect();
        print!("{}", docs.join("---\n"));
        return ExitCode::SUCCESS;
    }
    if let Err(error) = std::fs::create_dir_all(&out) {
        return fail(&format!("creating {}: {error}", out.display()));
    }
    for manifest in selected {
        let path = out.join(manifest.file);
        if let Err(error) = std::fs::write(&path, &manifest.yaml) {
            return fail(&format!("writing {}: {error}", path.display()));
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("manifests: {message}\n{USAGE}");
    ExitCode::FAILURE
}
