//! Answers the HTTP layer gives before a request reaches the router, made
//! into `Status` bodies like every other error: a request line longer than
//! the HTTP parser accepts (64 KiB) is 414 RequestURITooLong, oversized
//! headers 431. The parser writes those answers itself with an empty body
//! and then closes the connection, so the connection wrapper here replaces
//! such an answer, when it is the first thing written for a response, with
//! one carrying the `Status` (the server itself never answers 414 or 431).

use crate::error::ApiError;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;

/// A listener (plain TCP, or TLS whose streams carry plain HTTP once
/// decrypted) whose connections rewrite the HTTP layer's bodiless error
/// answers (see the module docs).
#[derive(Debug)]
pub struct StatusListener<L = TcpListener>(pub L);

impl<L: axum::serve::Listener> axum::serve::Listener for StatusListener<L> {
    type Io = StatusIo<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.0).await;
        (StatusIo::new(io), addr)
    }

    fn local_addr(&self) -> io::Result<L::Addr> {
        self.0.local_addr()
    }
}

/// One connection (see the module docs).
#[derive(Debug)]
pub struct StatusIo<T> {
    inner: T,
    /// A replacement answer being written, and how much of it is out.
    replacing: Option<(Vec<u8>, usize)>,
}

impl<T> StatusIo<T> {
    /// Wrap a connection.
    pub fn new(inner: T) -> Self {
        StatusIo {
            inner,
            replacing: None,
        }
    }
}

/// The full answer to send instead of `head`, if `head` is one of the HTTP
/// layer's own error answers.
pub fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let err = if head.starts_with(b"HTTP/1.1 414 ") {
        ApiError::new(
            414,
            "RequestURITooLong",
            "the request URI is too long: at most 65534 bytes are accepted",
        )
    } else if head.starts_with(b"HTTP/1.1 431 ") {
        ApiError::new(
            431,
            "RequestHeaderFieldsTooLarge",
            "the request headers are too large",
        )
    } else {
        return None;
    };
    let body = err.to_status().to_string();
    let reason = if err.code == 414 {
        "URI Too Long"
    } else {
        "Request Header Fields Too Large"
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        err.code,
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    Some(out)
}

impl<T: AsyncRead + Unpin> AsyncRead for StatusIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StatusIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.replacing.is_none()
            && let Some(r) = replacement(buf)
        {
            this.replacing = Some((r, 0));
        }
        let Some((bytes, off)) = &mut this.replacing else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        // Write the replacement; whatever the HTTP layer writes meanwhile
        // (its own answer) is swallowed. The connection closes after it.
        while *off < bytes.len() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &bytes[*off..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *off += n;
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn only_the_http_layers_own_answers_are_replaced() {
        assert!(replacement(b"HTTP/1.1 200 OK\r\n").is_none());
        assert!(replacement(b"HTTP/1.1 400 Bad Request\r\n").is_none());
        assert!(replacement(b"{\"HTTP/1.1 414 \"}").is_none());
        let r =
            String::from_utf8(replacement(b"HTTP/1.1 414 URI Too Long\r\n\r\n").unwrap()).unwrap();
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long\r\n"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let status: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (status["code"].as_u64(), status["reason"].as_str()),
            (Some(414), Some("RequestURITooLong"))
        );
    }

    #[tokio::test]
    async fn the_replacement_goes_out_and_the_original_is_swallowed() {
        let mut io = StatusIo::new(Vec::new());
        io.write_all(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        io.write_all(b"more").await.unwrap();
        let out = String::from_utf8(io.inner.clone()).unwrap();
        assert!(out.starts_with("HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json"));
        assert!(out.ends_with('}'), "{out}");
        let mut plain = StatusIo::new(Vec::new());
        plain.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        assert_eq!(plain.inner, b"HTTP/1.1 200 OK\r\n\r\n");
    }
}
