//! client-go's informer machinery for Rust.
//!
//! Data flows one way: the API server is read by a [`reflector::Reflector`]
//! (list + watch) through a [`list_watch::ListerWatcher`], which feeds a
//! [`delta_fifo::DeltaFifo`]; a [`shared_informer::SharedIndexInformer`] pops
//! the FIFO, keeps an [`store::Indexer`] in step and fans each change out to
//! many [`shared_informer::ResourceEventHandler`]s, each with its own buffer.
//! [`lister::Lister`]s read the indexer; a [`factory::SharedInformerFactory`]
//! shares one informer per type between everyone who asks.

pub mod delta_fifo;
pub mod factory;
pub mod handler;
pub mod key;
pub mod list_watch;
pub mod lister;
pub mod metrics;
pub mod processor;
pub mod reflector;
pub mod selector;
pub mod shared_informer;
pub mod store;
