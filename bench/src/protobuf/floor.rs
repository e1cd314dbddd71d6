//! The protobuf decode floor: the list pages of a kind, fetched once in
//! protobuf and held in memory, decoded by the decoder the informer uses
//! (`informer_codec`: each page's envelope split into its items' messages,
//! each message decoded into the k8s-openapi type, managedFields dropped
//! while decoding when stripped) into `Arc<K>`s in a `Vec`. No network, no
//! reflector, no DeltaFIFO, no Indexer: what a sync cannot cost less than.
//! Its CPU is the bench process's CPU clock, as for the syncs; its
//! retained heap is the objects' own size.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use informer_codec::{DecodeOptions, Decoder, Envelope, ListParts};

use super::{Sample, cpu_time};
use crate::BenchError;
use crate::heap::Window;

/// Decodes `pages` into `objects` `Arc<K>`s (managedFields dropped when
/// `strip`).
pub async fn floor<K: 'static>(
    pages: &[Bytes],
    objects: usize,
    strip: bool,
) -> Result<Sample, BenchError> {
    let decoder =
        Decoder::<K>::new().ok_or_else(|| BenchError::msg("no protobuf decoder for this kind"))?;
    let opts = DecodeOptions {
        strip_managed_fields: strip,
    };
    crate::heap::settle().await;
    let heap = Window::start();
    let cpu = cpu_time();
    let start = Instant::now();
    let mut all: Vec<Arc<K>> = Vec::with_capacity(objects);
    for page in pages {
        let envelope = Envelope::read(page).map_err(BenchError::msg)?;
        let parts = ListParts::read(&envelope).map_err(BenchError::msg)?;
        for item in &parts.items {
            all.push(Arc::new(
                decoder.decode(item, opts).map_err(BenchError::msg)?,
            ));
        }
    }
    let sample = Sample {
        cpu: cpu_time().saturating_sub(cpu),
        elapsed: start.elapsed(),
        retained: heap.retained(),
    };
    BenchError::expect_len("protobuf floor", all.len(), objects)?;
    drop(all);
    Ok(sample)
}
