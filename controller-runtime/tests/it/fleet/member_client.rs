//! Member clients with a capped HTTP/1 read buffer
//! (`MemberClientOptions::read_buffer`), observed from outside: a capped
//! client lists and watches megabytes over TLS with a token; a response
//! whose headers do not fit in the cap fails while the same response fits
//! in hyper's own cap (the cap is hyper's read buffer: a head must fit in
//! it); and the read timeout still ends a request to a server that never
//! answers.

use std::collections::BTreeMap;
use std::time::Duration;

use controller_runtime::cluster::MemberClientOptions;
use envtest::TestEnv;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube_client::{Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::LONG;

/// hyper's smallest cap: the most a read may take with it.
const SMALL: usize = 8 * 1024;

/// A ConfigMap of `bytes` of data.
fn big(ns: &str, name: &str, bytes: usize) -> ConfigMap {
    let mut cm = crate::config_map(ns, name);
    cm.data = Some(BTreeMap::from([("blob".to_string(), "x".repeat(bytes))]));
    cm
}

fn blob_len(cm: &ConfigMap) -> usize {
    cm.data
        .as_ref()
        .and_then(|d| d.get("blob"))
        .map_or(0, String::len)
}

#[tokio::test]
async fn a_capped_member_client_lists_and_watches_megabytes() {
    if envtest::skip_on_existing_cluster("an in-process TLS API server") {
        return;
    }
    let env = TestEnv::builder().tls().start().await.unwrap();
    let ns = env.namespace().to_string();
    let writer: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    const OBJECTS: usize = 24;
    const BLOB: usize = 256 * 1024;
    for i in 0..OBJECTS {
        writer
            .create(&PostParams::default(), &big(&ns, &format!("cm-{i}"), BLOB))
            .await
            .unwrap();
    }
    let client = MemberClientOptions::new()
        .read_buffer(Some(SMALL))
        .client_from_config("m", env.client_config())
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);
    // About 6 MB in one response, through reads of at most 8 KiB.
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), OBJECTS);
    assert!(list.items.iter().all(|cm| blob_len(cm) == BLOB));

    let rv = list.metadata.resource_version.unwrap();
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    writer
        .create(&PostParams::default(), &big(&ns, "late", 2 * BLOB))
        .await
        .unwrap();
    let added = tokio::time::timeout(LONG, async {
        while let Some(event) = events.try_next().await.unwrap() {
            if let WatchEvent::Added(cm) = event {
                return cm;
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("the watch delivers the new object");
    assert_eq!(added.metadata.name.as_deref(), Some("late"));
    assert_eq!(blob_len(&added), 2 * BLOB);
}

/// A one-connection-at-a-time HTTP/1.1 server answering every request
/// with `head_pad` bytes of one extra header and a small JSON body, or,
/// with `answer` false, reading the request and never answering.
async fn raw_server(head_pad: usize, answer: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            if !answer {
                held.push(socket);
                continue;
            }
            let body = br#"{"major":"1","minor":"34","gitVersion":"v1.34.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-pad: {}\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                "p".repeat(head_pad),
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body).await;
            let _ = socket.shutdown().await;
        }
    });
    url
}

fn member(url: &str, options: MemberClientOptions) -> Client {
    options
        .client_from_config("m", Config::new(url.parse().unwrap()))
        .unwrap()
}

#[tokio::test]
async fn a_head_larger_than_the_cap_fails_and_fits_in_hyper_s_own() {
    // 20 KiB of headers: over an 8 KiB cap, under 64 KiB and hyper's 408 KiB.
    let url = raw_server(20 * 1024, true).await;
    let capped = member(&url, MemberClientOptions::new().read_buffer(Some(SMALL)));
    let error = capped
        .apiserver_version()
        .await
        .expect_err("the head does not fit in 8 KiB");
    let chain = format!("{error:?}");
    assert!(
        chain.contains("TooLarge") || chain.contains("too large"),
        "{chain}"
    );
    for options in [
        MemberClientOptions::new(),
        MemberClientOptions::new().read_buffer(None),
    ] {
        let version = member(&url, options).apiserver_version().await.unwrap();
        assert_eq!(version.minor, "34");
    }
}

#[tokio::test]
async fn the_read_timeout_ends_a_request_nobody_answers() {
    let url = raw_server(0, false).await;
    let read_timeout = Duration::from_millis(500);
    let client = member(
        &url,
        MemberClientOptions::new().read_timeout(Some(read_timeout)),
    );
    let answer = tokio::time::timeout(5 * read_timeout, client.apiserver_version())
        .await
        .expect("the read timeout ends the request first");
    let chain = format!("{:?}", answer.expect_err("nobody answers"));
    assert!(chain.contains("TimedOut"), "{chain}");
}
