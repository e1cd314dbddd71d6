//! The webhook server over real TLS, fed real AdmissionReview bodies: a
//! validator's denial with its message and field causes, warnings, a
//! defaulter's patch, `dryRun` and the user reaching the handler, every kind
//! of bad input answered with a message and counted, a panicking handler
//! that leaves the server serving, and a graceful shutdown that finishes the
//! review in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use controller_runtime::webhook::{
    AdmissionContext, Defaulter, Denial, Validator, Warnings, mutate_path, validate_path,
};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::webhook_client::start;

/// An `admission.k8s.io/v1` AdmissionReview for a ConfigMap.
pub fn review(operation: &str, object: Option<Value>, old: Option<Value>, dry_run: bool) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "settings",
            "namespace": "team-a",
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": dry_run,
        }
    })
}

pub fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "settings", "namespace": "team-a"}, "data": data})
}

/// Refuses a `mode` other than `fast`/`slow` (with a field cause), warns
/// on `slow`, forbids deleting a `locked` map, and panics on `boom`.
pub struct ModeRules {
    seen: Seen,
}

fn mode(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get("mode").map(String::as_str)
}

impl Validator<ConfigMap> for ModeRules {
    async fn validate_create(
        &self,
        cm: &ConfigMap,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.seen.lock().push((
            ctx.user_info.username.clone().unwrap_or_default(),
            ctx.dry_run,
        ));
        match mode(cm) {
            Some("boom") => panic!("the validator exploded"),
            Some("fast") | None => Ok(vec![]),
            Some("slow") => Ok(vec!["slow mode is deprecated".into()]),
            Some(other) => Err(Denial::new(format!("mode {other:?} is not supported"))
                .field("data.mode", "must be fast or slow")),
        }
    }

    async fn validate_update(
        &self,
        old: &ConfigMap,
        new: &ConfigMap,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        if mode(old) == Some("fast") && mode(new) == Some("slow") {
            return Err(Denial::new("cannot slow down a fast map"));
        }
        self.validate_create(new, ctx).await
    }

    async fn validate_delete(
        &self,
        cm: &ConfigMap,
        _: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        if cm.data.as_ref().is_some_and(|d| d.contains_key("locked")) {
            return Err(Denial::new("the map is locked"));
        }
        Ok(vec![])
    }
}

/// Sets `mode: fast` when missing and a `defaulted` label.
pub struct ModeDefaults;

impl Defaulter<ConfigMap> for ModeDefaults {
    async fn default(&self, cm: &mut ConfigMap, _: &AdmissionContext) -> Result<(), Denial> {
        cm.data
            .get_or_insert_default()
            .entry("mode".into())
            .or_insert_with(|| "fast".into());
        cm.metadata
            .labels
            .get_or_insert_default()
            .insert("defaulted".into(), "true".into());
        Ok(())
    }
}

/// Who asked and whether it was a dry run, per review the validator saw.
pub type Seen = Arc<parking_lot::Mutex<Vec<(String, bool)>>>;

pub fn rules() -> (ModeRules, Seen) {
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    (ModeRules { seen: seen.clone() }, seen)
}

