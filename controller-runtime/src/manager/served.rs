//! The start-up check that every resource the controllers watch is served
//! by the API server (Go's controller-runtime fails its start the same way,
//! with "no matches for kind"). Without it, a controller whose CRD is not
//! installed would retry 404s until its cache-sync timeout.
//!
//! The check asks discovery (`/api/<version>` or `/apis/<group>/<version>`)
//! once per group-version. A resource missing from the answer (or a
//! group-version answered 404) is not served. Any other failure (a 403 for
//! a restricted user, a network error, no answer within
//! [`DISCOVERY_TIMEOUT`]) says nothing about the resource: it is logged and
//! the start goes on, the informers' own retries taking over.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube_client::Client;
use kube_client::core::ApiResource;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ManagerError;

/// How long one discovery request may take before the check gives up on
/// it (and lets the start go on).
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often discovery is asked again while
/// [`wait_for_crds`](super::ManagerBuilder::wait_for_crds) waits.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The API groups Kubernetes itself serves (k8s.io/api's groups, with
/// apiextensions and apiregistration): a resource in any other group comes
/// from a CustomResourceDefinition (or an aggregated API server).
const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admission.k8s.io",
    "admissionregistration.k8s.io",
    "apidiscovery.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "extensions",
    "flowcontrol.apiserver.k8s.io",
    "imagepolicy.k8s.io",
    "internal.apiserver.k8s.io",
    "lifecycle.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// A resource a controller watches that the API server does not serve,
/// in [`ManagerError::NotServed`].
///
/// ```
/// use controller_runtime::manager::UnservedResource;
/// let missing = UnservedResource {
///     controller: "foo".into(),
///     group: "samplecontroller.k8s.io".into(),
///     version: "v1".into(),
///     resource: "foos".into(),
///     kind: "Foo".into(),
///     crd: Some("foos.samplecontroller.k8s.io".into()),
/// };
/// assert!(missing.to_string().contains("CustomResourceDefinition foos.samplecontroller.k8s.io"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnservedResource {
    /// The controller that watches it.
    pub controller: String,
    /// Its API group (empty for the core group).
    pub group: String,
    /// Its version.
    pub version: String,
    /// Its resource (the plural, as in URLs).
    pub resource: String,
    /// Its kind.
    pub kind: String,
    /// For a resource outside Kubernetes' own groups: the name of the
    /// CustomResourceDefinition that would serve it, `<plural>.<group>`.
    pub crd: Option<String>,
}

impl std::fmt::Display for UnservedResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(
            f,
            "controller {:?} watches {} (group {group}, version {}, resource {}), which the API server does not serve",
            self.controller, self.kind, self.version, self.resource
        )?;
        if let Some(crd) = &self.crd {
            write!(f, "; is the CustomResourceDefinition {crd} installed?")?;
        }
        Ok(())
    }
}

/// The resources the controllers watch, and how long to wait for them.
#[derive(Debug, Default)]
pub(super) struct ServedCheck {
    /// (controller, resource), in registration order.
    watched: Mutex<Vec<(String, ApiResource)>>,
    /// [`ManagerBuilder::wait_for_crds`](super::ManagerBuilder::wait_for_crds).
    pub(super) wait: Option<Duration>,
}

impl ServedCheck {
    pub(super) fn new(wait: Option<Duration>) -> Self {
        ServedCheck {
            watched: Mutex::new(Vec::new()),
            wait,
        }
    }

    pub(super) fn add(&self, controller: &str, resources: impl IntoIterator<Item = ApiResource>) {
        let mut watched = self.watched.lock();
        for resource in resources {
            let entry = (controller.to_string(), resource);
            if !watched.contains(&entry) {
                watched.push(entry);
            }
        }
    }

