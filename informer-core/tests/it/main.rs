//! Integration tests of informer-core against an in-process envtest API server.

// Test helpers outside `#[test]` functions unwrap too; a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cache_options;
mod common;
mod custom_resource;
mod factory;
mod hostile_server;
mod list_watch;
mod lister;
mod malformed;
mod module_graph;
mod protobuf;
mod protobuf_props;
mod protobuf_sequences;
mod reflector;
mod reflector_faults;
mod retry_layer;
mod shared_informer;
// Fields k8s-pb lacks exist from Kubernetes 1.36 on.
#[cfg(any(feature = "v1_36", feature = "v1_37"))]
mod version_skew;
