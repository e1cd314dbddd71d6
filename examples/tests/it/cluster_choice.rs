//! The demos never write to a cluster by accident: with a `~/.kube/config`
//! naming a running server and no flag, the sample controller runs its
//! embedded demo and sends that server nothing; with `--kubeconfig` it
//! names the cluster and stops at once, writing nothing, when its CRD is
//! not installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use informer_examples::cluster::DEMO_BANNER_PREFIX;

/// A fresh directory for one test (a fake home, or a kubeconfig's).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "informer-examples-choice-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the sample controller with `args`, `HOME` at `home`, and nothing
/// else that chooses a cluster in its environment; fails the test if it
/// does not end by itself within `limit`.
async fn run_sample(home: &Path, args: &[&str], limit: Duration) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sample-controller"));
    command
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove(envtest::USE_EXISTING_CLUSTER)
        .env("RUST_LOG", "off");
    let started = Instant::now();
    let output = tokio::time::timeout(limit, tokio::task::spawn_blocking(move || command.output()))
        .await
        .unwrap_or_else(|_| panic!("the program did not end by itself within {limit:?}"))
        .unwrap()
        .unwrap();
    eprintln!(
        "sample-controller {args:?} ended in {:?}",
        started.elapsed()
    );
    output
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_kubeconfig_and_no_flag_the_sample_runs_the_demo_and_sends_the_cluster_nothing() {
    if envtest::skip_on_existing_cluster("a server of the test's own, to see what reaches it") {
        return;
    }
    let server = envtest::TestEnv::start().await.unwrap();
    let home = scratch("home");
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    std::fs::write(home.join(".kube").join("config"), server.kubeconfig_yaml()).unwrap();
    let (revision, requests) = (server.current_revision(), server.request_log().len());

    let output = run_sample(&home, &[], Duration::from_secs(240)).await;
    let _ = std::fs::remove_dir_all(&home);
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(stdout.starts_with(DEMO_BANNER_PREFIX), "{stdout}");
    assert!(
        !stdout.contains(server.base_url()),
        "the demo used its own server:\n{stdout}"
    );
    assert!(stdout.contains("shut down cleanly"), "{stdout}");
    assert_eq!(
        server.request_log()[requests..]
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>(),
        Vec::<String>::new(),
        "no request reached the server of ~/.kube/config"
    );
    assert_eq!(server.current_revision(), revision, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_kubeconfig_and_no_crd_the_sample_names_the_cluster_and_stops_with_the_install_command()
 {
    if envtest::skip_on_existing_cluster("a server of the test's own, without the Foo CRD") {
        return;
    }
    let server = envtest::TestEnv::start().await.unwrap();
    let home = scratch("empty-home");
    let dir = scratch("kubeconfig");
    let kubeconfig = dir.join("cluster.yaml");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).unwrap();
    let revision = server.current_revision();
    let requests = server.request_log().len();

    let started = Instant::now();
    let output = run_sample(
        &home,
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
        Duration::from_secs(60),
    )
    .await;
    let took = started.elapsed();
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&dir);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    assert!(
        took < Duration::from_secs(20),
        "stopped within seconds: {took:?}"
    );
    // The cluster and context, said first.
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("using cluster {}", server.base_url()))
            && first.contains("(context "),
        "{stdout}"
    );
    assert!(
        stderr.contains("foos.samplecontroller.k8s.io")
            && stderr.contains(
                "cargo run -p informer-examples --bin sample-controller -- --print-crd | kubectl apply -f -"
            ),
        "{stderr}"
    );
    let log = server.request_log();
    let sent: Vec<String> = log[requests..]
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        log[requests..]
            .iter()
            .all(|r| r.method == http::Method::GET),
        "reads only: {sent:?}"
    );
    assert_eq!(server.current_revision(), revision, "nothing was written");
}

#[tokio::test]
async fn help_documents_the_cluster_flags() {
    let home = scratch("help");
    let output = run_sample(&home, &["--help"], Duration::from_secs(30)).await;
    let _ = std::fs::remove_dir_all(&home);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    for flag in [
        "--kubeconfig <FILE>",
        "--context <NAME>",
        "--demo",
        "--no-webhooks",
        "--print-crd",
        "never touches your cluster",
    ] {
        assert!(stdout.contains(flag), "missing {flag:?} in\n{stdout}");
    }
}
