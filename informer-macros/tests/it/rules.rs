//! The derive's field-level `default`, `pattern` and CEL rules
//! (`validation(...)`), enforced by envtest over real HTTP: `Route`'s
//! `weight` has `default = "50"`, `host` has a `pattern` and the spec a CEL
//! rule with a message, reason and field path; `fallbacks` has a transition
//! rule with `message_expression` and `optional_old_self`.

use ::envtest::TestEnv;
use kube_client::Client;
use kube_client::api::{Api, DynamicObject, PostParams};
use kube_client::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::envtest::install;
use crate::types::Route;

/// One cause of a 422: (field, reason, message).
type Cause = (String, String, String);

/// `Route` untyped, to send what the Rust type cannot produce (an omitted
/// `weight`, a bad host).
fn routes(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Route");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "routes");
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn route(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Route",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn spec(host: &str) -> Value {
    json!({"host": host, "backend": {"type": "Service", "name": "s", "port": 80}})
}

/// Turns a refused write into its 422 causes; anything else panics.
fn causes(result: Result<DynamicObject, kube_client::Error>) -> Vec<Cause> {
    match result {
        Err(kube_client::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            s.details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.field, c.reason, c.message))
                .collect()
        }
        other => panic!("expected a 422, got {other:?}"),
    }
}

async fn started() -> (TestEnv, Client) {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, &Route::crd().unwrap()).await;
    (env, client)
}

#[tokio::test]
async fn an_omitted_field_reads_back_with_its_default() {
    let (_env, client) = started().await;
    let created = routes(&client)
        .create(&PostParams::default(), &route("r", spec("a.example.com")))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["weight"], json!(50));
    // The typed API sees it too.
    let typed: Api<Route> = Api::namespaced(client, "default");
    assert_eq!(typed.get("r").await.unwrap().spec.weight, Some(50));
}

#[tokio::test]
async fn a_value_violating_the_pattern_is_refused_at_its_path() {
    let (_env, client) = started().await;
    let api = routes(&client);
    // A valid hostname (so `format` passes) with an upper-case letter,
    // which `pattern = "^[a-z0-9.-]+$"` refuses.
    let got = causes(
        api.create(&PostParams::default(), &route("r", spec("Web.example.com")))
            .await,
    );
    assert_eq!(got.len(), 1, "{got:?}");
    let (field, reason, message) = &got[0];
    assert_eq!(
        (field.as_str(), reason.as_str()),
        ("spec.host", "FieldValueInvalid")
    );
    assert!(message.contains("^[a-z0-9.-]+$"), "{message}");
    // The same object with a matching host is stored.
    api.create(&PostParams::default(), &route("r", spec("web.example.com")))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_value_violating_the_cel_rule_is_refused_with_its_message() {
    let (_env, client) = started().await;
    let api = routes(&client);
    let got = causes(
        api.create(&PostParams::default(), &route("r", spec("forbidden")))
            .await,
    );
    assert_eq!(got.len(), 1, "{got:?}");
    let (field, reason, message) = &got[0];
    // `reason` and `field_path` from the attribute: the cause is on the
    // host, typed Forbidden, with the rule's message.
    assert_eq!(
        (field.as_str(), reason.as_str()),
        ("spec.host", "FieldValueForbidden")
    );
    assert!(message.contains("host is forbidden"), "{message}");
}

#[tokio::test]
async fn a_field_transition_rule_uses_its_message_expression() {
    let (_env, client) = started().await;
    let api = routes(&client);
    let mut with_two = spec("a.example.com");
    with_two["fallbacks"] = json!([
        {"name": "one", "url": "http://one"},
        {"name": "two", "url": "http://two"},
    ]);
    // On create there is no old value: `optional_old_self` lets it pass.
    let created = api
        .create(&PostParams::default(), &route("r", with_two))
        .await
        .unwrap();

    let mut shrunk = created.clone();
    shrunk.data["spec"]["fallbacks"] = json!([{"name": "one", "url": "http://one"}]);
    let got = causes(api.replace("r", &PostParams::default(), &shrunk).await);
    assert_eq!(got.len(), 1, "{got:?}");
    let (field, reason, message) = &got[0];
    assert_eq!(
        (field.as_str(), reason.as_str()),
        ("spec.fallbacks", "FieldValueInvalid")
    );
    assert!(message.contains("fallbacks cannot shrink"), "{message}");
}
