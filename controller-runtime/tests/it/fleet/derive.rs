//! `#[derive(Controller)]` with `fleet`: the derived controller runs over
//! the fleet through `setup_fleet`, its reconcile unchanged, under exactly
//! the generated RBAC, enforced by the servers: the hub's identity holds
//! `fleet_hub_rbac` alone (the SecretProvider reads the kubeconfig
//! Secrets), each member's identity `fleet_member_rbac` alone; no request
//! is forbidden anywhere. `setup_hub_and_fleet` reconciles the manager's
//! own cluster and the members in one controller.

use std::collections::BTreeMap;

use controller_runtime::cluster::SecretProvider;
use controller_runtime::predicate::{Predicate, from_fn};
use controller_runtime::prelude::*;
use envtest::TestEnv;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::fixture::{fleet_manager, servers};
use super::{LONG, fast_backoff};
use crate::eventually;
use crate::fixture::{spawn_manager, stop_manager};

const LABEL: &str = "fleet-copy";
const ACCOUNT: &str = "fleet-copier";

/// Keeps a Secret `<name>-copy` of each labelled ConfigMap, in its own
/// cluster, naming that cluster.
#[derive(Controller)]
#[controller(for = ConfigMap, owns(Secret), predicate = labelled(), name = "fleet-copier", fleet)]
struct FleetCopier;

fn labelled() -> impl Predicate<ConfigMap> {
    from_fn(|cm: &ConfigMap| cm.labels().contains_key(LABEL))
}

impl ObjectReconciler<ConfigMap> for FleetCopier {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        copy(&cm, ctx, []).await
    }
}

/// Makes the Secret `<name>-copy` of `cm` in its own cluster, once, naming
/// that cluster (and whatever `extra` adds).
async fn copy<const N: usize>(
    cm: &ConfigMap,
    ctx: &ObjectContext<ConfigMap>,
    extra: [(&str, &str); N],
) -> Result<Action, kube_client::Error> {
    let mut s = Secret::default();
    s.metadata.name = Some(format!("{}-copy", cm.name_any()));
    s.metadata.owner_references = cm.controller_owner_ref(&()).map(|o| vec![o]);
    let cluster = match ctx.cluster() {
        "" => "own",
        member => member,
    };
    let data = [("cluster", cluster)].into_iter().chain(extra);
    s.data = Some(
        data.map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect(),
    );
    let secrets = ctx.api_for::<Secret>();
    let name = s.name_any();
    if secrets.get_opt(&name).await?.is_none() {
        secrets.create(&PostParams::default(), &s).await?;
    }
    Ok(Action::done())
}

/// A hub and two member servers, and a client of the hub acting as
/// `account` with the hub role `role(namespace)` alone.
async fn hub_and_members(
    account: &str,
    role: fn(&str) -> k8s_openapi::api::rbac::v1::Role,
) -> (TestEnv, [TestEnv; 2], kube_client::Client) {
    let [hub, m0, m1] = servers().await;
    let members = [m0, m1];
    let ns = hub.namespace().to_string();
    let hub_client = hub
        .client_with_role(&ns, account, &role(&ns))
        .await
        .unwrap();
    (hub, members, hub_client)
}