fn response(body: &Value) -> &Value {
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1", "{body}");
    assert_eq!(body["kind"], "AdmissionReview", "{body}");
    let resp = &body["response"];
    assert_eq!(
        resp["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002",
        "{body}"
    );
    resp
}

#[tokio::test]
async fn a_validator_allows_warns_and_denies_with_message_and_field_causes() {
    let (v, seen) = rules();
    let run = start(|s| s.validator::<ConfigMap, _>(v).unwrap()).await;
    let path = validate_path::<ConfigMap>();
    assert_eq!(path, "/validate--v1-configmap");

    let (status, body) = run
        .client
        .review(
            &path,
            &review("CREATE", Some(cm(json!({"mode": "fast"}))), None, false),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(response(&body)["allowed"], true, "{body}");

    let (_, body) = run
        .client
        .review(
            &path,
            &review("CREATE", Some(cm(json!({"mode": "slow"}))), None, true),
        )
        .await;
    let resp = response(&body);
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["warnings"], json!(["slow mode is deprecated"]));

    let (_, body) = run
        .client
        .review(
            &path,
            &review("CREATE", Some(cm(json!({"mode": "turbo"}))), None, false),
        )
        .await;
    let resp = response(&body);
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["message"], "mode \"turbo\" is not supported");
    assert_eq!(resp["status"]["code"], 422);
    assert_eq!(resp["status"]["reason"], "Invalid");
    assert_eq!(
        resp["status"]["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "message": "must be fast or slow", "field": "data.mode"}])
    );

    // An update sees the old and the new object.
    let (_, body) = run
        .client
        .review(
            &path,
            &review(
                "UPDATE",
                Some(cm(json!({"mode": "slow"}))),
                Some(cm(json!({"mode": "fast"}))),
                false,
            ),
        )
        .await;
    let resp = response(&body);
    assert_eq!(resp["allowed"], false);
    assert_eq!(resp["status"]["message"], "cannot slow down a fast map");
    assert_eq!(resp["status"]["code"], 403);

    let (_, body) = run
        .client
        .review(
            &path,
            &review("DELETE", None, Some(cm(json!({"locked": "yes"}))), false),
        )
        .await;
    assert_eq!(response(&body)["status"]["message"], "the map is locked");

    // The user and dryRun reached the handler.
    assert_eq!(
        seen.lock().clone(),
        [
            ("alice".to_owned(), false),
            ("alice".to_owned(), true),
            ("alice".to_owned(), false)
        ]
    );
    assert_eq!(run.metrics.requests(&path, 200), 5);
    assert_eq!(run.metrics.in_flight(&path), 0);
}

#[tokio::test]
async fn a_defaulter_answers_with_the_json_patch_of_its_changes() {
    let run = start(|s| s.defaulter::<ConfigMap, _>(ModeDefaults).unwrap()).await;
    let path = mutate_path::<ConfigMap>();
    let mut object = cm(json!({"other": "x"}));
    object["metadata"]["annotations"] = json!({"kept": "as is"});
    let (status, body) = run
        .client
        .review(&path, &review("CREATE", Some(object.clone()), None, false))
        .await;
    assert_eq!(status, 200);
    let resp = response(&body);
    assert_eq!(resp["allowed"], true);
    assert_eq!(resp["patchType"], "JSONPatch");
    use base64::Engine as _;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(resp["patch"].as_str().unwrap())
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object["data"], json!({"other": "x", "mode": "fast"}));
    assert_eq!(object["metadata"]["labels"], json!({"defaulted": "true"}));
    assert_eq!(object["metadata"]["annotations"], json!({"kept": "as is"}));

    // Nothing to change: no patch.
    let mut done = cm(json!({"mode": "slow"}));
    done["metadata"]["labels"] = json!({"defaulted": "true"});
    let (_, body) = run
        .client
        .review(&path, &review("CREATE", Some(done), None, false))
        .await;
    assert!(response(&body).get("patch").is_none(), "{body}");
}

#[tokio::test]
async fn bad_input_is_answered_with_a_message_counted_and_the_server_keeps_serving() {
    let (v, _) = rules();
    let run = start(|s| {
        s.validator::<ConfigMap, _>(v)
            .unwrap()
            .max_body_bytes(16 * 1024)
    })
    .await;
    let path = validate_path::<ConfigMap>();
    let good = review("CREATE", Some(cm(json!({"mode": "fast"}))), None, false);

    let (status, body) = run
        .client
        .post(&path, "application/json", b"{\"apiVersion\": ".to_vec())
        .await
        .unwrap();
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&body).contains("malformed JSON"),
        "{body:?}"
    );

    let mut v1beta1 = good.clone();
    v1beta1["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, body) = run.client.review(&path, &v1beta1).await;
    assert_eq!(status, 400);
    assert!(
        body.as_str()
            .unwrap()
            .contains("expected a admission.k8s.io/v1 AdmissionReview"),
        "{body}"
    );

    let mut conversion = good.clone();
    conversion["kind"] = json!("ConversionReview");
    assert_eq!(run.client.review(&path, &conversion).await.0, 400);

    let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    let (status, body) = run.client.review(&path, &no_request).await;
    assert_eq!(
        (status, body.as_str().unwrap()),
        (400, "the AdmissionReview has no request")
    );

    let huge = review(
        "CREATE",
        Some(cm(json!({"mode": "x".repeat(64 * 1024)}))),
        None,
        false,
    );
    let (status, body) = run.client.review(&path, &huge).await;
    assert_eq!(status, 413);
    assert!(
        body.as_str().unwrap().contains("limit 16384 bytes"),
        "{body}"
    );

    let (status, _) = run
        .client
        .post(&path, "text/plain", serde_json::to_vec(&good).unwrap())
        .await
        .unwrap();
    assert_eq!(status, 415);

    // An object that is not a ConfigMap: a 400 in the review, with the reason.
    let (status, body) = run.client.review(&path, &review("CREATE", Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"mode": 7}})), None, false)).await;
    assert_eq!(status, 200);
    let resp = response(&body);
    assert_eq!(
        (resp["allowed"].clone(), resp["status"]["code"].clone()),
        (json!(false), json!(400))
    );
    assert!(
        resp["status"]["message"]
            .as_str()
            .unwrap()
            .contains("decoding the object"),
        "{body}"
    );

    let (status, _) = run.client.review("/validate-nothing-here", &good).await;
    assert_eq!(status, 404);

    // The server still serves.
    let (status, body) = run.client.review(&path, &good).await;
    assert_eq!(
        (status, response(&body)["allowed"].clone()),
        (200, json!(true))
    );
    assert_eq!(run.metrics.requests(&path, 400), 4);
    assert_eq!(run.metrics.requests(&path, 413), 1);
    assert_eq!(run.metrics.requests(&path, 415), 1);
    assert_eq!(run.metrics.requests(&path, 200), 2);
}

