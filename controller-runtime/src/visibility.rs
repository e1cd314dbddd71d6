//! Compile checks (doc tests only) that the machinery a user does not call
//! stays out of the public API, and that each re-exported item has one
//! path besides the prelude (issue "Composition", finding 11). Each block
//! compiled before the items were made private or re-exported once.
//!
//! Sharding's gate, its in-flight marks and its installation:
//!
//! ```compile_fail
//! use controller_runtime::sharding::assignment::ShardGate;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::assignment::InFlight;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::controller::install;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::controller::ByShard;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::membership::AckHandle;
//! ```
//!
//! The webhook server's parts:
//!
//! ```compile_fail
//! use controller_runtime::webhook::CertKeeper;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::InFlight;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::ListeningServer;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::tls::SystemClock;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::tls::CertKeeper;
//! ```
//!
//! The TLS stack and certificates the webhook server shares with the secure
//! metrics endpoint are at `tls` alone (issue 45: the `webhook` feature),
//! not also at `webhook`:
//!
//! ```compile_fail
//! use controller_runtime::webhook::CertResolver;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::ServerLimits;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::SelfSigned;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::SecretCerts;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::CertDir;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::webhook::Clock;
//! ```
//!
//! The reconcile vocabulary is at the crate root (and in the prelude), not
//! also in the modules that define it or in `reconcile`:
//!
//! ```compile_fail
//! use controller_runtime::action::Action;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::request::Request;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::terminal::Terminal;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::error::BoxError;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::reconcile::Action;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::reconcile::TerminalError;
//! ```
//!
//! YAML rendering is `manifests`, not `rbac`:
//!
//! ```compile_fail
//! use controller_runtime::rbac::to_yaml;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::rbac::RbacError;
//! ```
//!
//! `.sharded(&membership).complete(r)` is the one way to build a sharded
//! controller:
//!
//! ```compile_fail
//! use controller_runtime::sharding::controller::complete_sharded;
//! ```
//!
//! One path per item (issue 45): the modules' items are not also at the
//! root, the prelude's `Controller` is the derive alone, and the ring's
//! internals are crate-private:
//!
//! ```compile_fail
//! use controller_runtime::Manager;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::Reconciler;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::Cache;
//! ```
//!
//! ```compile_fail
//! fn f(_: controller_runtime::prelude::Controller) {}
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::ring::Ring;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::view::RingView;
//! ```
//!
//! ```compile_fail
//! use controller_runtime::sharding::labels::Labelled;
//! ```
//!
//! `IntoReconciler` is sealed:
//!
//! ```compile_fail
//! use controller_runtime::reconcile::{ByRequest, IntoReconciler, Reconciler};
//! struct Mine<R>(R);
//! impl<R: Reconciler> IntoReconciler<(), ByRequest> for Mine<R> {
//!     type Reconciler = R;
//!     fn into_reconciler(
//!         self,
//!         _: &controller_runtime::cache::Cache,
//!         _: &controller_runtime::kube_client::Client,
//!         _: controller_runtime::events::EventRecorder,
//!     ) -> R {
//!         self.0
//!     }
//! }
//! ```
//!
//! The paths that stay:
//!
//! ```
//! use controller_runtime::manifests::{RenderError, to_yaml};
//! use controller_runtime::{Action, BoxError, Request, Terminal, TerminalError};
//! use controller_runtime::tls::{CertResolver, Clock, SecretCerts, ServerLimits};
//! use controller_runtime::webhook::WebhookOptions;
//! use controller_runtime::controller::Controller;
//! use controller_runtime::manager::Manager;
//! use controller_runtime::reconcile::Reconciler;
//! use controller_runtime::sharding::copy_shard_labels;
//! use controller_runtime::sharding::membership::RingView;
//! ```