/// Binds `role` in each member to the service account `account`, and
/// adds each member to the hub as a kubeconfig Secret `m<i>` labelled for
/// the `SecretProvider`.
async fn add_members(
    hub: &TestEnv,
    members: &[TestEnv],
    account: &str,
    role: &k8s_openapi::api::rbac::v1::ClusterRole,
) {
    let secrets: Api<Secret> = Api::namespaced(hub.client(), hub.namespace());
    for (i, member) in members.iter().enumerate() {
        member
            .client_with_cluster_role("default", account, role)
            .await
            .unwrap();
        let token = member.service_account_token("default", account);
        let kubeconfig =
            envtest::kubeconfig_yaml_with_ca(member.base_url(), Some(&token), member.ca_pem());
        let mut secret = Secret::default();
        secret.metadata.name = Some(format!("m{i}"));
        secret.metadata.labels = Some(BTreeMap::from([("fleet".into(), "member".into())]));
        secret.data = Some(BTreeMap::from([(
            "kubeconfig".into(),
            ByteString(kubeconfig.into_bytes()),
        )]));
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
}

fn forbidden(env: &TestEnv) -> Vec<String> {
    env.request_log()
        .into_iter()
        .filter(|r| r.status == 403)
        .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
        .collect()
}

/// The cluster the copy of `name` in `env` names, once there is one.
async fn copied(env: &TestEnv, name: &str) -> Option<String> {
    let secret = Api::<Secret>::namespaced(env.client(), env.namespace())
        .get_opt(&format!("{name}-copy"))
        .await
        .unwrap()?;
    let data = secret.data.unwrap_or_default();
    Some(String::from_utf8_lossy(&data.get("cluster")?.0).into_owned())
}

#[test]
fn the_generated_roles_split_the_hub_from_the_members() {
    let member = FleetCopier::fleet_member_permissions();
    for verb in ["get", "list", "watch"] {
        assert!(member.allows("", "configmaps", verb), "{verb}");
        assert!(member.allows("", "secrets", verb), "{verb}");
    }
    assert!(member.allows("", "secrets", "create"));
    assert!(member.allows("events.k8s.io", "events", "create"));
    assert!(!member.allows("coordination.k8s.io", "leases", "get"));
    let hub = FleetCopier::fleet_hub_permissions();
    for verb in ["get", "list", "watch"] {
        assert!(hub.allows("", "secrets", verb), "{verb}");
    }
    assert!(!hub.allows("", "secrets", "create"));
    assert!(
        !hub.allows("", "configmaps", "list"),
        "the hub is not reconciled"
    );
    let role = FleetCopier::fleet_hub_rbac("fleet-system");
    assert_eq!(role.metadata.name.as_deref(), Some("fleet-copier"));
    assert_eq!(role.metadata.namespace.as_deref(), Some("fleet-system"));
    assert_eq!(
        FleetCopier::fleet_member_rbac().metadata.name.as_deref(),
        Some("fleet-copier")
    );
}

#[tokio::test]
async fn a_derived_controller_reconciles_in_two_clusters_under_the_generated_rbac() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (hub, members, hub_client) = hub_and_members(ACCOUNT, FleetCopier::fleet_hub_rbac).await;
    let ns = hub.namespace().to_string();
    let mgr = Manager::builder(hub_client.clone())
        .fleet_backoff(fast_backoff())
        .provider(SecretProvider::new(hub_client, &ns, "fleet=member"))
        .build()
        .await
        .unwrap();
    FleetCopier.setup_fleet(&mgr).unwrap();
    let (stop, task) = spawn_manager(&mgr);

    add_members(&hub, &members, ACCOUNT, &FleetCopier::fleet_member_rbac()).await;
    for (i, member) in members.iter().enumerate() {
        let api: Api<ConfigMap> = Api::namespaced(member.client(), member.namespace());
        let mut cm = crate::config_map(member.namespace(), "app");
        cm.metadata.labels = Some(BTreeMap::from([(LABEL.into(), "yes".into())]));
        api.create(&PostParams::default(), &cm).await.unwrap();
        let mut plain = crate::config_map(member.namespace(), "plain");
        plain.data = Some(BTreeMap::from([("i".into(), i.to_string())]));
        api.create(&PostParams::default(), &plain).await.unwrap();
    }
    for (i, member) in members.iter().enumerate() {
        let want = format!("m{i}");
        eventually(LONG, &format!("the copy in {want}"), || async {
            (copied(member, "app").await.as_deref() == Some(want.as_str())).then_some(())
        })
        .await;
        assert_eq!(copied(member, "plain").await, None, "the predicate holds");
    }
    // The owned Secret is watched in each member: deleted, it is made again.
    Api::<Secret>::namespaced(members[1].client(), members[1].namespace())
        .delete("app-copy", &DeleteParams::default())
        .await
        .unwrap();
    eventually(LONG, "the copy in m1 made again", || async {
        (copied(&members[1], "app").await.as_deref() == Some("m1")).then_some(())
    })
    .await;

    for env in [&hub, &members[0], &members[1]] {
        let denied = forbidden(env);
        assert!(denied.is_empty(), "outside the generated RBAC: {denied:?}");
    }
    stop_manager(stop, task).await;
}

