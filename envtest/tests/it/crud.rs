//! Writes: create, update, patch, status subresource, generation, deletion
//! with finalizers and preconditions, DeleteCollection, namespaces.

use crate::{cm, describe, namespace, raw, spec_mut, spec_of, status, take};
use envtest::TestEnv;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube_client::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, WatchParams,
};
use serde_json::json;

#[tokio::test]
async fn create_assigns_uid_timestamp_generation_and_generate_name() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let created = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let m = &created.metadata;
    assert!(m.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(m.creation_timestamp.is_some());
    assert_eq!(m.generation, Some(1));
    assert_eq!(m.namespace.as_deref(), Some("default"));
    let rv: u64 = m.resource_version.as_deref().unwrap().parse().unwrap();
    assert!(rv > 0);

    let mut generated = cm("", &[], "1");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let g1 = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let g2 = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let (n1, n2) = (g1.metadata.name.unwrap(), g2.metadata.name.unwrap());
    assert!(n1.starts_with("gen-") && n1.len() == 9, "{n1}");
    assert_ne!(n1, n2);

    let dup = status(
        api.create(&PostParams::default(), &cm("a", &[], "2"))
            .await
            .unwrap_err(),
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(
        api.get("a").await.unwrap().data.unwrap()["v"],
        "1",
        "POST never overwrites"
    );
}

#[tokio::test]
async fn put_enforces_optimistic_concurrency_and_never_creates() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let v1 = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let mut v2 = v1.clone();
    v2.data = Some([("v".to_string(), "2".to_string())].into());
    let v2 = api.replace("a", &PostParams::default(), &v2).await.unwrap();
    assert_ne!(v1.metadata.resource_version, v2.metadata.resource_version);
    let mut stale = v1.clone();
    stale.data = Some([("v".to_string(), "3".to_string())].into());
    let e = status(
        api.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert!(
        e.message.contains("the object has been modified"),
        "{}",
        e.message
    );
    // Built-in kinds accept an unconditional update (no resourceVersion).
    let mut unconditional = stale.clone();
    unconditional.metadata.resource_version = None;
    api.replace("a", &PostParams::default(), &unconditional)
        .await
        .unwrap();
    // PUT does not create.
    let e = status(
        api.replace("missing", &PostParams::default(), &cm("missing", &[], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
    // A no-op update does not write.
    let cur = api.get("a").await.unwrap();
    let same = api
        .replace("a", &PostParams::default(), &cur)
        .await
        .unwrap();
    assert_eq!(
        cur.metadata.resource_version,
        same.metadata.resource_version
    );
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}},
        "status": {"replicas": 99}
    }))
    .unwrap()
}

