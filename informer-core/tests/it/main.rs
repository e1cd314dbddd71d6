//! Integration tests of informer-core against an in-process envtest API server.

mod factory;
mod lister;
mod shared_informer;
// Helpers unwrap freely, as tests do.
#[cfg(test)]
mod support;
