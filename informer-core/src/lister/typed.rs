//! Typed accessors for the built-in namespaced kinds, so a lister reads the
//! way client-go's generated listers do: `lister.deployments("ns").get("web")`
//! on a `Lister<Deployment>`, `lister.pods("ns").list(&selector)` on a
//! `Lister<Pod>`. Each is [`Lister::namespace`] under the kind's plural;
//! derived custom resources get the same from `#[derive(CustomResource)]`.

use k8s_openapi::api::{
    apps::v1 as apps, autoscaling::v2 as autoscaling, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
};

use super::{Lister, NamespaceLister};

macro_rules! namespaced_listers {
    ($($kind:ty => $plural:ident),* $(,)?) => {$(
        impl Lister<$kind> {
            #[doc = concat!(
                "The `", stringify!($kind), "` objects of `namespace` ",
                "(the same as [`namespace`](Lister::namespace))."
            )]
            pub fn $plural(&self, namespace: &str) -> NamespaceLister<$kind> {
                self.namespace(namespace)
            }
        }
    )*};
}

namespaced_listers! {
    core::Pod => pods,
    core::Service => services,
    core::ConfigMap => config_maps,
    core::Secret => secrets,
    core::ServiceAccount => service_accounts,
    core::Endpoints => endpoints,
    core::Event => events,
    core::PersistentVolumeClaim => persistent_volume_claims,
    core::ReplicationController => replication_controllers,
    core::ResourceQuota => resource_quotas,
    core::LimitRange => limit_ranges,
    core::PodTemplate => pod_templates,
    apps::Deployment => deployments,
    apps::ReplicaSet => replica_sets,
    apps::StatefulSet => stateful_sets,
    apps::DaemonSet => daemon_sets,
    apps::ControllerRevision => controller_revisions,
    batch::Job => jobs,
    batch::CronJob => cron_jobs,
    networking::Ingress => ingresses,
    networking::NetworkPolicy => network_policies,
    rbac::Role => roles,
    rbac::RoleBinding => role_bindings,
    coordination::Lease => leases,
    autoscaling::HorizontalPodAutoscaler => horizontal_pod_autoscalers,
    policy::PodDisruptionBudget => pod_disruption_budgets,
    discovery::EndpointSlice => endpoint_slices,
    events::Event => events,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::selector::LabelSelector;
    use crate::store::Indexer;

    #[test]
    fn typed_accessors_read_one_namespace() {
        let indexer = Indexer::<apps::Deployment>::new();
        for (ns, name) in [("a", "web"), ("b", "web"), ("a", "db")] {
            let mut d = apps::Deployment::default();
            d.metadata.name = Some(name.into());
            d.metadata.namespace = Some(ns.into());
            indexer.add(Arc::new(d)).unwrap();
        }
        let lister = Lister::new(indexer);
        assert_eq!(
            lister
                .deployments("a")
                .list(&LabelSelector::everything())
                .len(),
            2
        );
        let web = lister.deployments("b").get("web").unwrap();
        assert_eq!(web.metadata.namespace.as_deref(), Some("b"));
        assert!(lister.deployments("b").get("db").is_none());

        let pods = Lister::new(Indexer::<core::Pod>::new());
        assert!(pods.pods("a").list(&LabelSelector::everything()).is_empty());
    }
}
