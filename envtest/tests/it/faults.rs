//! Fault injection and the request log.

use crate::{WAIT, cm, status};
use envtest::{FailureRule, TestEnv};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use std::time::Duration;

#[tokio::test]
async fn fail_next_injects_statuses_and_the_log_records_them() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    env.faults().fail_next(
        FailureRule::new(2, 429)
            .method(http::Method::GET)
            .path_contains("configmaps")
            .retry_after(3),
    );
    // A POST does not match the rule.
    api.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    for _ in 0..2 {
        let e = status(api.list(&ListParams::default()).await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
        assert_eq!(e.details.unwrap().retry_after_seconds, 3);
    }
    api.list(&ListParams::default()).await.unwrap();
    for (code, reason) in [
        (500, "InternalError"),
        (409, "Conflict"),
        (504, "Timeout"),
        (410, "Expired"),
    ] {
        env.faults().fail_next(FailureRule::new(1, code));
        let e = status(api.get("a").await.unwrap_err());
        assert_eq!((e.code, e.reason.as_str()), (code, reason));
    }
    let log = env.request_log();
    let statuses: Vec<u16> = log
        .iter()
        .filter(|r| r.path.ends_with("/configmaps"))
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, vec![201, 429, 429, 200]);
    assert!(log.iter().all(|r| !r.is_watch()));
}

#[tokio::test]
async fn retry_after_header_is_sent_with_429() {
    let env = TestEnv::start().await.unwrap();
    env.faults()
        .fail_next(FailureRule::new(1, 429).retry_after(7));
    let req = http::Request::get("/api/v1/namespaces")
        .body(kube_client::client::Body::empty())
        .unwrap();
    let resp = env.client().send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers().get(http::header::RETRY_AFTER).unwrap(), "7");
}

#[tokio::test]
async fn drop_watches_and_compact_force_a_relist() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let rv = c.metadata.resource_version.unwrap();
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    env.faults().drop_watches();
    let end = tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watch not dropped");
    assert!(end.is_none());
    // A new watch still works after a drop.
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    assert!(matches!(
        tokio::time::timeout(WAIT, w.next()).await.unwrap(),
        Some(Ok(WatchEvent::Added(_)))
    ));
    env.faults().compact();
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(WAIT, w.next()).await.unwrap() {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    let log = env.request_log();
    assert_eq!(log.iter().filter(|r| r.is_watch()).count(), 3);
}

#[tokio::test]
async fn latency_and_pause_hold_requests() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    env.faults().set_latency(Duration::from_millis(200));
    let t = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200));
    env.faults().set_latency(Duration::ZERO);

    env.faults().pause();
    let api2 = api.clone();
    let mut pending = tokio::spawn(async move {
        api2.list(&ListParams::default())
            .await
            .map(|l| l.items.len())
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut pending)
            .await
            .is_err(),
        "paused requests wait"
    );
    env.faults().resume();
    assert_eq!(
        tokio::time::timeout(WAIT, pending)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_slow_watcher_never_blocks_writers_and_is_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = TestEnv::builder().watch_buffer(16).start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let rv = env.current_revision();
    // A raw watch connection with a tiny receive buffer that is not read
    // while the writes happen.
    let addr: std::net::SocketAddr = env
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut conn = sock.connect(addr).await.unwrap();
    let req = format!(
        "GET /api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv} HTTP/1.1\r\nHost: envtest\r\n\r\n"
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let writes = 200;
    let big = "x".repeat(64 * 1024);
    let writing = async {
        for i in 0..writes {
            api.create(&PostParams::default(), &cm(&format!("c{i}"), &[], &big))
                .await
                .unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(60), writing)
        .await
        .expect("writers were blocked by a slow watcher");
    // Now read: the stream ends (final chunk) before all events arrived.
    let mut body = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let read_all = async {
        loop {
            let n = conn.read(&mut buf).await.unwrap();
            body.extend_from_slice(&buf[..n]);
            if n == 0 || body.ends_with(b"\r\n0\r\n\r\n") {
                break;
            }
        }
    };
    tokio::time::timeout(WAIT, read_all)
        .await
        .expect("slow watcher was not closed");
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        &text[..text.len().min(200)]
    );
    let seen = text.matches("\"type\":\"ADDED\"").count();
    assert!(
        seen < writes,
        "a watcher 16 events behind should have been closed, saw {seen}"
    );
}

#[tokio::test]
async fn dropping_the_env_stops_the_server() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut w = api
        .watch(&WatchParams::default().disable_bookmarks().timeout(60), "0")
        .await
        .unwrap()
        .boxed();
    drop(env);
    let end = tokio::time::timeout(WAIT, w.next())
        .await
        .expect("open watch not closed on drop");
    assert!(end.is_none_or(|e| e.is_err()));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        // The listener closes once graceful shutdown completes.
        match api.list(&ListParams::default()).await {
            Err(kube_client::Error::Api(_)) | Ok(_) => {}
            Err(_) => break,
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "server still answering after drop"
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn bearer_token_is_required_when_configured() {
    let env = TestEnv::builder()
        .bearer_token("s3cret")
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    api.list(&ListParams::default()).await.unwrap();
    // The kubeconfig carries the token too.
    assert!(env.kubeconfig_yaml().contains("token: \"s3cret\""));
    let kc = env.kubeconfig();
    let cfg = kube_client::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let from_kc: Api<ConfigMap> =
        Api::default_namespaced(kube_client::Client::try_from(cfg).unwrap());
    from_kc.list(&ListParams::default()).await.unwrap();
    // Without it: 401 with a Status body.
    let mut anon = kube_client::Config::new(env.base_url().parse().unwrap());
    anon.default_retry = false;
    let anon: Api<ConfigMap> =
        Api::default_namespaced(kube_client::Client::try_from(anon).unwrap());
    let e = status(anon.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
    assert_eq!(env.request_log().last().unwrap().status, 401);
}
