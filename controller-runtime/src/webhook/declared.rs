//! What the cluster's webhook manifests send reviews to, as the manager
//! checks it against the handlers registered before it starts: built by
//! [`super::WebhookManifests::options`], carried by
//! [`super::WebhookOptions`], checked by the server.
//!
//! Part of the webhook layer; imports nothing.

/// A webhook the cluster's manifests send reviews to (declared with
/// `#[controller(webhooks(..))]` or a [`super::WebhookManifests`]): the
/// manager refuses to start while one has no handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Declared {
    /// An admission webhook at `path` for `kind` (`group/version Kind`).
    Admission {
        /// The path the configuration names.
        path: String,
        /// The kind, for the message.
        kind: String,
        /// `validator` or `defaulter`, for the message.
        handler: &'static str,
    },
    /// The conversion of `group`'s `kind` at `/convert`, for `crd`.
    Conversion {
        /// The kind's group.
        group: String,
        /// The kind.
        kind: String,
        /// The CRD naming `/convert`.
        crd: String,
    },
}
