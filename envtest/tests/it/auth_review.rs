//! `SelfSubjectAccessReview`, `SelfSubjectRulesReview` and
//! `SelfSubjectReview` answer from the RBAC that is enforced: for a
//! restricted service account they agree with what its requests get, for
//! the admin everything is allowed; they are discovered, read protobuf
//! bodies (as kubectl sends), and refuse a malformed spec with 422.
//! `TokenReview` names the service account of a token it issued and
//! nobody for another; `SubjectAccessReview` decides for the user and
//! groups of its spec from the stored RBAC, `nonResourceURLs` included.

use crate::{raw, status, status as status_of};
use envtest::TestEnv;
use k8s_openapi::api::authentication::v1::{
    SelfSubjectReview, TokenReview, TokenReviewSpec, TokenReviewStatus, UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview,
    SelfSubjectAccessReviewSpec, SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectRulesReviewStatus,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube_client::Client;
use kube_client::api::{Api, PostParams};

/// Service account `team/ctl` allowed get, list and create on configmaps in
/// namespace `team` only.
async fn restricted(env: &TestEnv) -> Client {
    crate::namespace(&env.client(), "team").await;
    let mut role = Role::default();
    role.metadata.name = Some("cm-writer".into());
    role.rules = Some(vec![PolicyRule {
        api_groups: Some(vec!["".into()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: vec!["get".into(), "list".into(), "create".into()],
        ..PolicyRule::default()
    }]);
    env.client_with_role("team", "ctl", &role).await.unwrap()
}

async fn can_i(client: &Client, verb: &str, resource: &str, namespace: &str) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await.unwrap();
    // The spec comes back as sent.
    assert_eq!(answer.spec, review.spec);
    answer.status.unwrap().allowed
}

async fn rules(client: &Client, namespace: &str) -> SubjectRulesReviewStatus {
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(namespace.into()),
        },
        ..SelfSubjectRulesReview::default()
    };
    let api: Api<SelfSubjectRulesReview> = Api::all(client.clone());
    api.create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
}

async fn whoami(client: &Client) -> (String, Vec<String>) {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = answer.status.unwrap().user_info.unwrap();
    (user.username.unwrap(), user.groups.unwrap_or_default())
}

