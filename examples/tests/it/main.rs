//! The examples' integration tests: each program runs as a separate process,
//! as a user would run it from a fresh clone. Most run their bounded demo on
//! the embedded API server and must exit successfully having printed their
//! story (the demos check their own end states and fail with a message when
//! one is not reached); `graceful` drives one against an in-process envtest
//! server and sends it SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_choice;
mod graceful;
mod programs;
mod sample_controller;
mod sample_kubectl;
mod sample_manifests;
mod sample_support;
mod sample_webhooks;
