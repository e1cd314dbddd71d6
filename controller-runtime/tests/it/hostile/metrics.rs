//! Hostile input for the manager's secure metrics endpoint (HTTPS, every
//! scrape reviewed with a TokenReview and a SubjectAccessReview) against
//! envtest: bad, forged and huge tokens, a review API that errors or hangs
//! (envtest's fault injection), and a flood of distinct tokens against the
//! answer cache. Each is a clear 401 (or, when the API server cannot
//! answer, a 500 within the review timeout), never cached as a verdict;
//! the cache stays bounded, memory too, and a good scrape is answered
//! right after each.

use std::time::Duration;

use bytes::Bytes;
use controller_runtime::metrics::SecureMetrics;
use controller_runtime::rbac::Permissions;
use envtest::{FailureRule, TestEnv};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use super::{LONG, assert_peak_bounded, peak_rss_kib};
use crate::metrics_secure::{Scraper, manager, reader_token, reviews};

/// The review timeout under test.
const T: Duration = Duration::from_millis(500);

/// How many answers the cache keeps here, and how many distinct tokens
/// the flood sends (well beyond it).
const CAPACITY: usize = 128;
const FLOOD: usize = 1_000;

async fn good_scrape(scraper: &Scraper, token: &str) {
    let (status, body) = scraper.with_token(token).await;
    assert_eq!(status, 200, "a good scrape right after: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_and_failing_reviews_are_refused_and_a_good_scrape_follows() {
    let env = TestEnv::start().await.unwrap();
    // A TTL far beyond the test: only the capacity drops answers.
    let secure = SecureMetrics::new()
        .review_timeout(T)
        .auth_cache_ttl(Duration::from_secs(600))
        .auth_cache_capacity(CAPACITY);
    let (addr, stop) = manager(&env, Permissions::new().secure_metrics(), secure).await;
    let scraper = Scraper::new(addr, None);
    let token = reader_token(&env).await;
    let (status, body) = scraper.first(Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let before = peak_rss_kib();

    // Forged and unknown tokens: 401 with the review's error.
    for bad in [
        "not-a-token",
        // An unsigned JWT naming an admin.
        "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzeXN0ZW06YWRtaW4ifQ.",
        &format!("{token}x"),
    ] {
        let (status, body) = scraper.with_token(bad).await;
        assert_eq!(status, 401, "{bad}: {body}");
        good_scrape(&scraper, &token).await;
    }

    // A 20 KiB token: 401 at once, no review asked.
    let asked = reviews(&env, "tokenreviews");
    let (status, body) = scraper.with_token(&"t".repeat(20 * 1024)).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("longer than 16384 bytes"), "{body}");
    assert_eq!(reviews(&env, "tokenreviews"), asked);
    good_scrape(&scraper, &token).await;
    // A 1 MiB header: refused by the HTTP layer (431) or the connection
    // closed.
    let huge = format!("Bearer {}", "t".repeat(1 << 20));
    match scraper.get(Some(huge.as_bytes())).await {
        Ok((status, body)) => assert_eq!(status, 431, "{body}"),
        Err(closed) => eprintln!("a 1 MiB header: connection closed ({closed})"),
    }
    good_scrape(&scraper, &token).await;

    // The TokenReview fails: 500 saying so, not cached (the same token,
    // asked again, gets the API server's verdict).
    env.faults()
        .fail_next(FailureRule::new(1, 500).path_contains("tokenreviews"));
    let (status, body) = scraper.with_token("fresh-one").await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("TokenReview failed"), "{body}");
    assert_eq!(scraper.with_token("fresh-one").await.0, 401);
    good_scrape(&scraper, &token).await;

    // The API server hangs: a new token is a 500 within 5x the review
    // timeout; a cached one is still served.
    env.faults().pause();
    let start = tokio::time::Instant::now();
    let (status, body) = tokio::time::timeout(LONG, scraper.with_token("fresh-two"))
        .await
        .expect("a scrape while the review API hangs was never answered");
    let took = start.elapsed();
    good_scrape(&scraper, &token).await;
    env.faults().resume();
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("did not answer the review"), "{body}");
    assert!(took < 5 * T, "a hanging review answered after {took:?}");
    assert_eq!(scraper.with_token("fresh-two").await.0, 401);
    good_scrape(&scraper, &token).await;

    assert_peak_bounded("metrics tokens", before);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_tokens_keeps_the_cache_bounded() {
    let env = TestEnv::start().await.unwrap();
    let secure = SecureMetrics::new()
        .auth_cache_ttl(Duration::from_secs(600))
        .auth_cache_capacity(CAPACITY);
    let (addr, stop) = manager(&env, Permissions::new().secure_metrics(), secure).await;
    let scraper = Scraper::new(addr, None);
    let token = reader_token(&env).await;
    assert_eq!(scraper.first(Some(&token)).await.0, 200);
    // Cached: a second scrape asks no review.
    let asked = reviews(&env, "tokenreviews");
    good_scrape(&scraper, &token).await;
    assert_eq!(reviews(&env, "tokenreviews"), asked);
    let before = peak_rss_kib();

    // 1,000 distinct tokens on one kept-alive connection: each a 401.
    let tls = scraper.0.connect().await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    for i in 0..FLOOD {
        let req = http::Request::get("/metrics")
            .header("host", "localhost")
            .header("authorization", format!("Bearer flood-{i}"))
            .body(Full::<Bytes>::default())
            .unwrap();
        send.ready().await.unwrap();
        let resp = send.send_request(req).await.unwrap();
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        assert_eq!(status, 401, "token {i}");
    }
    assert_eq!(reviews(&env, "tokenreviews"), asked + FLOOD);

    // The cache kept at most its capacity: the good token's answer, the
    // oldest, was dropped (its TTL has not run out), so it is asked again.
    good_scrape(&scraper, &token).await;
    assert_eq!(reviews(&env, "tokenreviews"), asked + FLOOD + 1);
    assert_peak_bounded("metrics token flood", before);
    stop.cancel();
}