#[tokio::test]
async fn access_reviews_agree_with_enforcement_for_a_service_account() {
    let env = TestEnv::start().await.unwrap();
    let sa = restricted(&env).await;
    let cases = [
        ("create", "configmaps", "team", true),
        ("list", "configmaps", "team", true),
        ("delete", "configmaps", "team", false),
        ("create", "configmaps", "default", false),
        ("get", "secrets", "team", false),
    ];
    for (verb, resource, ns, expected) in cases {
        assert_eq!(
            can_i(&sa, verb, resource, ns).await,
            expected,
            "{verb} {resource} in {ns}"
        );
    }
    // What the review says is what the server does.
    let team: Api<ConfigMap> = Api::namespaced(sa.clone(), "team");
    team.create(&PostParams::default(), &crate::cm("a", &[], "1"))
        .await
        .unwrap();
    let e = status(team.delete("a", &Default::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    let default: Api<ConfigMap> = Api::namespaced(sa.clone(), "default");
    let e = status(
        default
            .create(&PostParams::default(), &crate::cm("a", &[], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    // Non-resource paths: reads only, as enforced.
    let api: Api<SelfSubjectAccessReview> = Api::all(sa);
    for (verb, allowed) in [("get", true), ("post", false)] {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/version".into()),
                    verb: Some(verb.into()),
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = api.create(&PostParams::default(), &review).await.unwrap();
        assert_eq!(answer.status.unwrap().allowed, allowed, "{verb} /version");
    }
}

#[tokio::test]
async fn rules_reviews_list_what_the_bindings_grant_in_the_namespace() {
    let env = TestEnv::start().await.unwrap();
    let sa = restricted(&env).await;
    let granted = |s: &SubjectRulesReviewStatus, resource: &str| {
        s.resource_rules
            .iter()
            .filter(|r| {
                r.resources
                    .as_ref()
                    .is_some_and(|rs| rs.iter().any(|x| x == resource))
            })
            .flat_map(|r| r.verbs.clone())
            .collect::<Vec<_>>()
    };
    let team = rules(&sa, "team").await;
    assert_eq!(granted(&team, "configmaps"), vec!["get", "list", "create"]);
    // Every authenticated user may ask what it may do.
    assert_eq!(granted(&team, "selfsubjectaccessreviews"), vec!["create"]);
    assert!(!team.incomplete);
    let elsewhere = rules(&sa, "default").await;
    assert!(granted(&elsewhere, "configmaps").is_empty());
    assert_eq!(
        granted(&elsewhere, "selfsubjectrulesreviews"),
        vec!["create"]
    );

    let admin = rules(&env.client(), "default").await;
    assert_eq!(admin.resource_rules.len(), 1);
    assert_eq!(admin.resource_rules[0].verbs, vec!["*"]);
    assert_eq!(
        admin.resource_rules[0].resources.as_deref(),
        Some(&["*".to_string()][..])
    );
}

#[tokio::test]
async fn the_admin_may_do_anything_and_whoami_names_each_identity() {
    let env = TestEnv::start().await.unwrap();
    let sa = restricted(&env).await;
    let admin = env.client();
    assert!(can_i(&admin, "delete", "secrets", "kube-system").await);
    assert!(can_i(&admin, "*", "*", "").await);
    assert!(!can_i(&sa, "*", "*", "").await);

    let (name, groups) = whoami(&admin).await;
    assert_eq!(name, "envtest-admin");
    assert!(groups.contains(&"system:masters".to_string()), "{groups:?}");
    let (name, groups) = whoami(&sa).await;
    assert_eq!(name, "system:serviceaccount:team:ctl");
    assert!(
        groups.contains(&"system:serviceaccounts:team".to_string()),
        "{groups:?}"
    );
}

#[tokio::test]
async fn reviews_are_discovered_and_read_protobuf_bodies() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let (code, list) = raw(
        &client,
        "GET",
        "/apis/authorization.k8s.io/v1",
        None,
        vec![],
    )
    .await;
    assert_eq!(code, 200);
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec![
            "selfsubjectaccessreviews",
            "selfsubjectrulesreviews",
            "subjectaccessreviews"
        ]
    );
    let (_, groups) = raw(&client, "GET", "/apis", None, vec![]).await;
    let groups = groups["groups"].to_string();
    assert!(groups.contains("\"authentication.k8s.io\""), "{groups}");

    // kubectl's body: k8s\0 + runtime.Unknown{raw: SelfSubjectAccessReview}.
    let sa = restricted(&env).await;
    let attrs = [ld(1, b"team"), ld(2, b"create"), ld(5, b"configmaps")].concat();
    let review = ld(2, &ld(1, &attrs));
    let mut body = b"k8s\0".to_vec();
    body.extend(ld(
        1,
        &[
            ld(1, b"authorization.k8s.io/v1"),
            ld(2, b"SelfSubjectAccessReview"),
        ]
        .concat(),
    ));
    body.extend(ld(2, &review));
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let proto = Some("application/vnd.kubernetes.protobuf");
    let (code, answer) = raw(&sa, "POST", path, proto, body.clone()).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["status"]["allowed"], true);
    assert_eq!(answer["spec"]["resourceAttributes"]["namespace"], "team");
    // Cut short: a clear 400, not a guess.
    let (code, answer) = raw(&sa, "POST", path, proto, body[..body.len() - 3].to_vec()).await;
    assert_eq!(code, 400, "{answer}");
}

#[tokio::test]
async fn malformed_reviews_are_refused() {
    let env = TestEnv::start().await.unwrap();
    let client = env.client();
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let json = Some("application/json");
    let (code, st) = raw(&client, "POST", path, json, br#"{"spec":{}}"#.to_vec()).await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (422, Some("Invalid")),
        "{st}"
    );
    let (code, _) = raw(&client, "POST", path, json, b"{".to_vec()).await;
    assert_eq!(code, 400);
    let (code, _) = raw(&client, "GET", path, None, vec![]).await;
    assert_eq!(code, 405);
}

async fn token_review(client: &Client, token: &str) -> TokenReviewStatus {
    // `token` is an `Option<String>` up to Kubernetes 1.35 and a `String`
    // from 1.36: `.into()` is one spelling for both.
    #[allow(clippy::useless_conversion)]
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_owned().into(),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let api: Api<TokenReview> = Api::all(client.clone());
    api.create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
}

async fn may(client: &Client, user: &UserInfo, spec: SubjectAccessReviewSpec) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            ..spec
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    api.create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

fn get_path(path: &str) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some(path.into()),
            verb: Some("get".into()),
        }),
        ..SubjectAccessReviewSpec::default()
    }
}

