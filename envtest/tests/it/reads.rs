//! Reads: resourceVersion semantics, pagination from one snapshot,
//! selectors, scopes, discovery.

use crate::{cm, namespace, raw, status};
use envtest::TestEnv;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube_client::api::{Api, ListParams, PostParams, VersionMatch};
use std::collections::BTreeSet;

fn names(items: &[ConfigMap]) -> Vec<String> {
    items
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect()
}

#[tokio::test]
async fn resource_version_semantics_on_get_and_list() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    let c = api
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let rv: u64 = c.metadata.resource_version.unwrap().parse().unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        Some(rv.to_string().as_str()),
        "LIST RV is the snapshot revision"
    );
    for at in ["0", &rv.to_string(), &(rv - 1).to_string()] {
        assert_eq!(
            api.list(&ListParams::default().at(at))
                .await
                .unwrap()
                .items
                .len(),
            1,
            "rv={at}"
        );
        assert_eq!(
            api.get_with("a", &kube_client::api::GetParams::at(at))
                .await
                .unwrap()
                .metadata
                .name
                .unwrap(),
            "a"
        );
    }
    let e = status(
        api.list(&ListParams::default().at(&(rv + 100).to_string()))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    assert!(
        e.message.contains("Too large resource version"),
        "{}",
        e.message
    );
    let e = status(
        api.get_with(
            "a",
            &kube_client::api::GetParams::at(&(rv + 100).to_string()),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 504);

    // Exact serves the snapshot at that revision.
    api.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    let exact = api
        .list(
            &ListParams::default()
                .at(&rv.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(names(&exact.items), vec!["a"]);
    let e = status(api.list(&ListParams::default().at("x")).await.unwrap_err());
    assert_eq!(e.code, 400);
}

#[tokio::test]
async fn pagination_serves_every_page_from_one_snapshot() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("c{i:02}"), &[], "1"))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    let snap_rv = first.metadata.resource_version.clone();
    assert_eq!(first.items.len(), 3);
    assert_eq!(first.metadata.remaining_item_count, Some(7));
    // Writes between pages must not show up.
    api.create(&PostParams::default(), &cm("c00a", &[], "1"))
        .await
        .unwrap();
    api.delete("c05", &Default::default()).await.unwrap();
    let mut seen = names(&first.items);
    let mut token = first.metadata.continue_.clone();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&ListParams::default().limit(3).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version, snap_rv,
            "every page carries the snapshot RV"
        );
        seen.extend(names(&page.items));
        token = page.metadata.continue_.clone();
    }
    let want: Vec<String> = (0..10).map(|i| format!("c{i:02}")).collect();
    assert_eq!(seen, want);

    // continue with an explicit RV is 400.
    let page = api.list(&ListParams::default().limit(3)).await.unwrap();
    let t = page.metadata.continue_.unwrap();
    // (kube-client never sends both, so ask over raw HTTP.)
    let path =
        format!("/api/v1/namespaces/default/configmaps?limit=3&continue={t}&resourceVersion=5");
    let (code, body) = raw(&env.client(), "GET", &path, None, vec![]).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (400, Some("BadRequest")),
        "{body}"
    );
    // A token older than the history window is 410 Expired.
    api.create(&PostParams::default(), &cm("after", &[], "1"))
        .await
        .unwrap();
    env.faults().compact();
    let e = status(
        api.list(&ListParams::default().limit(3).continue_token(&t))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
    assert!(e.message.contains("start a new list"), "{}", e.message);
    let e = status(
        api.list(&ListParams::default().continue_token("garbage"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
}

#[tokio::test]
async fn label_selectors_support_every_operator() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(env.client());
    api.create(
        &PostParams::default(),
        &cm("web", &[("app", "web"), ("tier", "front")], "1"),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("db", &[("app", "db")], "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("none", &[], "1"))
        .await
        .unwrap();
    let cases = [
        ("app=web", vec!["web"]),
        ("app==db", vec!["db"]),
        ("app!=web", vec!["db", "none"]),
        ("app in (web,db)", vec!["db", "web"]),
        ("app notin (web)", vec!["db", "none"]),
        ("tier", vec!["web"]),
        ("!tier", vec!["db", "none"]),
        ("app,!tier", vec!["db"]),
    ];
    for (sel, want) in cases {
        let got: BTreeSet<String> = names(
            &api.list(&ListParams::default().labels(sel))
                .await
                .unwrap()
                .items,
        )
        .into_iter()
        .collect();
        let want: BTreeSet<String> = want.into_iter().map(str::to_string).collect();
        assert_eq!(got, want, "selector {sel}");
    }
    let e = status(
        api.list(&ListParams::default().labels("app in web"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(e.message.contains("labelSelector"), "{}", e.message);
}

#[tokio::test]
async fn field_selectors_scopes_and_all_namespaces() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    namespace(&client, "other").await;
    let here: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let there: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    here.create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    here.create(&PostParams::default(), &cm("b", &[], "1"))
        .await
        .unwrap();
    there
        .create(&PostParams::default(), &cm("a", &[], "1"))
        .await
        .unwrap();
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    assert_eq!(
        here.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.name=a"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.namespace=other"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.name!=a,metadata.namespace==default"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let e = status(
        all.list(&ListParams::default().fields("spec.bogus=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    assert!(
        e.message.contains("field label not supported"),
        "{}",
        e.message
    );
    // Cluster-scoped resources list without a namespace.
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns_names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert!(ns_names.contains(&"default".to_string()) && ns_names.contains(&"other".to_string()));
    // A cluster-scoped resource under a namespace path does not exist.
    let (code, body) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/namespaces",
        None,
        vec![],
    )
    .await;
    assert_eq!((code, body["kind"].as_str()), (404, Some("Status")));
}

#[tokio::test]
async fn discovery_lists_groups_and_resources() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    assert_eq!(
        client.list_core_api_versions().await.unwrap().versions,
        vec!["v1"]
    );
    let core = client.list_core_api_resources("v1").await.unwrap();
    let cm = core
        .resources
        .iter()
        .find(|r| r.name == "configmaps")
        .unwrap();
    assert!(cm.namespaced && cm.verbs.contains(&"watch".to_string()));
    assert!(core.resources.iter().any(|r| r.name == "pods/status"));
    let groups = client.list_api_groups().await.unwrap();
    let names: Vec<_> = groups.groups.iter().map(|g| g.name.as_str()).collect();
    for g in [
        "apps",
        "batch",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "events.k8s.io",
    ] {
        assert!(names.contains(&g), "{g} missing from {names:?}");
    }
    let apps = client.list_api_group_resources("apps/v1").await.unwrap();
    assert!(apps.resources.iter().any(|r| r.kind == "Deployment"));
    let (code, _) = raw(&client, "GET", "/apis/nope/v1", None, vec![]).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn aggregated_discovery_lists_every_resource() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let core = client.list_core_api_versions_aggregated().await.unwrap();
    let v1 = &core.items[0].versions[0];
    assert_eq!(v1.version.as_deref(), Some("v1"));
    let pods = v1
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("pods"))
        .unwrap();
    assert_eq!(pods.scope.as_deref(), Some("Namespaced"));
    assert_eq!(pods.subresources[0].subresource.as_deref(), Some("status"));
    let groups = client.list_api_groups_aggregated().await.unwrap();
    let apps = groups
        .items
        .iter()
        .find(|g| g.metadata.as_ref().and_then(|m| m.name.as_deref()) == Some("apps"))
        .unwrap();
    assert!(
        apps.versions[0]
            .resources
            .iter()
            .any(|r| r.resource.as_deref() == Some("deployments"))
    );
    // Legacy discovery is still what plain JSON gets.
    let legacy = client.list_api_groups().await.unwrap();
    assert!(legacy.groups.iter().any(|g| g.name == "apps"));
}
