//! A member client's HTTP stack, built here rather than by kube-client's
//! `Client::try_from(Config)` so that hyper's HTTP/1 read buffer can be
//! capped.
//!
//! hyper gives every connection a read buffer that starts at 8 KiB and
//! doubles whenever a read fills it, up to 8 KiB + 400 KiB, and never
//! shrinks its allocation. A member's LIST pages arrive faster than they
//! are decoded when many clusters share the CPUs, so most members' buffers
//! reach that cap, and the watch that reuses the connection keeps it for
//! the member's life: about 400 KiB per engaged cluster, most of a fleet's
//! per-cluster memory. With a cap, a read takes at most that many bytes
//! and the buffer stays at it.
//!
//! Everything else is what kube-client's own stack does with the same
//! [`Config`]: TLS from the configuration (rustls, or OpenSSL with this
//! crate's `openssl-tls` feature alone, as kube-client picks), connect,
//! read and write timeouts (hyper-timeout, with `reset_reader_on_write`),
//! the cluster's base URI, its authentication (tokens, refreshed exec and
//! auth-provider credentials, client certificates through TLS), the
//! impersonation headers, gzip decompression with this crate's `gzip`
//! feature, and a debug span per request naming the member. Two things are
//! left to kube-client's builder instead: a configuration with a proxy URL
//! is built by it (its proxy connectors), so its buffer is not capped; and
//! a client made here does not carry `Client::valid_until` (set by
//! kube-client when an exec plugin returns a client certificate with an
//! expiry; nothing in this crate reads it). kube-client's retry layer is
//! absent: member clients never retry underneath their informers.

use std::time::Duration;

use http::{Request, Response};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Builder;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube_client::client::{Body, ConfigExt};
use kube_client::{Client, Config};
use tower::ServiceBuilder;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;
use tracing::Span;

/// hyper's smallest allowed cap (it panics below it).
pub(super) const MIN_READ_BUFFER: usize = 8 * 1024;

/// A client for `config` (the member `cluster`), its connections' read
/// buffers capped at `read_buffer` bytes (`None`: hyper's own cap); see
/// the module docs for what is kept from kube-client's stack.
pub(super) fn member_client(
    cluster: &str,
    config: Config,
    read_buffer: Option<usize>,
) -> Result<Client, kube_client::Error> {
    if config.proxy_url.is_some() {
        return Client::try_from(config);
    }
    let mut tcp = HttpConnector::new();
    // The TLS connector wraps this one and handles `https` itself.
    tcp.enforce_http(false);
    #[cfg(feature = "rustls-tls")]
    let tls = config.rustls_https_connector_with_connector(tcp)?;
    #[cfg(all(not(feature = "rustls-tls"), feature = "openssl-tls"))]
    let tls = config.openssl_https_connector_with_connector(tcp)?;
    #[cfg(not(any(feature = "rustls-tls", feature = "openssl-tls")))]
    let tls = {
        if config.cluster_url.scheme() == Some(&http::uri::Scheme::HTTPS) {
            return Err(kube_client::Error::TlsRequired);
        }
        tcp
    };
    let mut timed = TimeoutConnector::new(tls);
    timed.set_connect_timeout(config.connect_timeout);
    timed.set_read_timeout(config.read_timeout);
    timed.set_write_timeout(config.write_timeout);
    timed.set_reset_reader_on_write(config.reset_reader_on_write);

    let mut builder = Builder::new(TokioExecutor::new());
    if let Some(cap) = read_buffer {
        builder.http1_max_buf_size(cap.max(MIN_READ_BUFFER));
    }
    let http = builder.build::<_, Body>(timed);

    let span_cluster = cluster.to_string();
    let traced = TraceLayer::new_for_http()
        .make_span_with(move |req: &Request<Body>| {
            tracing::debug_span!(
                "HTTP",
                cluster = %span_cluster,
                http.method = %req.method(),
                http.url = %req.uri(),
                http.status_code = tracing::field::Empty,
            )
        })
        .on_request(())
        .on_response(|res: &Response<_>, _: Duration, span: &Span| {
            span.record("http.status_code", res.status().as_u16());
        })
        .on_body_chunk(())
        .on_eos(())
        .on_failure(|failure: ServerErrorsFailureClass, _: Duration, _: &Span| {
            tracing::debug!(%failure, "member request failed");
        });

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(decompression(&config))
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(traced)
        // Every layer's error one type, as the auth layer's wants.
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(Client::new(service, config.default_namespace))
}

/// gzip responses, unless the configuration disables compression.
#[cfg(feature = "gzip")]
fn decompression(config: &Config) -> Option<tower_http::decompression::DecompressionLayer> {
    Some(
        tower_http::decompression::DecompressionLayer::new()
            .no_br()
            .no_deflate()
            .no_zstd()
            .gzip(!config.disable_compression),
    )
}

/// Without the `gzip` feature no `Accept-Encoding` is sent: the server
/// answers uncompressed.
#[cfg(not(feature = "gzip"))]
fn decompression(_: &Config) -> Option<tower::layer::util::Identity> {
    None
}
