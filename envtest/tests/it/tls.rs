//! HTTPS with a generated CA (`TestEnvBuilder::tls`): kube-client trusts
//! the CA it is given and no other, bearer tokens work over TLS (scheme
//! case-insensitive), a wrong one is 401, the kubeconfig carries the CA and
//! the token, and the HTTP layer's own 414 answers still carry a Status.

use crate::status;
use envtest::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{Api, ListParams};
use std::sync::Arc;

const TOKEN: &str = "s3cret";

async fn tls_env() -> TestEnv {
    TestEnv::builder()
        .tls()
        .bearer_token(TOKEN)
        .start()
        .await
        .unwrap()
}

/// The DER bytes of a one-certificate PEM.
fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

/// A client for `env` trusting `ca_pem`, carrying `token` (if any).
fn client(env: &TestEnv, ca_pem: &str, token: Option<&str>) -> kube_client::Client {
    let mut config = kube_client::Config::new(env.base_url().parse().unwrap());
    config.default_retry = false;
    config.root_cert = Some(vec![pem_to_der(ca_pem)]);
    if let Some(t) = token {
        config.auth_info = serde_json::from_value(serde_json::json!({ "token": t })).unwrap();
    }
    kube_client::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn the_client_and_kubeconfig_trust_the_generated_ca() {
    let env = tls_env().await;
    assert!(env.base_url().starts_with("https://127.0.0.1:"));
    let ns: Api<Namespace> = Api::all(env.client());
    let names: Vec<_> = ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");

    // The written kubeconfig is enough on its own: CA and token.
    let yaml = env.kubeconfig_yaml();
    assert!(yaml.contains("certificate-authority-data: "), "{yaml}");
    assert!(yaml.contains("token: \"s3cret\""), "{yaml}");
    let cfg = kube_client::Config::from_custom_kubeconfig(env.kubeconfig(), &Default::default())
        .await
        .unwrap();
    let from_kc: Api<ConfigMap> =
        Api::default_namespaced(kube_client::Client::try_from(cfg).unwrap());
    from_kc.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn another_ca_is_not_trusted() {
    let env = tls_env().await;
    let other = TestEnv::builder().tls().start().await.unwrap();
    let wrong = client(&env, other.ca_pem().unwrap(), Some(TOKEN));
    let ns: Api<Namespace> = Api::all(wrong);
    let e = ns.list(&ListParams::default()).await.unwrap_err();
    // A transport failure (certificate), never an answer from the server.
    assert!(!matches!(e, kube_client::Error::Api(_)), "{e:?}");
    assert!(
        env.request_log().is_empty(),
        "no request may reach the server"
    );
    // Plain HTTP to a TLS port gets no answer either.
    let mut plain = kube_client::Config::new(
        env.base_url()
            .replacen("https://", "http://", 1)
            .parse()
            .unwrap(),
    );
    plain.default_retry = false;
    let plain: Api<Namespace> = Api::all(kube_client::Client::try_from(plain).unwrap());
    assert!(plain.list(&ListParams::default()).await.is_err());
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_401_over_tls() {
    let env = tls_env().await;
    let ca = env.ca_pem().unwrap().to_string();
    for token in [Some("wrong"), None] {
        let ns: Api<Namespace> = Api::all(client(&env, &ca, token));
        let e = status(ns.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
    }
    // The right token through the same path passes.
    let ns: Api<Namespace> = Api::all(client(&env, &ca, Some(TOKEN)));
    ns.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let env = tls_env().await;
    let anon = client(&env, env.ca_pem().unwrap(), None);
    for (header, code) in [
        ("bearer s3cret", 200),
        ("BEARER s3cret", 200),
        ("Bearer s3cret", 200),
        ("Basic s3cret", 401),
        ("bearer wrong", 401),
    ] {
        let req = http::Request::get("/api/v1/namespaces")
            .header(http::header::AUTHORIZATION, header)
            .body(kube_client::client::Body::empty())
            .unwrap();
        let resp = anon.send(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), code, "{header}");
    }
}

#[tokio::test]
async fn a_url_too_long_is_still_414_with_a_status_under_tls() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = tls_env().await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(pem_to_der(
            env.ca_pem().unwrap(),
        )))
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let addr = env.base_url().trim_start_matches("https://").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let request = format!(
        "GET /api/v1/namespaces?labelSelector={} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {TOKEN}\r\n\r\n",
        "a".repeat(100_000)
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    // Until the server closes (with or without a TLS close_notify).
    while let Ok(Ok(n)) = tokio::time::timeout(crate::WAIT, conn.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 414 "), "{head}");
    let st: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        (st["code"].as_u64(), st["reason"].as_str()),
        (Some(414), Some("RequestURITooLong"))
    );
    // The server goes on answering.
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    api.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn service_account_clients_work_over_tls() {
    let env = tls_env().await;
    let sa = env.service_account_client("default", "nobody").unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(sa);
    let e = status(cms.list(&ListParams::default()).await.unwrap_err());
    // Authenticated (not 401), and refused by RBAC.
    assert_eq!(e.code, 403);
}
