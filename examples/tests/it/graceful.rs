//! SIGTERM during a burst of reconciles: in-flight reconciles finish, no new
//! one starts, the lease is released, the process exits 0.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use controller_runtime::k8s_openapi::api::coordination::v1::Lease;
use controller_runtime::k8s_openapi::api::core::v1::ConfigMap;
use controller_runtime::kube_client::Api;
use controller_runtime::kube_client::api::PostParams;

fn next_line(
    rx: &mpsc::Receiver<String>,
    deadline: Instant,
    lines: &mut Vec<String>,
) -> Option<String> {
    let left = deadline.saturating_duration_since(Instant::now());
    let line = rx.recv_timeout(left).ok()?;
    lines.push(line.clone());
    Some(line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_reconciles_releases_the_lease_and_exits_0() {
    // The program reconciles every ConfigMap of the cluster it is given.
    if envtest::skip_on_existing_cluster(
        "a cluster of the test's own (the program acts cluster-wide)",
    ) {
        return;
    }
    let env = envtest::TestEnv::start().await.unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("graceful-{}.yaml", std::process::id()));
    std::fs::write(&kubeconfig, env.kubeconfig_yaml()).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..8 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("burst-{i}"));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }

    let mut child = Command::new(env!("CARGO_BIN_EXE_graceful"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("KUBECONFIG")
        .env("RECONCILE_MS", "800")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    // Wait until the handler is installed and reconciles are in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut lines = Vec::new();
    let (mut ready, mut started) = (false, false);
    while !(ready && started) {
        let line = next_line(&rx, deadline, &mut lines).expect("ready and a reconcile start");
        ready |= line == "ready";
        started |= line.starts_with("start ");
    }
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let sent = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(sent.elapsed() < Duration::from_secs(20), "exited in time");
        std::thread::sleep(Duration::from_millis(20));
    };
    while let Some(_line) = next_line(&rx, Instant::now() + Duration::from_secs(1), &mut lines) {}
    let _ = std::fs::remove_file(&kubeconfig);
    assert!(exit.success(), "exit status {exit:?}; output {lines:?}");

    let signal_at = lines
        .iter()
        .position(|l| l == "signal")
        .expect("the signal was seen");
    let starts: Vec<&String> = lines.iter().filter(|l| l.starts_with("start ")).collect();
    let ends: Vec<&String> = lines.iter().filter(|l| l.starts_with("end ")).collect();
    assert_eq!(
        starts.len(),
        ends.len(),
        "every reconcile finished: {lines:?}"
    );
    assert!(
        starts.len() < 8,
        "the burst was not done when SIGTERM came: {lines:?}"
    );
    assert!(
        lines[signal_at..].iter().all(|l| !l.starts_with("start ")),
        "no reconcile started after SIGTERM: {lines:?}"
    );
    assert!(
        lines[signal_at..].iter().any(|l| l.starts_with("end ")),
        "a reconcile was in flight at SIGTERM and finished: {lines:?}"
    );
    assert_eq!(lines.last().map(String::as_str), Some("stopped"));
    let lease = Api::<Lease>::namespaced(env.client(), "default")
        .get("graceful-demo")
        .await
        .unwrap();
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert_eq!(holder, "", "the lease was released");
}
