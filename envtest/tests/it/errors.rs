//! Bad input: every error is a Status body and the server state survives.

use crate::{cm, raw, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_client::api::{Api, ListParams, PostParams};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn malformed_bodies_get_status_answers_and_leave_state_intact() {
    let env = TestEnv::builder()
        .max_body_bytes(64 * 1024)
        .start()
        .await
        .unwrap();
    let client = env.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("keep", &[], "1"))
        .await
        .unwrap();
    let json = Some("application/json");
    type Case<'a> = (&'a str, String, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "POST",
            CMS.into(),
            json,
            b"{not json".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            b"[1,2]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{"name":"x","namespace":"other"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            CMS.into(),
            json,
            br#"{"metadata":{"name":"x","labels":{"a":"bad value"}}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "POST",
            CMS.into(),
            json,
            format!("{}1{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            CMS.into(),
            json,
            vec![b' '; 100 * 1024],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "POST",
            CMS.into(),
            Some("text/plain"),
            br#"{"metadata":{"name":"x"}}"#.to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PATCH",
            format!("{CMS}/keep"),
            Some("application/x-unknown-patch"),
            b"{}".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "PUT",
            format!("{CMS}/keep"),
            json,
            br#"{"metadata":{"name":"other"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "POST",
            format!("{CMS}/keep"),
            json,
            b"{}".to_vec(),
            405,
            "MethodNotAllowed",
        ),
        (
            "GET",
            "/api/v1/nothings".into(),
            None,
            vec![],
            404,
            "NotFound",
        ),
        (
            "GET",
            format!("{CMS}?labelSelector=a%20in%20b"),
            None,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{CMS}?watch=true&resourceVersion=abc"),
            None,
            vec![],
            400,
            "BadRequest",
        ),
        (
            "GET",
            format!("{CMS}?watch=true&sendInitialEvents=true"),
            None,
            vec![],
            400,
            "BadRequest",
        ),
    ];
    for (method, path, ct, body, code, reason) in cases {
        let (got, v) = raw(&client, method, &path, ct, body).await;
        assert_eq!(got, code, "{method} {path}: {v}");
        assert_eq!(v["kind"], "Status", "{method} {path}: {v}");
        assert_eq!(v["code"], code);
        assert_eq!(v["reason"], reason, "{method} {path}: {v}");
        assert!(!v["message"].as_str().unwrap_or("").is_empty());
    }
    let (_, v) = raw(
        &client,
        "POST",
        CMS,
        json,
        br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
    )
    .await;
    assert_eq!(v["details"]["causes"][0]["field"], "metadata.name");
    let items = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(items.len(), 1, "state intact after bad input");
    assert_eq!(items[0].metadata.name.as_deref(), Some("keep"));
}

#[tokio::test]
async fn not_found_names_the_resource() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let e = status(api.get("ghost").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"ghost\" not found");
    assert_eq!(e.details.unwrap().name, "ghost");
}

#[tokio::test]
async fn a_url_too_long_for_the_http_layer_is_414_with_a_status() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = TestEnv::start().await.unwrap();
    let addr = env.base_url().trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // No client library sends this (they refuse URIs over 64 KiB), so speak HTTP.
    let request = format!(
        "GET {CMS}?labelSelector={} HTTP/1.1\r\nhost: {addr}\r\n\r\n",
        "a".repeat(100_000)
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(crate::WAIT, conn.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 414 "), "{head}");
    let st: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(st["kind"], "Status");
    assert_eq!(st["code"], 414);
    assert_eq!(st["reason"], "RequestURITooLong");
    // The server goes on answering.
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    api.list(&ListParams::default()).await.unwrap();
}

/// Read one HTTP/1.1 answer with a content-length body: (head, body).
async fn read_answer(conn: &mut tokio::net::TcpStream) -> (String, String) {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    loop {
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            if body.len() >= len {
                return (head.to_string(), body.to_string());
            }
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(crate::WAIT, conn.read(&mut chunk))
            .await
            .expect("no answer in time")
            .unwrap();
        assert!(n > 0, "connection closed before a full answer: {text}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn a_request_past_its_deadline_is_504_and_others_are_served() {
    use tokio::io::AsyncWriteExt;
    let env = TestEnv::builder()
        .request_timeout(std::time::Duration::from_millis(300))
        .start()
        .await
        .unwrap();
    let addr = env.base_url().trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // A body that never finishes arriving.
    let head = format!(
        "POST {CMS} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"metadata\":"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &cm("meanwhile", &[], "1"))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (head, body) = read_answer(&mut conn).await;
    assert!(head.starts_with("HTTP/1.1 504 "), "{head}");
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (st["code"].as_u64(), st["reason"].as_str()),
        (Some(504), Some("Timeout"))
    );
    assert!(started.elapsed() < crate::WAIT);
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}
