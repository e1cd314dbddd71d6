//! The HTTPS client admission and conversion webhooks are called with, as
//! kube-apiserver calls them: a `clientConfig` (a `url`, or a `service`
//! resolved to a local address through the server's service map) and its
//! `caBundle` (the only roots trusted), one POST of a JSON body per call,
//! `?timeout=Ns` on the URL and the whole exchange bounded by that time,
//! redirects not followed (a 3xx is a failed call), and the answer's body
//! capped. Nothing here touches storage.

pub use crate::http::state::ServiceMap;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// Why a webhook call failed (the text follows `failed to call webhook: `).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The client configuration cannot be used.
    #[error("{0}")]
    Config(String),
    /// Connecting, the TLS handshake or the exchange failed.
    #[error("Post {url:?}: {why}")]
    Transport {
        /// The URL called.
        url: String,
        /// What went wrong.
        why: String,
    },
    /// No answer within the webhook's timeout.
    #[error("Post {0:?}: context deadline exceeded")]
    Timeout(String),
    /// An answer other than 2xx (redirects are not followed).
    #[error("the server responded with status {status} to Post {url:?}")]
    Status {
        /// The URL called.
        url: String,
        /// Status line code.
        status: u16,
    },
    /// The answer's body is larger than allowed.
    #[error("the response body of Post {url:?} is over the limit of {limit} bytes")]
    TooLarge {
        /// The URL called.
        url: String,
        /// The cap.
        limit: usize,
    },
}

/// One resolved call target.
struct Target {
    /// `host:port` to connect to.
    addr: String,
    /// The name the certificate must be valid for.
    server_name: String,
    /// `Host` header and URL authority.
    authority: String,
    /// Path and query sent.
    path: String,
    /// For messages.
    url: String,
}

fn resolve(cfg: &Value, services: &ServiceMap, timeout: Duration) -> Result<Target, CallError> {
    let timeout_q = format!("timeout={}s", timeout.as_secs());
    if let Some(url) = cfg["url"].as_str().filter(|u| !u.is_empty()) {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| CallError::Config(format!("webhook url {url:?} must use https")))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_host_port(authority, 443);
        let sep = if path.contains('?') { '&' } else { '?' };
        return Ok(Target {
            addr: format!("{}:{port}", bracket(&host)),
            server_name: host,
            authority: authority.to_string(),
            path: format!("{path}{sep}{timeout_q}"),
            url: format!("{url}{sep}{timeout_q}"),
        });
    }
    let svc = &cfg["service"];
    let (Some(ns), Some(name)) = (svc["namespace"].as_str(), svc["name"].as_str()) else {
        return Err(CallError::Config(
            "the webhook's clientConfig has neither a url nor a service".into(),
        ));
    };
    let port = svc["port"].as_i64().unwrap_or(443);
    let addr = services
        .get(&format!("{ns}/{name}:{port}"))
        .or_else(|| services.get(&format!("{ns}/{name}")))
        .ok_or_else(|| {
            CallError::Config(format!(
                "service {ns}/{name}:{port} is not mapped to a local address (map it with TestEnvBuilder::webhook_service or envtest-server --webhook-service)"
            ))
        })?
        .clone();
    let host = format!("{name}.{ns}.svc");
    let path = svc["path"]
        .as_str()
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    let sep = if path.contains('?') { '&' } else { '?' };
    Ok(Target {
        addr,
        url: format!("https://{host}:{port}{path}{sep}{timeout_q}"),
        authority: format!("{host}:{port}"),
        server_name: host,
        path: format!("{path}{sep}{timeout_q}"),
    })
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// Host (without IPv6 brackets) and port of an authority.
fn split_host_port(authority: &str, default: u16) -> (String, u16) {
    if let Some(rest) = authority.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').unwrap_or((rest, ""));
        let port = tail
            .strip_prefix(':')
            .and_then(|p| p.parse().ok())
            .unwrap_or(default);
        return (h.to_string(), port);
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => (h.to_string(), p.parse().unwrap_or(default)),
        _ => (authority.to_string(), default),
    }
}

