//! Clients restricted by RBAC: [`TestEnv::client_with_cluster_role`] and
//! [`TestEnv::client_with_role`] store a role, bind it to a service account
//! and hand back a client acting as that account, so a test proves a role is
//! sufficient (the code under test works) and minimal (a rule taken away
//! makes a request fail with 403 Forbidden).
//!
//! On an existing cluster they change nothing of the cluster's own: the
//! ClusterRole and ClusterRoleBinding get the env's per-run name
//! ([`TestEnv::cluster_scoped_name`]), as does a Role outside the env's
//! namespace, and all carry the run label, so the teardown removes them.

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

/// Make a caller's role storable: named (`default_name` when it has no
/// name), in `namespace` for a Role, without a resourceVersion (it is
/// created or replaced whatever is stored). On an existing cluster a
/// cluster-scoped role, or a Role outside the env's namespace, gets the
/// env's per-run name, and every role the run label.
fn prepare(env: &TestEnv, meta: &mut ObjectMeta, default_name: &str, namespace: Option<String>) {
    let name = meta
        .name
        .clone()
        .unwrap_or_else(|| default_name.to_string());
    let shared = namespace.as_deref().is_none_or(|ns| ns != env.namespace());
    meta.name = Some(if shared {
        env.cluster_scoped_name(&name)
    } else {
        name
    });
    meta.namespace = namespace;
    meta.resource_version = None;
    let labels = env.run_labels();
    if !labels.is_empty() {
        meta.labels
            .get_or_insert_with(Default::default)
            .extend(labels);
    }
}

/// The binding of role `meta` (of kind `kind`) to service account
/// `namespace/name`: (metadata, roleRef, subjects), named and labelled as
/// the role.
fn binding_parts(
    meta: &ObjectMeta,
    kind: &str,
    namespace: &str,
    name: &str,
) -> (ObjectMeta, RoleRef, Option<Vec<Subject>>) {
    let role_name = meta.name.clone().unwrap_or_default();
    let binding_meta = ObjectMeta {
        name: Some(role_name.clone()),
        namespace: meta.namespace.clone(),
        labels: meta.labels.clone(),
        ..ObjectMeta::default()
    };
    // `api_group` is a `String` up to Kubernetes 1.35 and an
    // `Option<String>` from 1.36: `.into()` is one spelling for both.
    #[allow(clippy::useless_conversion)]
    let role_ref = RoleRef {
        api_group: String::from("rbac.authorization.k8s.io").into(),
        kind: kind.into(),
        name: role_name,
    };
    (binding_meta, role_ref, Some(vec![subject(namespace, name)]))
}

/// Create or replace `obj` (server-side apply, forced).
async fn apply<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: kube_client::Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map(drop)
    .map_err(|source| Error::Setup {
        what: format!("apply {} {name}", K::kind(&())),
        source,
    })
}

impl TestEnv {
    /// Store `role` (create or replace), bind it cluster-wide to service
    /// account `namespace/name` with a ClusterRoleBinding of the same name,
    /// and return a client acting as that account. Change or replace the
    /// role later through [`TestEnv::client`]; the next request sees it.
    ///
    /// On an existing cluster both are named
    /// [`cluster_scoped_name`](TestEnv::cluster_scoped_name)`(name)`
    /// (`<name>-<run id>`) and carry the run label: a ClusterRole or
    /// binding of the cluster's own with the role's name is not touched,
    /// and both are removed when the env is dropped.
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
    /// // The stored role's name:
    /// let stored = env.cluster_scoped_name("cm-reader");
    /// # drop(stored); Ok(()) }
    /// ```
    pub async fn client_with_cluster_role(
        &self,
        namespace: &str,
        name: &str,
        role: &ClusterRole,
    ) -> Result<kube_client::Client, Error> {
        let mut role = role.clone();
        prepare(self, &mut role.metadata, name, None);
        let (metadata, role_ref, subjects) =
            binding_parts(&role.metadata, "ClusterRole", namespace, name);
        let binding = ClusterRoleBinding {
            metadata,
            role_ref,
            subjects,
        };
        let (roles, bindings) = (Api::all(self.client()), Api::all(self.client()));
        self.grant(&roles, &role, &bindings, &binding, namespace, name)
            .await
    }

    /// Store `role` (create or replace) in its namespace (default
    /// `namespace`), bind it there to service account `namespace/name` with
    /// a RoleBinding of the same name, and return a client acting as that
    /// account: it may do what `role` allows in that namespace only. On an
    /// existing cluster both carry the run label, and outside
    /// [`TestEnv::namespace`] they are named
    /// [`cluster_scoped_name`](TestEnv::cluster_scoped_name)`(name)`.
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
        let mut role = role.clone();
        let role_ns = role
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.to_string());
        prepare(self, &mut role.metadata, name, Some(role_ns.clone()));
        let (metadata, role_ref, subjects) = binding_parts(&role.metadata, "Role", namespace, name);
        let binding = RoleBinding {
            metadata,
            role_ref,
            subjects,
        };
        let roles = Api::namespaced(self.client(), &role_ns);
        let bindings = Api::namespaced(self.client(), &role_ns);
        self.grant(&roles, &role, &bindings, &binding, namespace, name)
            .await
    }

    /// Store a role and its binding, then hand out the bound account's client.
    async fn grant<R, B>(
        &self,
        roles: &Api<R>,
        role: &R,
        bindings: &Api<B>,
        binding: &B,
        namespace: &str,
        name: &str,
    ) -> Result<kube_client::Client, Error>
    where
        R: kube_client::Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
        B: kube_client::Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
    {
        apply(roles, role).await?;
        apply(bindings, binding).await?;
        self.service_account_client(namespace, name)
    }
}
