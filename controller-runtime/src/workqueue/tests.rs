//! Tests of the workqueue by topic: the queue's behaviour, its state
//! machine, property tests, and the helpers the other test modules share.

mod props;
mod queue;
mod state;
pub(super) mod support;
