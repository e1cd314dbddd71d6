//! What a controller program uses, in one import:
//! `use controller_runtime::prelude::*;`.
//!
//! Layer 7 (derive support, the top): re-exports from every layer.
//!
//! The manager and the `Controller` derive, the typed and request-based reconcile,
//! actions and terminal errors, events, finalizers, handlers and predicates,
//! the common client types (`Api`, `Client`, patch and list parameters), the
//! `Resource`/`ResourceExt` traits, and `Arc`.
//!
//! ```
//! use controller_runtime::prelude::*;
//! let action = Action::requeue_after(std::time::Duration::from_secs(60));
//! assert!(action.requeue_after.is_some());
//! ```

pub use std::sync::Arc;

pub use kube_client::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
pub use kube_client::{Api, Client, Resource, ResourceExt};

pub use crate::CancellationToken;
pub use crate::action::Action;
pub use crate::cache::{Cache, ListOptions};
pub use crate::controller::ControllerBuilder;
pub use crate::events::{EventInfo, EventRecorder, EventType};
pub use crate::finalizer::{FinalizerError, FinalizerEvent};
pub use crate::handler::{EnqueueRequestForOwner, EnqueueRequestsFromMapFunc, EventHandler};
pub use crate::manager::{Manager, ManagerError};
pub use crate::object::Object;
pub use crate::predicate::{GenerationChanged, Predicate};
pub use crate::reconcile::{CallInfo, Cleanup, ObjectContext, ObjectReconciler, Reconciler};
pub use crate::request::{ClusterRequest, Request};
pub use crate::terminal::{Terminal, TerminalError};
/// The derive of a reconciler's controller (`#[derive(Controller)]`). The
/// controller it builds is [`controller::Controller`](crate::controller::Controller),
/// not in the prelude: one name, one item.
pub use informer_macros::Controller;
