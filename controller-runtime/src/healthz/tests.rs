use super::*;
use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

fn failing(reason: &'static str) -> impl HealthCheck {
    check_fn(move || Err(reason.to_string()))
}

async fn get(router: &Router, uri: &str) -> (StatusCode, String) {
    let resp = router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[test]
fn empty_set_is_a_passing_ping() {
    let report = Checks::new().run(&[], true);
    assert!(report.healthy());
    assert_eq!(
        report.render("healthz"),
        "[+]ping ok\nhealthz check passed\n"
    );
}

#[test]
fn all_passing_is_ok_unless_verbose() {
    let checks = Checks::new();
    checks.add("b", Ping).unwrap();
    checks.add("a", Ping).unwrap();
    assert_eq!(checks.run(&[], false).render("healthz"), "ok");
    assert_eq!(
        checks.run(&[], true).render("healthz"),
        "[+]a ok\n[+]b ok\nhealthz check passed\n"
    );
}

#[test]
fn a_failure_is_always_verbose_with_the_reason() {
    let checks = Checks::new();
    checks
        .add("caches synced", failing("informer Pod not synced"))
        .unwrap();
    checks.add("ping", Ping).unwrap();
    let report = checks.run(&[], false);
    assert!(!report.healthy());
    assert_eq!(report.failed(), vec!["caches synced"]);
    assert_eq!(report.status_code(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        report.render("readyz"),
        "[-]caches synced failed: informer Pod not synced\n[+]ping ok\nreadyz check failed\n"
    );
}

#[test]
fn excluded_checks_are_not_run_and_unknown_excludes_warn() {
    let checks = Checks::new();
    checks.add("bad", failing("x")).unwrap();
    let report = checks.run(&["bad".into(), "nope".into()], false);
    assert!(report.healthy());
    assert_eq!(
        report.render("healthz"),
        "ok",
        "a passing, non-verbose report is terse even with excludes"
    );
    let report = checks.run(&["bad".into(), "nope".into()], true);
    assert_eq!(
        report.render("healthz"),
        "[+]bad excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"
    );
}

#[test]
fn names_are_validated_and_unique() {
    let checks = Checks::new();
    checks.add("ok", Ping).unwrap();
    assert!(matches!(
        checks.add("ok", Ping),
        Err(HealthzError::Duplicate(_))
    ));
    assert!(matches!(
        checks.add("", Ping),
        Err(HealthzError::InvalidName(_))
    ));
    assert!(matches!(
        checks.add("a/b", Ping),
        Err(HealthzError::InvalidName(_))
    ));
    assert_eq!(checks.names(), vec!["ok"]);
}

#[test]
fn query_parsing() {
    assert_eq!(parse_query(None), (false, vec![]));
    assert_eq!(parse_query(Some("verbose")), (true, vec![]));
    assert_eq!(
        parse_query(Some("verbose=1&exclude=a")),
        (true, vec!["a".to_string()])
    );
    assert_eq!(
        parse_query(Some("exclude=caches%20synced&exclude=b+c&exclude=")),
        (false, vec!["caches synced".to_string(), "b c".to_string()])
    );
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%zz"), "%zz");
}

#[tokio::test]
async fn router_serves_both_endpoints() {
    let healthz = Checks::new();
    healthz.add("ping", Ping).unwrap();
    let readyz = Checks::new();
    readyz.add("caches synced", failing("not yet")).unwrap();
    let router = router(healthz, readyz.clone());

    assert_eq!(
        get(&router, "/healthz").await,
        (StatusCode::OK, "ok".to_string())
    );
    assert_eq!(
        get(&router, "/healthz?verbose").await,
        (
            StatusCode::OK,
            "[+]ping ok\nhealthz check passed\n".to_string()
        )
    );
    assert_eq!(
        get(&router, "/readyz").await,
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]caches synced failed: not yet\nreadyz check failed\n".to_string()
        )
    );
    assert_eq!(
        get(&router, "/readyz/caches%20synced").await,
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal server error: not yet\n".to_string()
        )
    );
    assert_eq!(
        get(&router, "/healthz/ping").await,
        (StatusCode::OK, "ok".to_string())
    );
    assert_eq!(
        get(&router, "/readyz/missing").await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&router, "/readyz?exclude=caches%20synced").await,
        (StatusCode::OK, "ok".to_string())
    );

    // Checks added after the router was built are served.
    readyz.add("leadership settled", Ping).unwrap();
    let (status, body) = get(&router, "/readyz?verbose").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("[+]leadership settled ok\n"), "{body}");
}

/// A check that blocks its thread must not stall the runtime that serves
/// it: on a one-thread runtime, the task that unblocks the check runs only
/// if the check is off the runtime's thread. (Run on the runtime, the check
/// waits out its hang guard and fails.)
#[tokio::test(flavor = "current_thread")]
async fn a_check_that_blocks_its_thread_does_not_stall_the_runtime() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let probing = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicBool::new(false));
    let healthz = Checks::new();
    healthz
        .add(
            "blocking",
            check_fn({
                let (probing, released) = (Arc::clone(&probing), Arc::clone(&released));
                move || {
                    probing.store(true, Ordering::SeqCst);
                    // A hang guard only: the verdict is whether `released`
                    // was set, not how long that took.
                    let since = std::time::Instant::now();
                    while !released.load(Ordering::SeqCst) {
                        if since.elapsed() > std::time::Duration::from_secs(20) {
                            return Err("the runtime stalled behind this check".to_string());
                        }
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    Ok(())
                }
            }),
        )
        .unwrap();
    let router = router(healthz, Checks::new());
    let releaser = tokio::spawn(async move {
        while !probing.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        released.store(true, Ordering::SeqCst);
    });
    assert_eq!(
        get(&router, "/healthz/blocking").await,
        (StatusCode::OK, "ok".to_string())
    );
    releaser.await.unwrap();
}