#[tokio::test]
async fn a_panicking_validator_is_a_denial_saying_so_and_the_server_survives() {
    let (v, _) = rules();
    let run = start(|s| s.validator::<ConfigMap, _>(v).unwrap()).await;
    let path = validate_path::<ConfigMap>();
    for _ in 0..3 {
        let (status, body) = run
            .client
            .review(
                &path,
                &review("CREATE", Some(cm(json!({"mode": "boom"}))), None, false),
            )
            .await;
        assert_eq!(status, 200);
        let resp = response(&body);
        assert_eq!(resp["allowed"], false);
        assert_eq!(resp["status"]["code"], 500);
        assert_eq!(
            resp["status"]["message"],
            "the admission webhook panicked: the validator exploded"
        );
    }
    let (_, body) = run
        .client
        .review(
            &path,
            &review("CREATE", Some(cm(json!({"mode": "fast"}))), None, false),
        )
        .await;
    assert_eq!(response(&body)["allowed"], true);
    assert_eq!(run.metrics.panics(), 3);
    let text = {
        use prometheus::Encoder;
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&run.registry.gather(), &mut buf)
            .unwrap();
        String::from_utf8(buf).unwrap()
    };
    assert!(text.contains(r#"controller_runtime_webhook_requests_total{code="200",webhook="/validate--v1-configmap"} 4"#), "{text}");
    assert!(
        text.contains("controller_runtime_webhook_panics_total 3"),
        "{text}"
    );
    assert!(text.contains(r#"controller_runtime_webhook_latency_seconds_count{webhook="/validate--v1-configmap"} 4"#), "{text}");
    assert!(
        text.contains(
            r#"controller_runtime_webhook_requests_in_flight{webhook="/validate--v1-configmap"} 0"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_panicking_validator_leaves_its_keep_alive_connection_serving() {
    use http_body_util::{BodyExt, Full};
    let (v, _) = rules();
    let run = start(|s| s.validator::<ConfigMap, _>(v).unwrap()).await;
    let path = validate_path::<ConfigMap>();
    let tls = run.client.connect().await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    // One connection: a review that panics, then one that does not.
    for (mode, allowed) in [("boom", false), ("fast", true)] {
        let body = review("CREATE", Some(cm(json!({ "mode": mode }))), None, false);
        let req = http::Request::post(path.as_str())
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from(
                serde_json::to_vec(&body).unwrap(),
            )))
            .unwrap();
        send.ready().await.unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200, "{mode}");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(response(&answer)["allowed"], json!(allowed), "{answer}");
    }
    assert!(!conn.is_finished(), "the connection is still open");
    assert_eq!(run.metrics.panics(), 1);
}

/// Holds every review until released.
struct Gate {
    entered: Arc<Notify>,
    release: Arc<Notify>,
    finished: Arc<AtomicBool>,
}

impl Validator<ConfigMap> for Gate {
    async fn validate_create(
        &self,
        _: &ConfigMap,
        _: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.entered.notify_one();
        self.release.notified().await;
        self.finished.store(true, Ordering::SeqCst);
        Ok(vec!["finished after the stop".into()])
    }
    async fn validate_update(
        &self,
        _: &ConfigMap,
        new: &ConfigMap,
        ctx: &AdmissionContext,
    ) -> Result<Warnings, Denial> {
        self.validate_create(new, ctx).await
    }
}

#[tokio::test]
async fn a_stop_finishes_the_review_in_flight_then_refuses_new_connections() {
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let gate = Gate {
        entered: entered.clone(),
        release: release.clone(),
        finished: finished.clone(),
    };
    let run = start(|s| s.validator::<ConfigMap, _>(gate).unwrap()).await;
    let path = validate_path::<ConfigMap>();
    let client = run.client.clone();
    let in_flight = tokio::spawn({
        let path = path.clone();
        async move {
            client
                .review(&path, &review("CREATE", Some(cm(json!({}))), None, false))
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(10), entered.notified())
        .await
        .unwrap();
    assert_eq!(run.metrics.in_flight(&path), 1);
    run.stop.cancel();
    // The server waits for the review: it has not returned yet.
    tokio::task::yield_now().await;
    assert!(!run.done.is_finished());
    release.notify_one();
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        response(&body)["warnings"],
        json!(["finished after the stop"])
    );
    assert!(finished.load(Ordering::SeqCst));
    tokio::time::timeout(Duration::from_secs(10), run.done)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        run.client
            .post(&path, "application/json", b"{}".to_vec())
            .await
            .is_err()
    );
}