/// `setup_hub_and_fleet`: one derived controller, under one name,
/// reconciles the manager's own cluster and two members.
#[tokio::test]
async fn one_derived_controller_reconciles_the_hub_and_two_members() {
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let [hub, m0, m1] = servers().await;
    let members = [m0, m1];
    let mgr = fleet_manager(&hub).await;
    let controller = FleetCopier.setup_hub_and_fleet(&mgr).unwrap();
    assert_eq!(controller.name(), "fleet-copier");
    let (stop, task) = spawn_manager(&mgr);
    for (i, member) in members.iter().enumerate() {
        mgr.fleet()
            .engage(&format!("m{i}"), member.client())
            .unwrap();
    }
    for env in [&hub, &members[0], &members[1]] {
        let api: Api<ConfigMap> = Api::namespaced(env.client(), env.namespace());
        let mut cm = crate::config_map(env.namespace(), "app");
        cm.metadata.labels = Some(BTreeMap::from([(LABEL.into(), "yes".into())]));
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    for (env, want) in [(&hub, "own"), (&members[0], "m0"), (&members[1], "m1")] {
        eventually(LONG, &format!("the copy in {want}"), || async {
            (copied(env, "app").await.as_deref() == Some(want)).then_some(())
        })
        .await;
    }
    stop_manager(stop, task).await;
}

const SHARDED_ACCOUNT: &str = "fleet-spread";

/// `fleet` with `sharding`: the same copy, naming the replica that made
/// it, from replicas of a ring spreading `cluster/namespace/name`.
#[derive(Controller)]
#[controller(
    for = ConfigMap,
    owns(Secret),
    predicate = labelled(),
    name = "fleet-spread",
    sharding,
    fleet
)]
struct SpreadCopier {
    replica: String,
}

impl ObjectReconciler<ConfigMap> for SpreadCopier {
    type Error = kube_client::Error;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &ObjectContext<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        copy(&cm, ctx, [("replica", self.replica.as_str())]).await
    }
}

/// Two replicas of a derived `fleet, sharding` controller over two member
/// clusters, under the generated roles (the hub's now with the shard
/// Leases): each copy is made by the replica the ring gives its
/// `cluster/namespace/name`, and nothing is forbidden anywhere.
#[tokio::test]
async fn a_derived_fleet_controller_runs_sharded_under_the_generated_rbac() {
    use controller_runtime::__test_support::Ring;
    if envtest::skip_on_existing_cluster("several in-process API servers") {
        return;
    }
    let (hub, members, hub_client) =
        hub_and_members(SHARDED_ACCOUNT, SpreadCopier::fleet_hub_rbac).await;
    let ns = hub.namespace().to_string();
    add_members(
        &hub,
        &members,
        SHARDED_ACCOUNT,
        &SpreadCopier::fleet_member_rbac(),
    )
    .await;
    let mut replicas = Vec::new();
    for id in ["a", "b"] {
        let mgr = Manager::builder(hub_client.clone())
            .fleet_backoff(fast_backoff())
            .provider(SecretProvider::new(hub_client.clone(), &ns, "fleet=member"))
            .build()
            .await
            .unwrap();
        let mut config = crate::sharding::ring_config("it-fleet-spread", id);
        config.namespace = ns.clone();
        SpreadCopier {
            replica: id.to_string(),
        }
        .setup_fleet_sharded(&mgr, config)
        .unwrap();
        let (stop, task) = spawn_manager(&mgr);
        replicas.push((mgr, stop, task));
    }
    let check = "shard-fleet-spread";
    eventually(LONG, "both replicas in a settled ring", || async {
        replicas
            .iter()
            .all(|(mgr, _, _)| mgr.readyz_checks().run_one(check) == Some(Ok(())))
            .then_some(())
    })
    .await;
    let names: Vec<String> = (0..6).map(|i| format!("app{i}")).collect();
    for member in &members {
        let api: Api<ConfigMap> = Api::namespaced(member.client(), member.namespace());
        for name in &names {
            let mut cm = crate::config_map(member.namespace(), name);
            cm.metadata.labels = Some(BTreeMap::from([(LABEL.into(), "yes".into())]));
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
    }
    let ring = Ring::new(["a", "b"]);
    let mut made_by = BTreeMap::new();
    for (i, member) in members.iter().enumerate() {
        for name in &names {
            let key = format!("m{i}/{}/{name}", member.namespace());
            let replica = eventually(LONG, &format!("the copy of {key}"), || async {
                let secret = Api::<Secret>::namespaced(member.client(), member.namespace())
                    .get_opt(&format!("{name}-copy"))
                    .await
                    .ok()??;
                let data = secret.data.unwrap_or_default();
                Some(String::from_utf8_lossy(&data.get("replica")?.0).into_owned())
            })
            .await;
            assert_eq!(Some(replica.as_str()), ring.owner(&key), "{key}");
            *made_by.entry(replica).or_insert(0) += 1;
        }
    }
    assert_eq!(made_by.len(), 2, "both replicas worked: {made_by:?}");
    for env in [&hub, &members[0], &members[1]] {
        let denied = forbidden(env);
        assert!(denied.is_empty(), "outside the generated RBAC: {denied:?}");
    }
    for (_, stop, task) in replicas {
        stop_manager(stop, task).await;
    }
}
