use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_core::ObjectMeta;

use super::*;

#[test]
fn request_from_namespaced_and_cluster_objects() {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("a".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        Request::from_object(&cm).unwrap(),
        Request::new(Some("ns"), "a")
    );
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("ns".into()),
            namespace: Some(String::new()),
            ..Default::default()
        },
        ..Default::default()
    };
    let req = Request::from_object(&ns).unwrap();
    assert_eq!(req.namespace, None);
    assert_eq!(req.key(), "ns");
    assert!(matches!(
        Request::from_object(&ConfigMap::default()),
        Err(RequestError::MissingName)
    ));
}

#[test]
fn request_key_round_trip_and_rejects_bad_keys() {
    for key in ["a", "ns/a"] {
        assert_eq!(key.parse::<Request>().unwrap().to_string(), key);
    }
    for bad in ["", "ns/", "/a", "a/b/c"] {
        let err = bad.parse::<Request>().unwrap_err();
        assert!(
            err.to_string().contains("invalid request key"),
            "{bad}: {err}"
        );
    }
}

mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn request_key_round_trips(ns in proptest::option::of("[a-z0-9][a-z0-9.-]{0,20}"), name in "[a-z0-9][a-z0-9.-]{0,30}") {
            let req = Request::new(ns, name);
            prop_assert_eq!(req.to_string().parse::<Request>().unwrap(), req);
        }
    }
}
