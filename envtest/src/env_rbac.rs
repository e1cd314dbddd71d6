//! Clients restricted by RBAC: [`TestEnv::client_with_cluster_role`] and
//! [`TestEnv::client_with_role`] store a role, bind it to a service account
//! and hand back a client acting as that account, so a test proves a role is
//! sufficient (the code under test works) and minimal (a rule taken away
//! makes a request fail with 403 Forbidden).

use crate::env::TestEnv;
use crate::error::Error;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_client::Api;
use kube_client::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

const MANAGER: &str = "envtest";

fn subject(namespace: &str, name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
        api_group: None,
    }
}

/// Create or replace `obj` (server-side apply, forced).
async fn apply<K>(api: &Api<K>, name: &str, obj: &K, what: &str) -> Result<(), Error>
where
    K: kube_client::Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map(drop)
    .map_err(|source| Error::Setup {
        what: format!("apply {what} {name}"),
        source,
    })
}

impl TestEnv {
    /// Store `role` (create or replace), bind it cluster-wide to service
    /// account `namespace/name` with a ClusterRoleBinding of the same name,
    /// and return a client acting as that account. Change or replace the
    /// role later through [`TestEnv::client`]; the next request sees it.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
    /// let env = envtest::TestEnv::start().await?;
    /// let mut role = ClusterRole::default();
    /// role.metadata.name = Some("cm-reader".into());
    /// role.rules = Some(vec![PolicyRule {
    ///     api_groups: Some(vec!["".into()]),
    ///     resources: Some(vec!["configmaps".into()]),
    ///     verbs: vec!["list".into()],
    ///     ..Default::default()
    /// }]);
    /// let client = env.client_with_cluster_role("default", "reader", &role).await?;
    /// let cms: kube_client::Api<ConfigMap> = kube_client::Api::all(client);
    /// assert!(cms.list(&Default::default()).await.is_ok());
    /// # Ok(()) }
    /// ```
    pub async fn client_with_cluster_role(
        &self,
        namespace: &str,
        name: &str,
        role: &ClusterRole,
    ) -> Result<kube_client::Client, Error> {
        let role_name = role
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| name.to_string());
        let mut role = role.clone();
        role.metadata.name = Some(role_name.clone());
        role.metadata.resource_version = None;
        apply(&Api::all(self.client()), &role_name, &role, "ClusterRole").await?;
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(role_name.clone()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role_name.clone(),
            },
            subjects: Some(vec![subject(namespace, name)]),
        };
        apply(
            &Api::all(self.client()),
            &role_name,
            &binding,
            "ClusterRoleBinding",
        )
        .await?;
        self.service_account_client(namespace, name)
    }

    /// Store `role` (create or replace) in its namespace (default
    /// `namespace`), bind it there to service account `namespace/name` with
    /// a RoleBinding of the same name, and return a client acting as that
    /// account: it may do what `role` allows in that namespace only.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use k8s_openapi::api::rbac::v1::Role;
    /// let env = envtest::TestEnv::start().await?;
    /// let mut role = Role::default();
    /// role.metadata.name = Some("nothing".into());
    /// let client = env.client_with_role("default", "idle", &role).await?;
    /// # drop(client); Ok(()) }
    /// ```
    pub async fn client_with_role(
        &self,
        namespace: &str,
        name: &str,
        role: &Role,
    ) -> Result<kube_client::Client, Error> {
        let role_name = role
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| name.to_string());
        let role_ns = role
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.to_string());
        let mut role = role.clone();
        role.metadata.name = Some(role_name.clone());
        role.metadata.namespace = Some(role_ns.clone());
        role.metadata.resource_version = None;
        apply(
            &Api::namespaced(self.client(), &role_ns),
            &role_name,
            &role,
            "Role",
        )
        .await?;
        let binding = RoleBinding {
            metadata: ObjectMeta {
                name: Some(role_name.clone()),
                namespace: Some(role_ns.clone()),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: role_name.clone(),
            },
            subjects: Some(vec![subject(namespace, name)]),
        };
        let api = Api::namespaced(self.client(), &role_ns);
        apply(&api, &role_name, &binding, "RoleBinding").await?;
        self.service_account_client(namespace, name)
    }
}