#[tokio::test]
async fn generation_and_status_subresource_rules() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<Deployment> = Api::default_namespaced(env.client());
    let d = api
        .create(&PostParams::default(), &deployment("d"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    // Go writes the empty status struct (`"status": {}`), as a real API
    // server answers.
    assert_eq!(
        d.status.unwrap_or_default(),
        Default::default(),
        "status is dropped on create when the status subresource is enabled"
    );

    // Metadata-only change: generation unchanged.
    let pp = PatchParams::default();
    let d = api
        .patch(
            "d",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    // Spec change: generation + 1.
    let d = api
        .patch("d", &pp, &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    // Status via the main endpoint is ignored.
    let d = api
        .patch("d", &pp, &Patch::Merge(json!({"status": {"replicas": 7}})))
        .await
        .unwrap();
    assert_eq!(d.status.unwrap_or_default(), Default::default());
    // Status via /status changes only status, and not the generation.
    let d = api
        .patch_status(
            "d",
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": 9}, "status": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(d.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(spec_of(&d).replicas, Some(3));
    assert_eq!(d.metadata.generation, Some(2));
    // PUT to /status with the whole object.
    let mut whole = d.clone();
    whole.status.as_mut().unwrap().replicas = Some(4);
    spec_mut(&mut whole).replicas = Some(10);
    let d = api
        .replace_status("d", &PostParams::default(), &whole)
        .await
        .unwrap();
    assert_eq!(
        (d.status.as_ref().unwrap().replicas, spec_of(&d).replicas),
        (Some(4), Some(3))
    );
    assert_eq!(
        api.get_status("d").await.unwrap().metadata.generation,
        Some(2)
    );
}

#[tokio::test]
async fn patch_types_merge_json_and_strategic() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let pp = PatchParams::default();
    let p = api
        .patch(
            "p",
            &pp,
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "b", "image": "b:2"}]}})),
        )
        .await
        .unwrap();
    let images: Vec<_> = p
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.image.unwrap())
        .collect();
    assert_eq!(
        images,
        vec!["a:1", "b:2"],
        "strategic merge merges containers by name"
    );
    let p = api
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"k": "v"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.labels.unwrap()["k"], "v");
    let jp = Some("application/json-patch+json");
    let path = "/api/v1/namespaces/default/pods/p";
    let ops = json!([
        {"op": "test", "path": "/metadata/labels/k", "value": "v"},
        {"op": "replace", "path": "/metadata/labels/k", "value": "w"}
    ]);
    let (code, body) = raw(
        &env.client(),
        "PATCH",
        path,
        jp,
        ops.to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        api.get("p").await.unwrap().metadata.labels.unwrap()["k"],
        "w"
    );
    let failing = json!([{"op": "test", "path": "/metadata/labels/k", "value": "nope"}]);
    let (code, body) = raw(
        &env.client(),
        "PATCH",
        path,
        jp,
        failing.to_string().into_bytes(),
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    let e = status(
        api.patch("missing", &pp, &Patch::Merge(json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 404);
    // A patch carrying a stale resourceVersion conflicts.
    let e = status(
        api.patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
}

#[tokio::test]
async fn delete_with_finalizers_marks_then_removes() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let mut c = cm("f", &[], "1");
    c.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    let created = api.create(&PostParams::default(), &c).await.unwrap();
    let mut w = api
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(30),
            created.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();

    let deleted = api
        .delete("f", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(deleted.metadata.deletion_timestamp.is_some());
    assert_eq!(
        deleted.metadata.generation,
        Some(2),
        "generation moves when deletion starts"
    );
    let still = api.get("f").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());

    // No new finalizers once deletion started.
    let e = status(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/keep", "new"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(e.details.unwrap().causes[0].field, "metadata.finalizers");

    // Removing the last finalizer deletes it.
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(status(api.get("f").await.unwrap_err()).code, 404);
    let evs = take(&mut w, 2).await;
    let kinds: Vec<_> = evs.iter().map(|e| describe(e).0).collect();
    assert_eq!(kinds, vec!["MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn delete_preconditions_are_honoured() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("p", &[], "1"))
        .await
        .unwrap();
    let bad_uid = DeleteParams::default().preconditions(Preconditions {
        uid: Some("nope".into()),
        resource_version: None,
    });
    assert_eq!(
        status(api.delete("p", &bad_uid).await.unwrap_err()).code,
        409
    );
    let bad_rv = DeleteParams::default().preconditions(Preconditions {
        uid: None,
        resource_version: Some("1".into()),
    });
    assert_eq!(
        status(api.delete("p", &bad_rv).await.unwrap_err()).code,
        409
    );
    let good = DeleteParams::default().preconditions(Preconditions {
        uid: c.metadata.uid.clone(),
        resource_version: c.metadata.resource_version.clone(),
    });
    api.delete("p", &good).await.unwrap();
    assert_eq!(status(api.get("p").await.unwrap_err()).code, 404);
    assert_eq!(
        status(api.delete("p", &DeleteParams::default()).await.unwrap_err()).code,
        404
    );
}

#[tokio::test]
async fn delete_collection_uses_selectors() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    for (n, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(&PostParams::default(), &cm(n, &[("tier", tier)], "1"))
            .await
            .unwrap();
    }
    let gone = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("tier=web"),
        )
        .await
        .unwrap();
    assert_eq!(gone.left().unwrap().items.len(), 2);
    let left: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);
}

#[tokio::test]
async fn namespaces_must_exist_and_their_deletion_deletes_contents() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let e = status(
        missing
            .create(&PostParams::default(), &cm("a", &[], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert!(
        e.message.contains("namespaces \"nope\" not found"),
        "{}",
        e.message
    );

    namespace(&client, "team").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    api.create(&PostParams::default(), &cm("plain", &[], "1"))
        .await
        .unwrap();
    let mut held = cm("held", &[], "1");
    held.metadata.finalizers = Some(vec!["x/y".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    let nss: Api<Namespace> = Api::all(client.clone());
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    assert_eq!(status(api.get("plain").await.unwrap_err()).code, 404);
    let ns = nss.get("team").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let e = status(
        api.create(&PostParams::default(), &cm("late", &[], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403, "no new content in a terminating namespace");
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        nss.get_opt("team").await.unwrap().is_none(),
        "the namespace goes once its last object is gone"
    );
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let before = env.current_revision();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let c = api.create(&dry, &cm("ghost", &[], "1")).await.unwrap();
    assert_eq!(c.metadata.name.as_deref(), Some("ghost"));
    assert!(api.get_opt("ghost").await.unwrap().is_none());
    assert_eq!(env.current_revision(), before);

    api.create(&PostParams::default(), &cm("real", &[], "1"))
        .await
        .unwrap();
    let rev = env.current_revision();
    let p = api
        .patch(
            "real",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"v": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.data.unwrap()["v"], "2");
    api.delete("real", &DeleteParams::default().dry_run())
        .await
        .unwrap();
    let real = api.get("real").await.unwrap();
    assert_eq!(real.data.unwrap()["v"], "1");
    assert_eq!(
        env.current_revision(),
        rev,
        "dry runs do not bump the revision"
    );
}

#[tokio::test]
async fn scale_subresource_reads_and_writes_replicas() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<Deployment> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &deployment("d"))
        .await
        .unwrap();
    let s = api.get_scale("d").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(1));
    assert_eq!(s.status.unwrap().selector.as_deref(), Some("app=d"));
    let s = api
        .patch_scale(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.as_ref().unwrap().replicas, Some(5));
    let d = api.get("d").await.unwrap();
    assert_eq!(spec_of(&d).replicas, Some(5));
    assert_eq!(d.metadata.generation, Some(2));
    // A stale resourceVersion on the Scale conflicts.
    let mut stale = s.clone();
    stale.metadata.resource_version = Some("1".into());
    stale.spec.as_mut().unwrap().replicas = Some(2);
    assert_eq!(
        status(
            api.replace_scale("d", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        )
        .code,
        409
    );
    let mut fresh = api.get_scale("d").await.unwrap();
    fresh.spec.as_mut().unwrap().replicas = Some(2);
    assert_eq!(
        api.replace_scale("d", &PostParams::default(), &fresh)
            .await
            .unwrap()
            .spec
            .unwrap()
            .replicas,
        Some(2)
    );
    // Kinds without the subresource do not have it.
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.create(&PostParams::default(), &cm("c", &[], "1"))
        .await
        .unwrap();
    assert_eq!(status(cms.get_scale("c").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn built_in_kinds_are_defaulted_like_a_cluster() {
    let env = TestEnv::start().await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "app:1.0"}]}})).unwrap();
    let p = pods.create(&PostParams::default(), &pod).await.unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));

    // A controller that writes back what it wants (without the defaults)
    // does not bump the generation: the server re-applies them.
    let deploys: Api<Deployment> = Api::default_namespaced(env.client());
    let d = deploys
        .create(&PostParams::default(), &deployment("d"))
        .await
        .unwrap();
    assert_eq!(
        spec_of(&d).strategy.as_ref().unwrap().type_.as_deref(),
        Some("RollingUpdate")
    );
    let mut desired = deployment("d");
    desired.status = None;
    desired.metadata.resource_version = d.metadata.resource_version.clone();
    let d2 = deploys
        .replace("d", &PostParams::default(), &desired)
        .await
        .unwrap();
    assert_eq!(d2.metadata.generation, Some(1));
    assert_eq!(
        d2.metadata.resource_version, d.metadata.resource_version,
        "nothing changed, nothing written"
    );

    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::default_namespaced(env.client());
    let svc = serde_json::from_value(
        json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .unwrap();
    let s = svcs.create(&PostParams::default(), &svc).await.unwrap();
    let spec = s.spec.unwrap();
    assert!(
        spec.cluster_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.96."))
    );
    assert_eq!(spec.ports.unwrap()[0].protocol.as_deref(), Some("TCP"));
}
