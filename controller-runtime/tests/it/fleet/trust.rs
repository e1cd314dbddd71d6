//! Kubeconfig Secrets are input from whoever may create a Secret in the
//! hub's namespace: a `SecretProvider` uses inline credentials only
//! (`exec` and `tokenFile` are refused), and what it logs of a Secret it
//! skips names the Secret and the problem, never any of its data. The
//! Secret's data key and the cluster's name are the provider's to choose
//! (Cluster API's layout here).

use std::io::Write;
use std::sync::Arc;

use controller_runtime::cluster::SecretProvider;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::Secret;
use kube_client::Api;
use kube_client::api::PostParams;
use parking_lot::Mutex;

use super::fixture::{fleet_manager_builder, hub_and_member, kubeconfig_secret};
use super::{LONG, ready};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

/// Every log line written while it is the thread's subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock())
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Whether a line says `what` about the Secret `secret`.
    fn has(&self, secret: &str, what: &str) -> bool {
        self.lines()
            .iter()
            .any(|l| l.contains(&format!("secret={secret}")) && l.contains(what))
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures every event of every level on this thread (the tests here
/// run on tokio's current-thread runtime, so the manager's tasks too).
fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

/// `member`'s kubeconfig with `user` (indented lines) as its user.
fn with_user(member: &TestEnv, user: &str) -> String {
    let inline = member.kubeconfig_yaml();
    let start = inline.find("users:").unwrap();
    let end = inline.find("contexts:").unwrap();
    format!(
        "{}users:\n- name: envtest\n  user:\n{user}\n{}",
        &inline[..start],
        &inline[end..]
    )
}

/// What must appear in no log line.
const EXEC_COMMAND: &str = "/opt/evil/run-me";
const EXEC_ARG: &str = "EXEC-ARG-7f3a";
const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount/TOKEN-PATH-9c1d";
const TOKEN: &str = "sekrit-token-5e8b";
const PASSWORD: &str = "hunter2-pass-0a4f";

#[tokio::test]
async fn exec_and_token_file_are_refused_and_no_secret_data_is_logged() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (own, member) = hub_and_member().await;
    let ns = own.namespace().to_string();
    let label = [("fleet", "member")];
    let exec = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {EXEC_COMMAND}\n      args: [\"{EXEC_ARG}\"]"
    );
    let token_file = format!("    tokenFile: {TOKEN_PATH}");
    // Does not parse: the parser's message would quote the lines near the
    // fault, the token and the password among them.
    let malformed = format!(
        "apiVersion: v1\nusers:\n- name: u\n  user:\n    token: {TOKEN}\n    password: {PASSWORD}\n  ]]: [\n"
    );
    let secrets = [
        kubeconfig_secret("exec", &label, "kubeconfig", &with_user(&member, &exec)),
        kubeconfig_secret(
            "token-file",
            &label,
            "kubeconfig",
            &with_user(&member, &token_file),
        ),
        kubeconfig_secret("malformed", &label, "kubeconfig", &malformed),
        kubeconfig_secret(
            "not-utf8",
            &label,
            "kubeconfig",
            &format!("token: {TOKEN}\n\u{0}"),
        ),
        kubeconfig_secret("inline", &label, "kubeconfig", &member.kubeconfig_yaml()),
    ];

    let (logs, _guard) = capture();
    let api: Api<Secret> = Api::namespaced(own.client(), &ns);
    for s in &secrets {
        api.create(&PostParams::default(), s).await.unwrap();
    }
    let mgr = fleet_manager_builder(&own)
        .provider(SecretProvider::new(own.client(), &ns, "fleet=member"))
        .build()
        .await
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    eventually(LONG, "inline engaged, the others skipped", || async {
        (ready(&mgr, "inline")
            && logs.has("exec", "skipped")
            && logs.has("token-file", "skipped")
            && logs.has("malformed", "skipped")
            && logs.has("not-utf8", "skipped"))
        .then_some(())
    })
    .await;
    assert_eq!(mgr.fleet().names(), ["inline"]);
    assert!(logs.has("exec", "refused") && logs.has("exec", "`exec`"));
    assert!(logs.has("token-file", "refused") && logs.has("token-file", "`tokenFile`"));
    assert!(logs.has("malformed", "does not parse"));
    stop_manager(stop, task).await;

    let lines = logs.lines();
    for secret_data in [
        EXEC_COMMAND,
        EXEC_ARG,
        TOKEN_PATH,
        "TOKEN-PATH",
        TOKEN,
        PASSWORD,
    ] {
        let leaked: Vec<&String> = lines.iter().filter(|l| l.contains(secret_data)).collect();
        assert!(leaked.is_empty(), "{secret_data:?} logged: {leaked:#?}");
    }
}

#[tokio::test]
async fn the_data_key_and_the_cluster_name_are_configurable() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (own, member) = hub_and_member().await;
    let ns = own.namespace().to_string();
    const LABEL: &str = "cluster.x-k8s.io/cluster-name";
    let provider = SecretProvider::new(own.client(), &ns, LABEL)
        .data_key("value")
        .cluster_name(|secret| {
            let cluster = secret.metadata.labels.as_ref()?.get(LABEL)?;
            let name = secret.metadata.name.as_deref()?;
            (name == format!("{cluster}-kubeconfig")).then(|| cluster.clone())
        });
    let mgr = fleet_manager_builder(&own)
        .provider(provider)
        .build()
        .await
        .unwrap();
    let (stop, task) = spawn_manager(&mgr);
    let api: Api<Secret> = Api::namespaced(own.client(), &ns);
    let yaml = member.kubeconfig_yaml();
    for s in [
        kubeconfig_secret("edge-kubeconfig", &[(LABEL, "edge")], "value", &yaml),
        // Another Secret of the cluster (not its kubeconfig): no cluster.
        kubeconfig_secret("edge-ca", &[(LABEL, "edge")], "value", &yaml),
        // The right name, the kubeconfig under the default key: skipped.
        kubeconfig_secret("core-kubeconfig", &[(LABEL, "core")], "kubeconfig", &yaml),
    ] {
        api.create(&PostParams::default(), &s).await.unwrap();
    }
    eventually(LONG, "edge engaged and answering", || async {
        ready(&mgr, "edge").then_some(())
    })
    .await;
    assert_eq!(mgr.fleet().names(), ["edge"]);
    stop_manager(stop, task).await;
}