fn tls_config(cfg: &Value) -> Result<Arc<rustls::ClientConfig>, CallError> {
    use base64::Engine;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(b) = cfg["caBundle"].as_str().filter(|b| !b.is_empty()) {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| CallError::Config(format!("caBundle is not base64: {e}")))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert =
                cert.map_err(|e| CallError::Config(format!("caBundle is not PEM: {e:?}")))?;
            roots
                .add(cert)
                .map_err(|e| CallError::Config(format!("caBundle: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CallError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// POST `body` to the webhook `client_config` names and answer its body
/// (at most `limit` bytes), all within `timeout`.
pub async fn post(
    client_config: &Value,
    services: &ServiceMap,
    body: Vec<u8>,
    timeout: Duration,
    limit: usize,
) -> Result<Bytes, CallError> {
    let target = resolve(client_config, services, timeout)?;
    let tls = tls_config(client_config)?;
    let url = target.url.clone();
    match tokio::time::timeout(timeout, exchange(target, tls, body, limit)).await {
        Ok(r) => r,
        Err(_) => Err(CallError::Timeout(url)),
    }
}

async fn exchange(
    t: Target,
    tls: Arc<rustls::ClientConfig>,
    body: Vec<u8>,
    limit: usize,
) -> Result<Bytes, CallError> {
    let transport = |why: String| CallError::Transport {
        url: t.url.clone(),
        why,
    };
    let tcp = TcpStream::connect(&t.addr)
        .await
        .map_err(|e| transport(format!("dial tcp {}: {e}", t.addr)))?;
    let name = ServerName::try_from(t.server_name.clone())
        .map_err(|e| transport(format!("invalid server name: {e}")))?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| transport(format!("tls: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| transport(e.to_string()))?;
    let req = http::Request::post(t.path.as_str())
        .header(http::header::HOST, t.authority.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| transport(e.to_string()))?;
    let call = async {
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| transport(e.to_string()))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(CallError::Status {
                url: t.url.clone(),
                status,
            });
        }
        match Limited::new(resp.into_body(), limit).collect().await {
            Ok(b) => Ok(b.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(CallError::TooLarge {
                url: t.url.clone(),
                limit,
            }),
            Err(e) => Err(transport(e.to_string())),
        }
    };
    tokio::pin!(conn);
    tokio::pin!(call);
    tokio::select! {
        r = &mut call => r,
        c = &mut conn => match c {
            // The server closed the connection after answering (HTTP/1.0,
            // `Connection: close`): the answer is in, or the call fails.
            Ok(()) => call.await,
            Err(e) => Err(transport(e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn urls_and_services_resolve() {
        let t = resolve(
            &json!({"url": "https://127.0.0.1:8443/validate"}),
            &ServiceMap::new(),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(t.addr, "127.0.0.1:8443");
        assert_eq!(t.path, "/validate?timeout=10s");
        let mut m = ServiceMap::new();
        m.insert("sys/hook".into(), "127.0.0.1:9000".into());
        let cfg = json!({"service": {"namespace": "sys", "name": "hook", "path": "/m"}});
        let t = resolve(&cfg, &m, Duration::from_secs(3)).unwrap();
        assert_eq!(t.addr, "127.0.0.1:9000");
        assert_eq!(t.server_name, "hook.sys.svc");
        assert_eq!(t.url, "https://hook.sys.svc:443/m?timeout=3s");
        assert!(resolve(&json!({"url": "http://x/"}), &m, Duration::from_secs(1)).is_err());
        let cfg = json!({"service": {"namespace": "sys", "name": "other"}});
        assert!(resolve(&cfg, &m, Duration::from_secs(1)).is_err());
        assert_eq!(split_host_port("[::1]:8443", 443), ("::1".into(), 8443));
    }
}