#[tokio::test]
async fn token_and_subject_access_reviews_answer_for_someone_else() {
    let env = TestEnv::builder()
        .bearer_token("admin-token")
        .start()
        .await
        .unwrap();
    let admin = env.client();
    let token = env.service_account_token("monitoring", "prometheus");
    let status = token_review(&admin, &token).await;
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:monitoring:prometheus")
    );
    assert!(
        user.groups
            .as_ref()
            .unwrap()
            .contains(&"system:authenticated".to_string())
    );
    let unknown = token_review(&admin, "nobody's").await;
    assert_eq!(unknown.authenticated, Some(false));
    assert_eq!(unknown.error.as_deref(), Some("invalid bearer token"));
    let own = token_review(&admin, "admin-token").await;
    assert!(
        own.user
            .unwrap()
            .groups
            .unwrap()
            .contains(&"system:masters".to_string())
    );

    // Non-resource URLs: discovery for everyone authenticated, /metrics
    // only through a ClusterRoleBinding.
    assert!(may(&admin, &user, get_path("/healthz")).await);
    assert!(may(&admin, &user, get_path("/apis/apps/v1")).await);
    assert!(!may(&admin, &user, get_path("/metrics")).await);
    let mut reader = ClusterRole::default();
    reader.metadata.name = Some("metrics-reader".into());
    reader.rules = Some(vec![PolicyRule {
        non_resource_urls: Some(vec!["/metrics".into(), "/debug/*".into()]),
        verbs: vec!["get".into()],
        ..PolicyRule::default()
    }]);
    env.client_with_cluster_role("monitoring", "prometheus", &reader)
        .await
        .unwrap();
    assert!(may(&admin, &user, get_path("/metrics")).await);
    assert!(may(&admin, &user, get_path("/debug/pprof/heap")).await);
    assert!(!may(&admin, &user, get_path("/metrics/extra")).await);
    let mut post = get_path("/metrics");
    post.non_resource_attributes.as_mut().unwrap().verb = Some("post".into());
    assert!(!may(&admin, &user, post).await);
    // Resource attributes: the same rules enforcement uses.
    let list_cms = SubjectAccessReviewSpec {
        resource_attributes: Some(ResourceAttributes {
            verb: Some("list".into()),
            resource: Some("configmaps".into()),
            namespace: Some("monitoring".into()),
            ..ResourceAttributes::default()
        }),
        ..SubjectAccessReviewSpec::default()
    };
    assert!(!may(&admin, &user, list_cms.clone()).await);
    let masters = UserInfo {
        username: Some("root".into()),
        groups: Some(vec!["system:masters".into()]),
        ..UserInfo::default()
    };
    assert!(may(&admin, &masters, list_cms).await);

    // Asking needs RBAC like any other create; a spec without a subject is 422.
    let sa = env
        .service_account_client("monitoring", "prometheus")
        .unwrap();
    let api: Api<TokenReview> = Api::all(sa);
    let denied = api
        .create(&PostParams::default(), &TokenReview::default())
        .await
        .unwrap_err();
    assert_eq!(status_of(denied).code, 403);
    let api: Api<SubjectAccessReview> = Api::all(admin);
    let invalid = api
        .create(
            &PostParams::default(),
            &SubjectAccessReview {
                spec: get_path("/metrics"),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(status_of(invalid).code, 422);
}

/// A protobuf length-delimited field.
fn ld(field: u8, bytes: &[u8]) -> Vec<u8> {
    assert!(field < 16 && bytes.len() < 128, "short fields only");
    let mut out = vec![field << 3 | 2, bytes.len() as u8];
    out.extend_from_slice(bytes);
    out
}
