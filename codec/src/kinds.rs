//! The one table of built-in kinds with a protobuf form. `proto` builds
//! the JSON-value codec of every kind from it (what envtest serves and
//! reads), and `typed` the typed decoder of each listed kind (objects with
//! an `ObjectMeta`, what informers read with), so a kind cannot be in one
//! and missing from the other.

/// Calls `$callback! { listed { .. } other { .. } }` with the table:
/// `"apiVersion" "Kind" => path::under::both::crates;` per kind, `listed`
/// the kinds that are listed and watched.
macro_rules! builtin_kinds {
    ($callback:ident) => {
        $callback! {
            // Listed and watched: a codec and a typed decoder each.
            listed {
                "v1" "Namespace" => api::core::v1::Namespace;
                "v1" "Pod" => api::core::v1::Pod;
                "v1" "ConfigMap" => api::core::v1::ConfigMap;
                "v1" "Secret" => api::core::v1::Secret;
                "v1" "Service" => api::core::v1::Service;
                "v1" "ServiceAccount" => api::core::v1::ServiceAccount;
                "v1" "Event" => api::core::v1::Event;
                "v1" "Node" => api::core::v1::Node;
                "v1" "Endpoints" => api::core::v1::Endpoints;
                "v1" "PersistentVolumeClaim" => api::core::v1::PersistentVolumeClaim;
                "v1" "ResourceQuota" => api::core::v1::ResourceQuota;
                "v1" "LimitRange" => api::core::v1::LimitRange;
                "apps/v1" "Deployment" => api::apps::v1::Deployment;
                "apps/v1" "ReplicaSet" => api::apps::v1::ReplicaSet;
                "apps/v1" "StatefulSet" => api::apps::v1::StatefulSet;
                "apps/v1" "DaemonSet" => api::apps::v1::DaemonSet;
                "apps/v1" "ControllerRevision" => api::apps::v1::ControllerRevision;
                "batch/v1" "Job" => api::batch::v1::Job;
                "batch/v1" "CronJob" => api::batch::v1::CronJob;
                "events.k8s.io/v1" "Event" => api::events::v1::Event;
                "coordination.k8s.io/v1" "Lease" => api::coordination::v1::Lease;
                "policy/v1" "PodDisruptionBudget" => api::policy::v1::PodDisruptionBudget;
                "scheduling.k8s.io/v1" "PriorityClass" => api::scheduling::v1::PriorityClass;
                "networking.k8s.io/v1" "Ingress" => api::networking::v1::Ingress;
                "networking.k8s.io/v1" "IngressClass" => api::networking::v1::IngressClass;
                "networking.k8s.io/v1" "NetworkPolicy" => api::networking::v1::NetworkPolicy;
                "rbac.authorization.k8s.io/v1" "Role" => api::rbac::v1::Role;
                "rbac.authorization.k8s.io/v1" "ClusterRole" => api::rbac::v1::ClusterRole;
                "rbac.authorization.k8s.io/v1" "RoleBinding" => api::rbac::v1::RoleBinding;
                "rbac.authorization.k8s.io/v1" "ClusterRoleBinding" => api::rbac::v1::ClusterRoleBinding;
                "apiextensions.k8s.io/v1" "CustomResourceDefinition" => apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
            }
            // Served and read as JSON values only: errors, discovery documents,
            // subresources and reviews (never listed or watched).
            other {
                "v1" "Status" => apimachinery::pkg::apis::meta::v1::Status;
                "v1" "APIVersions" => apimachinery::pkg::apis::meta::v1::APIVersions;
                "v1" "APIGroupList" => apimachinery::pkg::apis::meta::v1::APIGroupList;
                "v1" "APIGroup" => apimachinery::pkg::apis::meta::v1::APIGroup;
                "v1" "APIResourceList" => apimachinery::pkg::apis::meta::v1::APIResourceList;
                "autoscaling/v1" "Scale" => api::autoscaling::v1::Scale;
                "authorization.k8s.io/v1" "SelfSubjectAccessReview" => api::authorization::v1::SelfSubjectAccessReview;
                "authorization.k8s.io/v1" "SelfSubjectRulesReview" => api::authorization::v1::SelfSubjectRulesReview;
                "authentication.k8s.io/v1" "SelfSubjectReview" => api::authentication::v1::SelfSubjectReview;
            }
        }
    };
}

pub(crate) use builtin_kinds;
