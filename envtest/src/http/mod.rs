//! The HTTP layer, the top of the server: the router and its middleware
//! (authentication, authorization, faults and the request log, body and time
//! limits), the per-server state, discovery, OpenAPI, token and access
//! reviews, the create/read/update/delete handlers, watch streaming and the
//! listener that answers malformed requests with a `Status`. A request flows
//! down from here: through the codec, to the resource strategies, to storage.

pub mod admin;
pub mod admission;
pub mod auth_review;
pub mod authz;
pub mod conversion;
pub mod crud;
pub mod discovery;
pub mod early_errors;
pub mod faults;
pub mod openapi;
pub mod server;
pub mod state;
pub mod watch;
