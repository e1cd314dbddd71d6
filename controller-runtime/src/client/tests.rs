use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};

use super::*;

fn deploy(name: &str, ns: &str) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some(name.into());
    d.metadata.namespace = Some(ns.into());
    d.metadata.uid = Some(format!("uid-{name}"));
    d
}

fn cm(ns: Option<&str>) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some("cfg".into());
    c.metadata.namespace = ns.map(Into::into);
    c
}

fn refs(c: &ConfigMap) -> &[OwnerReference] {
    c.metadata.owner_references.as_deref().unwrap_or_default()
}

#[test]
fn controller_reference_is_set_once_and_idempotent() {
    let owner = deploy("web", "ns");
    let mut obj = cm(Some("ns"));
    set_controller_reference(&owner, &mut obj).unwrap();
    set_controller_reference(&owner, &mut obj).unwrap();
    assert_eq!(refs(&obj).len(), 1);
    let r = &refs(&obj)[0];
    assert_eq!(r.api_version, "apps/v1");
    assert_eq!(r.uid, "uid-web");
    assert_eq!(
        (r.controller, r.block_owner_deletion),
        (Some(true), Some(true))
    );
    assert!(is_controlled_by(&owner, &obj));
    assert!(!is_controlled_by(&deploy("other", "ns"), &obj));
}

#[test]
fn another_controller_is_refused_with_a_clear_error() {
    let mut obj = cm(Some("ns"));
    set_controller_reference(&deploy("web", "ns"), &mut obj).unwrap();
    let err = set_controller_reference(&deploy("intruder", "ns"), &mut obj).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ClientError::AlreadyControlled { .. }));
    assert!(
        msg.contains("ns/cfg")
            && msg.contains("Deployment web")
            && msg.contains("Deployment intruder"),
        "{msg}"
    );
    // A different kind with the same name is another owner too.
    let mut rs = ReplicaSet::default();
    rs.metadata.name = Some("web".into());
    rs.metadata.namespace = Some("ns".into());
    rs.metadata.uid = Some("uid-rs".into());
    assert!(set_controller_reference(&rs, &mut obj).is_err());
    // The object is unchanged by the refused calls.
    assert_eq!(refs(&obj).len(), 1);
    assert_eq!(controller_of(&obj).unwrap().name, "web");
}

#[test]
fn plain_owner_references_coexist_and_keep_controller_flag() {
    let mut obj = cm(Some("ns"));
    set_owner_reference(&deploy("a", "ns"), &mut obj).unwrap();
    set_owner_reference(&deploy("b", "ns"), &mut obj).unwrap();
    assert_eq!(refs(&obj).len(), 2);
    assert!(refs(&obj).iter().all(|r| r.controller.is_none()));
    // A controller can still be set, and refreshing it as a plain owner keeps the flag.
    set_controller_reference(&deploy("a", "ns"), &mut obj).unwrap();
    let mut newer = deploy("a", "ns");
    newer.metadata.uid = Some("uid-a-2".into());
    set_owner_reference(&newer, &mut obj).unwrap();
    let a = refs(&obj).iter().find(|r| r.name == "a").unwrap();
    assert_eq!((a.uid.as_str(), a.controller), ("uid-a-2", Some(true)));
    assert_eq!(refs(&obj).len(), 2);
}

#[test]
fn namespace_rules() {
    let err = set_controller_reference(&deploy("web", "ns"), &mut cm(Some("other"))).unwrap_err();
    assert!(matches!(err, ClientError::CrossNamespace { .. }), "{err}");
    let mut cluster_obj = Namespace::default();
    cluster_obj.metadata.name = Some("team".into());
    assert!(set_owner_reference(&deploy("web", "ns"), &mut cluster_obj).is_err());
    // A cluster-scoped owner may own namespaced and cluster-scoped objects.
    let mut ns_owner = Namespace::default();
    ns_owner.metadata.name = Some("team".into());
    ns_owner.metadata.uid = Some("uid-team".into());
    set_controller_reference(&ns_owner, &mut cm(Some("ns"))).unwrap();
    set_controller_reference(&ns_owner, &mut cluster_obj).unwrap();
}

#[test]
fn owner_must_come_from_the_server() {
    let mut owner = deploy("web", "ns");
    owner.metadata.uid = None;
    let err = set_controller_reference(&owner, &mut cm(Some("ns"))).unwrap_err();
    assert!(err.to_string().contains("metadata.uid"), "{err}");
    owner.metadata.name = None;
    assert!(matches!(
        owner_reference(&owner),
        Err(ClientError::OwnerIncomplete { field: "name" })
    ));
}

#[test]
fn apply_body_strips_managed_fields_and_needs_a_name() {
    let mut c = cm(Some("ns"));
    c.metadata.managed_fields = Some(vec![Default::default()]);
    let (name, body) = apply_body(&c).unwrap();
    assert_eq!(name, "cfg");
    assert!(body.metadata.managed_fields.is_none());
    c.metadata.name = None;
    assert!(matches!(apply_body(&c), Err(ClientError::MissingName)));
    assert!(apply_params("mgr", true).force);
    assert_eq!(
        apply_params("mgr", false).field_manager.as_deref(),
        Some("mgr")
    );
}

fn api_error(code: u16) -> ClientError {
    ClientError::Api {
        op: "update",
        object: "ns/cfg".into(),
        source: kube_client::Error::Api(Box::new(kube_client::core::Status {
            code,
            ..kube_client::core::Status::failure("refused", "")
        })),
    }
}

#[test]
fn client_errors_say_whether_a_retry_can_fix_them() {
    // The server refused the request itself: the same code sends it again.
    assert!(api_error(422).is_terminal());
    assert!(api_error(400).is_terminal());
    // Conflicts, lag, permissions, throttling and outages pass.
    for code in [409, 404, 403, 429, 500, 504] {
        assert!(!api_error(code).is_terminal(), "{code}");
    }
    // The objects' shape does not change on a retry.
    let owner = deploy("web", "ns");
    let err = set_controller_reference(&owner, &mut cm(Some("other"))).unwrap_err();
    assert!(matches!(err, ClientError::CrossNamespace { .. }) && err.is_terminal());
    // Another controller may let go.
    let mut obj = cm(Some("ns"));
    set_controller_reference(&deploy("first", "ns"), &mut obj).unwrap();
    let err = set_controller_reference(&owner, &mut obj).unwrap_err();
    assert!(matches!(err, ClientError::AlreadyControlled { .. }) && !err.is_terminal());
}
