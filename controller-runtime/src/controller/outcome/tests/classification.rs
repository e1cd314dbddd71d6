//! Rules of the reconcile module that the first tests left unchecked (found
//! by `cargo mutants`): which outcomes count as errors and panics, the
//! source chain below a terminal error, the retry count a context carries,
//! the terminal decision of the typed form's error, and what a typed
//! reconciler's context is scoped to.

use std::error::Error as StdError;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};

use super::*;
use crate::cache::{Cache, CacheError};
use crate::events::{ApiEventSink, EventRecorder, RecorderConfig};
use crate::reconcile::ObjectContext;
use crate::reconcile::adapter::ObjectError;

/// Only failures count in `controller_runtime_reconcile_errors_total`, and
/// only a panic in `controller_runtime_reconcile_panics_total`.
#[tokio::test(start_paused = true)]
async fn only_failures_are_errors_and_only_panics_are_panics() {
    for mode in ["done", "requeue", "after"] {
        let out = outcome(mode, None).await;
        assert!(!out.is_error(), "{mode}: {out:?} is not an error");
        assert!(!out.is_terminal(), "{mode}: {out:?} is not terminal");
        assert!(!out.is_panic(), "{mode}: {out:?} is not a panic");
    }
    for mode in ["error", "terminal"] {
        let out = outcome(mode, None).await;
        assert!(out.is_error() && !out.is_panic(), "{mode}: {out:?}");
    }
    let out = outcome("slow", Some(Duration::from_secs(1))).await;
    assert!(out.is_error(), "a timeout is an error: {out:?}");
    assert!(!out.is_panic() && !out.is_terminal(), "{out:?}");
    assert!(outcome("panic", None).await.is_panic());
}

#[derive(Debug, thiserror::Error)]
#[error("applying the spec")]
struct Apply(#[source] std::io::Error);

/// Wrapping an error as terminal keeps what lies below it: the chain reads
/// the terminal mark, the wrapped error, then the wrapped error's own cause.
#[test]
fn a_terminal_error_keeps_the_wrapped_errors_source_chain() {
    let err = TerminalError::new(Apply(std::io::Error::other("disk full")));
    assert_eq!(err.inner().to_string(), "applying the spec");
    let mut chain = Vec::new();
    let mut current: Option<&(dyn StdError + 'static)> = Some(&err);
    while let Some(e) = current {
        chain.push(e.to_string());
        current = e.source();
    }
    assert_eq!(
        chain,
        [
            "terminal error: applying the spec",
            "applying the spec",
            "disk full"
        ]
    );
}

#[test]
fn a_context_carries_its_retry_count() {
    let ctx = CallInfo::new("c", 4).with_retries(3);
    assert_eq!(ctx.retries, 3);
    assert_eq!(ctx.reconcile_id, 4);
    assert_eq!(&*ctx.controller, "c");
    assert_eq!(CallInfo::new("c", 4).retries, 0);
}

/// A typed reconciler's error decides for itself; a failed cache read
/// before the call is always retried.
#[test]
fn the_typed_forms_error_is_terminal_only_when_the_reconciler_says_so() {
    let terminal = ObjectError::<TerminalError>::Reconcile(TerminalError::new("bad spec"));
    assert!(terminal.is_terminal());
    let flaky = ObjectError::<std::io::Error>::Reconcile(std::io::Error::other("timeout"));
    assert!(!flaky.is_terminal());
    let cache = ObjectError::<TerminalError>::Cache(CacheError::NotStarted {
        kind: "ConfigMap".into(),
    });
    assert!(!cache.is_terminal());
}

/// A client for a server that is never contacted.
fn offline_client() -> kube_client::Client {
    let config = kube_client::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube_client::Client::try_from(config).unwrap()
}

fn context_for<K>(req: Request) -> ObjectContext<K>
where
    K: crate::object::Object,
    K::Scope: crate::object::ScopeInfo,
{
    let client = offline_client();
    let factory =
        informer_core::factory::SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let cache = Cache::new(factory, Duration::from_secs(1));
    let (recorder, _writer) = EventRecorder::new(
        ApiEventSink::new(client.clone()),
        RecorderConfig::new("test", "test-1"),
    );
    ObjectContext::new(req, CallInfo::new("test", 7), cache, client, recorder)
}

/// The context of a typed reconcile is scoped to the requested object: its
/// namespace, an `Api` there for the kind and for any other kind, and the
/// per-call information; cluster-scoped kinds get no namespace.
#[tokio::test]
async fn a_typed_context_is_scoped_to_the_requested_object() {
    let req = Request::new(Some("team-a"), "web");
    let ctx = context_for::<ConfigMap>(req.clone());
    assert_eq!(ctx.request(), &req);
    assert_eq!(ctx.namespace(), Some("team-a"));
    assert_eq!(ctx.call().reconcile_id, 7);
    assert_eq!(
        ctx.api().resource_url(),
        "/api/v1/namespaces/team-a/configmaps"
    );
    assert_eq!(
        ctx.api_for::<Secret>().resource_url(),
        "/api/v1/namespaces/team-a/secrets"
    );
    let shown = format!("{ctx:?}");
    assert!(
        shown.starts_with("ObjectContext {")
            && shown.contains("name: \"web\"")
            && shown.contains("/api/v1/namespaces/team-a/configmaps"),
        "{shown}"
    );

    let cluster = context_for::<Namespace>(Request::new(None::<String>, "team-a"));
    assert_eq!(cluster.namespace(), None);
    assert_eq!(cluster.api().resource_url(), "/api/v1/namespaces");
}
