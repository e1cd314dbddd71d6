//! Scenario 9, webhook: admission reviews per second and p50/p99 latency
//! at 1, 8 and 64 concurrent clients over TLS (each client one keep-alive
//! connection), against controller-runtime's webhook server with a typed
//! validator, next to a bare TLS echo on the same stack (the same rustls
//! listener and axum; the body sent back as it came) as the floor.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use controller_runtime::tls::{CertResolver, SelfSigned, TlsListener};
use controller_runtime::webhook::{
    AdmissionContext, Denial, Validator, Warnings, WebhookServer, validate_path,
};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_util::sync::CancellationToken;

use crate::record::{FLOOR, Metric, OURS, Records};
use crate::{BenchError, Plan};

/// Refuses ConfigMaps with a `forbidden` key: a small, typed check.
struct Rules;

impl Validator<ConfigMap> for Rules {
    async fn validate_create(
        &self,
        cm: &ConfigMap,
        _: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        if cm
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key("forbidden"))
        {
            return Err(Denial::new("forbidden key").field("data.forbidden", "not allowed"));
        }
        Ok(Vec::new())
    }
    async fn validate_update(
        &self,
        _: &ConfigMap,
        new: &ConfigMap,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.validate_create(new, ctx).await
    }
}

fn review() -> Vec<u8> {
    let data: serde_json::Map<String, serde_json::Value> = (0..8)
        .map(|i| (format!("key-{i}"), format!("value-{i}").into()))
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "settings", "namespace": "bench", "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "settings", "namespace": "bench", "labels": {"app": "bench"}},
                       "data": data},
            "dryRun": false,
        }
    }))
    .unwrap_or_default()
}

fn connector(ca_pem: &str) -> Result<tokio_rustls::TlsConnector, BenchError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(BenchError::msg)?)
            .map_err(BenchError::msg)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(BenchError::msg)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// One client: one connection, `n` sequential POSTs; the latency of each.
async fn client(
    connector: tokio_rustls::TlsConnector,
    addr: SocketAddr,
    path: String,
    body: Bytes,
    n: usize,
) -> Result<Vec<Duration>, BenchError> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(BenchError::msg)?;
    tcp.set_nodelay(true).map_err(BenchError::msg)?;
    let name = ServerName::try_from("localhost").map_err(BenchError::msg)?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(BenchError::msg)?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(BenchError::msg)?;
    tokio::spawn(conn);
    let mut latencies = Vec::with_capacity(n);
    for _ in 0..n {
        let req = http::Request::post(path.as_str())
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .map_err(BenchError::msg)?;
        let start = Instant::now();
        send.ready().await.map_err(BenchError::msg)?;
        let resp = send.send_request(req).await.map_err(BenchError::msg)?;
        if resp.status() != 200 {
            return Err(BenchError(format!("{path} answered {}", resp.status())));
        }
        resp.into_body().collect().await.map_err(BenchError::msg)?;
        latencies.push(start.elapsed());
    }
    Ok(latencies)
}

/// `clients` clients sending `total` requests in all: requests/s, p50, p99 (ms).
async fn load(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    path: &str,
    clients: usize,
    total: usize,
) -> Result<(f64, f64, f64), BenchError> {
    let body = Bytes::from(review());
    let per = total.div_ceil(clients);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            tokio::spawn(client(
                connector.clone(),
                addr,
                path.to_owned(),
                body.clone(),
                per,
            ))
        })
        .collect();
    let mut all = Vec::with_capacity(per * clients);
    for t in tasks {
        all.extend(t.await.map_err(BenchError::msg)??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct =
        |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)].as_secs_f64() * 1e3;
    Ok((all.len() as f64 / elapsed, pct(0.50), pct(0.99)))
}

/// Runs the scenario.
pub async fn run(plan: &Plan, out: &mut Records) -> Result<(), BenchError> {
    let names = vec!["localhost".to_owned()];
    let pair = SelfSigned::generate_for(&names, SystemTime::now(), Duration::from_secs(3600))
        .map_err(BenchError::msg)?;
    let resolver = CertResolver::new();
    resolver
        .load_pem(pair.cert_pem().as_bytes(), pair.key_pem().as_bytes())
        .map_err(BenchError::msg)?;
    let stop = CancellationToken::new();

    let socket = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .map_err(BenchError::msg)?;
    let webhook_addr = socket.local_addr().map_err(BenchError::msg)?;
    let server = WebhookServer::new(resolver.clone())
        .listener(socket)
        .validator::<ConfigMap, _>(Rules)
        .map_err(BenchError::msg)?;
    tokio::spawn(server.serve(stop.clone()));

    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(BenchError::msg)?;
    let echo_listener = TlsListener::new(tcp, resolver.server_config().map_err(BenchError::msg)?)
        .map_err(BenchError::msg)?;
    let echo_addr = axum::serve::Listener::local_addr(&echo_listener).map_err(BenchError::msg)?;
    let echo = Router::new().route("/echo", post(|body: Bytes| async move { body }));
    let echo_stop = stop.clone();
    tokio::spawn(async move {
        axum::serve(echo_listener, echo)
            .with_graceful_shutdown(async move { echo_stop.cancelled().await })
            .await
    });

    let connector = connector(pair.ca_pem())?;
    let path = validate_path::<ConfigMap>();
    let total = plan.webhook_requests;
    for clients in [1usize, 8, 64] {
        let case = format!("{clients} clients, {total} reviews");
        let rate = Metric {
            scenario: "webhook",
            case: &case,
            metric: "reviews/s",
            unit: "reviews/s",
            higher_is_better: true,
        };
        let p50 = Metric {
            scenario: "webhook",
            case: &case,
            metric: "p50 latency",
            unit: "ms",
            higher_is_better: false,
        };
        let p99 = Metric {
            scenario: "webhook",
            case: &case,
            metric: "p99 latency",
            unit: "ms",
            higher_is_better: false,
        };
        for run in 0..plan.runs {
            let order: [bool; 2] = if run % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for ours in order {
                let (addr, p, side) = if ours {
                    (webhook_addr, path.as_str(), OURS)
                } else {
                    (echo_addr, "/echo", FLOOR)
                };
                let (r, a, b) = load(&connector, addr, p, clients, total).await?;
                out.push(&rate, side, r);
                out.push(&p50, side, a);
                out.push(&p99, side, b);
            }
        }
        eprintln!("webhook {case} done");
    }
    stop.cancel();
    Ok(())
}
