use super::*;
use serde_json::json;

fn info(custom: bool) -> ResourceInfo {
    let mut i = crate::resources::registry::Registry::with_builtins()
        .get("", "v1", "configmaps")
        .map(|i| (*i).clone())
        .expect("configmaps are built in");
    i.custom = custom;
    i
}

fn encoding(info: &ResourceInfo, accept: &str) -> Answer {
    negotiate(info, accept).unwrap().encoding
}

#[test]
fn negotiation_follows_accept_order_and_q() {
    let builtin = info(false);
    let pb = "application/vnd.kubernetes.protobuf, application/json";
    assert_eq!(encoding(&builtin, pb), Answer::Protobuf);
    assert_eq!(
        encoding(
            &builtin,
            "application/json, application/vnd.kubernetes.protobuf"
        ),
        Answer::Json
    );
    assert_eq!(
        encoding(
            &builtin,
            "application/vnd.kubernetes.protobuf;q=0.5, application/json"
        ),
        Answer::Json
    );
    assert_eq!(encoding(&builtin, ""), Answer::Json);
    assert_eq!(encoding(&builtin, "*/*"), Answer::Json);
    let table = "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json";
    assert_eq!(encoding(&builtin, table), Answer::Json);
    let custom = info(true);
    assert_eq!(encoding(&custom, pb), Answer::Json);
    assert_eq!(negotiate(&custom, PROTOBUF).unwrap_err().code, 406);
}

#[test]
fn metadata_only_ranges_are_negotiated_like_a_cluster() {
    let list = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    for custom in [false, true] {
        // Protobuf metadata is served for custom resources too.
        let n = negotiate(&info(custom), list).unwrap();
        assert_eq!(n.encoding, Answer::Protobuf, "custom: {custom}");
        let p = n.metadata.expect("metadata-only");
        assert!(p.list);
        assert_eq!(p.api_version, "meta.k8s.io/v1");
    }
    let builtin = info(false);
    // An unsupported version falls through to the next range...
    let n = negotiate(
        &builtin,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2, application/json",
    )
    .unwrap();
    assert_eq!((n.encoding, n.metadata), (Answer::Json, None));
    let n = negotiate(
        &builtin,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1",
    )
    .unwrap();
    assert_eq!(
        n.metadata.map(|p| p.api_version),
        Some("meta.k8s.io/v1beta1")
    );
    // ...and is 406 when it is the only one.
    for only in [
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2",
        "application/json;as=PartialObjectMetadata",
        "application/json;as=Pod;g=meta.k8s.io;v=v1",
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    ] {
        let e = negotiate(&builtin, only).unwrap_err();
        assert_eq!(
            (e.code, e.reason.as_str()),
            (406, "NotAcceptable"),
            "{only}"
        );
    }
}

#[test]
fn metadata_lists_built_from_objects_match_the_reshaped_lists() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "resourceVersion": "3", "labels": {"x": "y"}}, "data": {"k": "v"}});
    let meta = json!({"resourceVersion": "9", "continue": "t", "remainingItemCount": 4});
    for av in ["meta.k8s.io/v1", "meta.k8s.io/v1beta1"] {
        let want = partial::list(&json!({"metadata": meta, "items": [cm]}), av);
        let pb = informer_codec::encode_partial_list(&[&cm], &partial::list_meta(&meta, av), av)
            .unwrap();
        assert_eq!(pb, to_protobuf(&want).unwrap(), "{av}");
        assert_eq!(from_protobuf(&pb).unwrap(), want, "{av}");
    }
}
