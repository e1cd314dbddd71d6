//! The schema never prunes or rejects what the Rust type can produce:
//! random `Route` specs (enums of every representation, maps, int-or-string,
//! free-form JSON, optional fields) are created in envtest and read back
//! unchanged. Values are drawn from what the field rules allow: the property
//! is that the structural rewrite loses nothing, not that a `String` passes
//! every `pattern`.

use ::envtest::TestEnv;
use kube_client::api::{Api, PostParams};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::envtest::install;
use crate::types::{Backend, Fallback, Policy, Port, Route, RouteSpec};

fn port() -> impl Strategy<Value = Port> {
    prop_oneof![
        any::<i32>().prop_map(Port::Number),
        "[a-z]{1,8}".prop_map(Port::Name)
    ]
}

fn backend() -> impl Strategy<Value = Backend> {
    prop_oneof![
        ("[a-z]{1,10}", port()).prop_map(|(name, port)| Backend::Service { name, port }),
        any::<u16>().prop_map(|code| Backend::Static { code }),
    ]
}

fn extra() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        prop::collection::btree_map("[a-z]{1,5}", any::<i64>(), 0..4)
            .prop_map(|m| serde_json::to_value(m).unwrap()),
        "[a-z ]{0,10}".prop_map(serde_json::Value::from),
    ]
}

/// Hosts the field's rules accept: `pattern`, `format = "hostname"` (labels
/// that neither start nor end with `-`) and the spec's CEL rule.
fn host() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?){0,2}"
        .prop_filter("the CEL rule forbids it", |h| h != "forbidden")
}

fn spec() -> impl Strategy<Value = RouteSpec> {
    (
        host(),
        prop_oneof![Just(Policy::Always), Just(Policy::Never)],
        backend(),
        prop::collection::btree_map("[a-z]{1,6}", "[ -~]{0,8}", 0..5),
        prop::option::of((1u32..=20).prop_map(|n| n * 5)),
        prop::collection::btree_map("[a-z]{1,6}", "https://[a-z]{1,8}", 0..4),
        extra(),
    )
        .prop_map(
            |(host, policy, backend, headers, weight, fallbacks, extra)| RouteSpec {
                host,
                policy,
                backend,
                headers,
                weight,
                fallbacks: fallbacks
                    .into_iter()
                    .map(|(name, url)| Fallback { name, url })
                    .collect(),
                extra,
            },
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_specs_round_trip_through_envtest_unchanged() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    install(&client, &Route::crd().unwrap()).await;
    let api: Api<Route> = Api::namespaced(client.clone(), "default");
    round_trip(&api, "r", spec(), Route::new, |r| &r.spec);
}

/// Create an object from each random spec (named `{prefix}{n}`) and read it
/// back: the stored spec must equal the one sent. Runs inside a
/// multi-threaded tokio test.
pub fn round_trip<K, S>(
    api: &Api<K>,
    prefix: &str,
    specs: impl Strategy<Value = S>,
    new: impl Fn(&str, S) -> K,
    spec_of: impl Fn(&K) -> &S,
) where
    K: kube_client::Resource + Clone + Debug + Serialize + DeserializeOwned,
    S: Clone + Debug + PartialEq,
{
    let handle = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let n = AtomicU32::new(0);
    let result = runner.run(&specs, |spec| {
        let name = format!("{prefix}{}", n.fetch_add(1, Ordering::Relaxed));
        let back = tokio::task::block_in_place(|| {
            handle.block_on(async {
                api.create(&PostParams::default(), &new(&name, spec.clone()))
                    .await?;
                api.get(&name).await
            })
        })
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(spec_of(&back), &spec);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
