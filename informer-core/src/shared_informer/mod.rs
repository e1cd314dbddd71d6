//! shared_informer (being written).

mod handler;

pub use handler::{HandlerFns, ResourceEventHandler, handler_fn};
