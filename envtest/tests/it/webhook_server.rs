//! A webhook server for the admission and conversion tests: HTTPS with its
//! own CA (rcgen), answering each POSTed JSON review with what the test's
//! handler says, and keeping every review it received.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server answers.
pub enum Reply {
    /// 200 with this JSON.
    Json(Value),
    /// This status and raw body (and a `Location` when given).
    Raw(u16, Vec<u8>, Option<String>),
    /// Answer after this long.
    Slow(Duration, Value),
    /// 200 with this JSON, then close the connection (`Connection: close`).
    Closing(Value),
}

type Handler = dyn Fn(&Value) -> Reply + Send + Sync;

/// A running webhook server.
pub struct WebhookServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its CA, base64 PEM, for a `caBundle`.
    pub ca_bundle: String,
    /// Every review received, in order.
    pub reviews: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    /// `https://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// A `clientConfig` calling `path` on this server.
    pub fn client_config(&self, path: &str) -> Value {
        json!({"url": self.url(path), "caBundle": self.ca_bundle})
    }

    /// How many reviews arrived so far.
    pub fn calls(&self) -> usize {
        self.reviews.lock().unwrap().len()
    }

    /// The last review received.
    pub fn last(&self) -> Value {
        self.reviews
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or(Value::Null)
    }
}

/// A CA and a certificate for `names`, signed by it: (CA PEM, cert DER, key DER).
pub fn certificates(
    names: &[&str],
) -> (String, CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (
        ca_cert.pem(),
        cert.der().clone(),
        PrivatePkcs8KeyDer::from(key.serialize_der()),
    )
}

/// Start a server whose certificate names `127.0.0.1` and `names`.
pub async fn start(
    names: &[&str],
    handler: impl Fn(&Value) -> Reply + Send + Sync + 'static,
) -> WebhookServer {
    let mut all = vec!["127.0.0.1"];
    all.extend_from_slice(names);
    let (ca_pem, cert, key) = certificates(&all);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], PrivateKeyDer::Pkcs8(key))
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let handler: Arc<Handler> = Arc::new(handler);
    let seen = reviews.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let handler = handler.clone();
            let seen = seen.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let handler = handler.clone();
                    let seen = seen.clone();
                    async move {
                        let body = req.into_body().collect().await?.to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        seen.lock().unwrap().push(review.clone());
                        let reply = handler(&review);
                        let close = matches!(reply, Reply::Closing(_));
                        let (code, bytes, location) = match reply {
                            Reply::Json(v) | Reply::Closing(v) => {
                                (200, serde_json::to_vec(&v).unwrap(), None)
                            }
                            Reply::Raw(c, b, l) => (c, b, l),
                            Reply::Slow(d, v) => {
                                tokio::time::sleep(d).await;
                                (200, serde_json::to_vec(&v).unwrap(), None)
                            }
                        };
                        let mut resp = hyper::Response::builder()
                            .status(code)
                            .header("content-type", "application/json");
                        if close {
                            resp = resp.header("connection", "close");
                        }
                        if let Some(l) = location {
                            resp = resp.header("location", l);
                        }
                        Ok::<_, hyper::Error>(resp.body(Full::new(Bytes::from(bytes))).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    WebhookServer {
        addr,
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca_pem),
        reviews,
        task,
    }
}

/// The request uid of an AdmissionReview.
pub fn uid(review: &Value) -> String {
    review["request"]["uid"].as_str().unwrap_or("").to_string()
}

/// An AdmissionReview answer.
pub fn answer(review: &Value, response: Value) -> Reply {
    let mut r = response;
    r["uid"] = json!(uid(review));
    Reply::Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r}),
    )
}

/// Allow.
pub fn allow(review: &Value) -> Reply {
    answer(review, json!({"allowed": true}))
}

/// Deny with a code and message.
pub fn deny(review: &Value, code: u16, message: &str) -> Reply {
    answer(
        review,
        json!({"allowed": false, "status": {"code": code, "message": message, "reason": "Forbidden"}}),
    )
}

/// Allow with a JSON patch.
pub fn patch(review: &Value, ops: Value) -> Reply {
    let p = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap());
    answer(
        review,
        json!({"allowed": true, "patchType": "JSONPatch", "patch": p}),
    )
}
