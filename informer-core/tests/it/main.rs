//! Integration tests of informer-core against an in-process envtest API server.
