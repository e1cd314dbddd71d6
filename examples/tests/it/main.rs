//! Integration tests of the example programs, run as separate processes
//! against an in-process envtest server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod graceful;