    /// Checks that every watched resource is served; waits for those that
    /// are not for the configured time. Returns `Ok` at once when
    /// `shutdown` fires (the manager is stopping anyway).
    pub(super) async fn run(
        &self,
        client: &Client,
        shutdown: &CancellationToken,
    ) -> Result<(), ManagerError> {
        let watched = self.watched.lock().clone();
        if watched.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let mut announced = false;
        loop {
            let unserved = unserved(client, &watched).await;
            if unserved.is_empty() {
                if announced {
                    tracing::info!("every watched resource is served; starting");
                }
                return Ok(());
            }
            let Some(wait) = self.wait.filter(|w| started.elapsed() < *w) else {
                return Err(ManagerError::NotServed {
                    unserved,
                    waited: self.wait,
                });
            };
            if !announced {
                for missing in &unserved {
                    tracing::info!(%missing, timeout = ?wait, "waiting for a watched resource to be served");
                }
                announced = true;
            }
            let next = (started + wait).min(Instant::now() + POLL_INTERVAL);
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }
}

/// The watched resources discovery says are not served.
async fn unserved(client: &Client, watched: &[(String, ApiResource)]) -> Vec<UnservedResource> {
    let mut served: BTreeMap<(String, String), Option<BTreeSet<String>>> = BTreeMap::new();
    let mut missing = Vec::new();
    for (controller, resource) in watched {
        let gv = (resource.group.clone(), resource.version.clone());
        if !served.contains_key(&gv) {
            let found = discover(client, &gv.0, &gv.1).await;
            served.insert(gv.clone(), found);
        }
        let is_served = served
            .get(&gv)
            .and_then(Option::as_ref)
            .is_none_or(|names| names.contains(&resource.plural));
        if !is_served {
            missing.push(UnservedResource {
                controller: controller.clone(),
                group: resource.group.clone(),
                version: resource.version.clone(),
                resource: resource.plural.clone(),
                kind: resource.kind.clone(),
                crd: crd_name(&resource.group, &resource.plural),
            });
        }
    }
    missing
}

/// The CustomResourceDefinition that would serve `plural` in `group`, when
/// the group is not one of Kubernetes' own.
fn crd_name(group: &str, plural: &str) -> Option<String> {
    (!BUILT_IN_GROUPS.contains(&group)).then(|| format!("{plural}.{group}"))
}

/// The resources served in `group`/`version` (empty when the group-version
/// is not served at all), or `None` when discovery did not say.
async fn discover(client: &Client, group: &str, version: &str) -> Option<BTreeSet<String>> {
    let request = async {
        if group.is_empty() {
            client.list_core_api_resources(version).await
        } else {
            client
                .list_api_group_resources(&format!("{group}/{version}"))
                .await
        }
    };
    match tokio::time::timeout(DISCOVERY_TIMEOUT, request).await {
        Ok(Ok(list)) => Some(list.resources.into_iter().map(|r| r.name).collect()),
        Ok(Err(kube_client::Error::Api(status))) if status.code == 404 => Some(BTreeSet::new()),
        Ok(Err(error)) => {
            tracing::warn!(%error, group, version, "discovery failed; not checking that the watched resources are served");
            None
        }
        Err(_) => {
            tracing::warn!(group, version, timeout = ?DISCOVERY_TIMEOUT, "discovery did not answer; not checking that the watched resources are served");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_resources_outside_the_built_in_groups_name_a_crd() {
        assert_eq!(
            crd_name("example.com", "things").as_deref(),
            Some("things.example.com")
        );
        // A CRD's group may end in k8s.io, as the sample's does.
        assert_eq!(
            crd_name("samplecontroller.k8s.io", "foos").as_deref(),
            Some("foos.samplecontroller.k8s.io")
        );
        assert_eq!(crd_name("apps", "deployments"), None);
        assert_eq!(crd_name("", "configmaps"), None);
        assert_eq!(crd_name("rbac.authorization.k8s.io", "roles"), None);
    }

    #[test]
    fn the_message_names_group_version_resource_and_crd() {
        let missing = UnservedResource {
            controller: "c".into(),
            group: String::new(),
            version: "v1".into(),
            resource: "things".into(),
            kind: "Thing".into(),
            crd: None,
        };
        let text = missing.to_string();
        assert!(
            text.contains("group core, version v1, resource things"),
            "{text}"
        );
        assert!(!text.contains("CustomResourceDefinition"), "{text}");
    }
}
