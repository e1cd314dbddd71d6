//! A fleet's [`Provider`] as the manager runs it: a runnable on every
//! replica, handed the manager's fleet.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::Runnable;
use crate::cluster::{DynProvider, Fleet};
use crate::error::BoxError;

pub(super) struct ProviderRunnable {
    pub(super) provider: Arc<dyn DynProvider>,
    pub(super) fleet: Fleet,
}

impl Runnable for ProviderRunnable {
    fn name(&self) -> String {
        format!("cluster provider {}", self.provider.name())
    }

    fn needs_leader_election(&self) -> bool {
        false
    }

    fn start(self: Arc<Self>, stop: CancellationToken) -> BoxFuture<'static, Result<(), BoxError>> {
        Arc::clone(&self.provider).run(self.fleet.clone(), stop)
    }
}
