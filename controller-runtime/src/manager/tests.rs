use super::*;
use crate::error::BoxError;
use crate::healthz::HealthzError;
use crate::healthz::{Ping, check_fn};
use crate::leaderelection::LeaderElectionConfig;
use std::sync::atomic::AtomicUsize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A client for a server that is never contacted.
fn offline_client() -> Client {
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    Client::try_from(config).unwrap()
}

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[tokio::test]
async fn runs_once_and_stops_runnables_on_shutdown() {
    let mgr = Manager::builder(offline_client()).build().await.unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    for leader_only in [true, false] {
        let (started, stopped) = (Arc::clone(&started), Arc::clone(&stopped));
        mgr.add_runnable(runnable_fn(
            "r",
            leader_only,
            move |stop: CancellationToken| {
                let (started, stopped) = (Arc::clone(&started), Arc::clone(&stopped));
                async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    stop.cancelled().await;
                    stopped.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            },
        ));
    }
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, shutdown) = (mgr.clone(), shutdown.clone());
        async move { mgr.run(shutdown).await }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "runnables did not start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(matches!(
        mgr.run(CancellationToken::new()).await,
        Err(ManagerError::AlreadyStarted)
    ));
    assert_eq!(stopped.load(Ordering::SeqCst), 0);
    shutdown.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(stopped.load(Ordering::SeqCst), 2);
}

/// Runnables added while the manager runs start at once and are stopped
/// with the rest; one added after `run` returned never runs.
#[tokio::test(start_paused = true)]
async fn runnables_added_while_running_start_at_once_and_stop_with_the_rest() {
    let mgr = Manager::builder(offline_client()).build().await.unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicUsize::new(0));
    let counting = |leader_only: bool| {
        let (started, stopped) = (Arc::clone(&started), Arc::clone(&stopped));
        runnable_fn("late", leader_only, move |stop: CancellationToken| {
            let (started, stopped) = (Arc::clone(&started), Arc::clone(&stopped));
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                stop.cancelled().await;
                stopped.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        })
    };
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, shutdown) = (mgr.clone(), shutdown.clone());
        async move { mgr.run(shutdown).await }
    });
    while !mgr.cache().is_started() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    mgr.add_runnable(counting(true));
    mgr.add_runnable(counting(false));
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "late runnables did not start");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    shutdown.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(stopped.load(Ordering::SeqCst), 2);
    mgr.add_runnable(counting(false));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "added after run returned"
    );
}

#[tokio::test]
async fn a_runnable_that_ignores_stop_is_aborted_after_the_grace_period() {
    let mgr = Manager::builder(offline_client())
        .graceful_shutdown_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    mgr.add_runnable(runnable_fn("stubborn", true, |_stop| async {
        std::future::pending::<()>().await;
        Ok(())
    }));
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let started = Instant::now();
    let err = mgr.run(shutdown).await.unwrap_err();
    assert!(
        matches!(&err, ManagerError::ShutdownTimeout { timeout, .. } if *timeout == Duration::from_millis(200)),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_failing_runnable_stops_the_manager_with_its_name() {
    let mgr = Manager::builder(offline_client()).build().await.unwrap();
    let other_stopped = Arc::new(AtomicBool::new(false));
    mgr.add_runnable(runnable_fn("bad", false, |_stop| async {
        Err::<(), BoxError>("boom".into())
    }));
    let flag = Arc::clone(&other_stopped);
    mgr.add_runnable(runnable_fn("good", true, move |stop: CancellationToken| {
        let flag = Arc::clone(&flag);
        async move {
            stop.cancelled().await;
            flag.store(true, Ordering::SeqCst);
            Ok(())
        }
    }));
    let err = tokio::time::timeout(Duration::from_secs(10), mgr.run(CancellationToken::new()))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.to_string(), "runnable bad failed: boom");
    assert!(
        other_stopped.load(Ordering::SeqCst),
        "other runnables are stopped"
    );
}

#[tokio::test]
async fn serves_health_and_metrics_on_bound_ports() {
    let mgr = Manager::builder(offline_client())
        .health_addr(local())
        .metrics_addr(local())
        .build()
        .await
        .unwrap();
    let health = mgr.health_addr().unwrap();
    let metrics = mgr.metrics_addr().unwrap();
    assert_ne!(health.port(), 0);
    assert_ne!(metrics.port(), 0);
    mgr.add_readyz_check("custom", check_fn(|| Err("warming up".into())))
        .unwrap();
    assert!(matches!(
        mgr.add_readyz_check("custom", Ping),
        Err(ManagerError::Healthz(HealthzError::Duplicate(_)))
    ));
    // Before start the informers are not running: not ready.
    let report = mgr.readyz_checks().run(&[], true).render("readyz");
    assert!(
        report.contains("[-]caches synced failed: informers not started"),
        "{report}"
    );

    mgr.metrics()
        .controller_vecs()
        .reconcile_total
        .with_label_values(&["probe", "success"]);
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (mgr, shutdown) = (mgr.clone(), shutdown.clone());
        async move { mgr.run(shutdown).await }
    });
    assert_eq!(http_get(health, "/healthz").await, (200, "ok".to_string()));
    let (status, body) = http_get(health, "/readyz?verbose").await;
    assert_eq!(status, 500);
    assert_eq!(
        body,
        "[+]caches synced ok\n[-]custom failed: warming up\nreadyz check failed\n"
    );
    let (status, body) = http_get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        body.contains(
            r#"controller_runtime_reconcile_total{controller="probe",result="success"} 0"#
        ),
        "{body}"
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
    assert!(
        tokio::net::TcpStream::connect(health).await.is_err(),
        "server stopped"
    );
}

#[tokio::test]
async fn binding_a_taken_port_is_an_error() {
    let taken = tokio::net::TcpListener::bind(local()).await.unwrap();
    let addr = taken.local_addr().unwrap();
    let err = Manager::builder(offline_client())
        .metrics_addr(addr)
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ManagerError::Bind {
                what: "metrics",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("cannot bind the metrics server to {addr}: "))
    );
}

#[tokio::test]
async fn invalid_leader_election_config_is_rejected_at_build() {
    let config =
        LeaderElectionConfig::new("default", "lease", "me").renew_deadline(Duration::from_secs(20));
    let err = Manager::builder(offline_client())
        .leader_election(config)
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, ManagerError::LeaderElection(_)), "{err}");
}
