//! Where recorded events go: the [`EventSink`] trait and its API-server
//! implementation.

use futures::future::BoxFuture;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use kube_client::Api;
use kube_client::api::{Patch, PatchParams, PostParams};

use super::EventsError;

/// Writes Events. Implemented over the API server by [`ApiEventSink`];
/// tests may implement it in memory.
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event` in its `metadata.namespace`.
    fn create(&self, event: Event) -> BoxFuture<'_, Result<Event, EventsError>>;
    /// Sets the `series` of the existing Event `namespace/name`.
    fn update_series<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        series: EventSeries,
    ) -> BoxFuture<'a, Result<Event, EventsError>>;
}

/// An [`EventSink`] writing `events.k8s.io/v1` Events to the API server.
#[derive(Clone)]
pub struct ApiEventSink {
    client: kube_client::Client,
}

impl ApiEventSink {
    /// A sink writing through `client`.
    pub fn new(client: kube_client::Client) -> Self {
        ApiEventSink { client }
    }
}

impl EventSink for ApiEventSink {
    fn create(&self, event: Event) -> BoxFuture<'_, Result<Event, EventsError>> {
        Box::pin(async move {
            let namespace = event.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
            api.create(&PostParams::default(), &event)
                .await
                .map_err(|source| EventsError::Api {
                    op: "create",
                    name: event.metadata.name.clone().unwrap_or_default(),
                    namespace,
                    source,
                })
        })
    }

    fn update_series<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        series: EventSeries,
    ) -> BoxFuture<'a, Result<Event, EventsError>> {
        Box::pin(async move {
            let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
            let patch = serde_json::json!({ "series": series });
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| EventsError::Api {
                    op: "patch",
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    source,
                })
        })
    }
}
