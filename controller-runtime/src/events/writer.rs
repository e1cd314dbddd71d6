//! The background half of the recorder: folds repeats into series and
//! writes them through a sink.

use std::collections::HashMap;

use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{EventRecord, EventSink, RecorderConfig};

/// Largest `note` the API accepts, in bytes.
const MAX_NOTE_BYTES: usize = 1024;
/// Most records taken off the queue for one round of writes.
const MAX_BATCH: usize = 256;

/// What makes two events "the same" for folding into a series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct EventKey {
    reporting_controller: Option<std::sync::Arc<str>>,
    regarding: [Option<String>; 6],
    related: Option<[Option<String>; 4]>,
    type_: &'static str,
    reason: String,
    action: String,
    note: String,
}

impl EventKey {
    fn of(r: &EventRecord) -> Self {
        let o = &r.regarding;
        EventKey {
            reporting_controller: r.reporting_controller.clone(),
            related: r.related.as_ref().map(|o| {
                [
                    o.kind.clone(),
                    o.namespace.clone(),
                    o.name.clone(),
                    o.uid.clone(),
                ]
            }),
            regarding: [
                o.api_version.clone(),
                o.kind.clone(),
                o.namespace.clone(),
                o.name.clone(),
                o.uid.clone(),
                o.field_path.clone(),
            ],
            type_: r.type_.as_str(),
            reason: r.reason.clone(),
            action: r.action.clone(),
            note: r.note.clone(),
        }
    }
}

struct Entry {
    record: EventRecord,
    /// Name and namespace of the written Event; `None` until created.
    written: Option<(String, String)>,
    count: i32,
    last_seen: Instant,
    first_time: jiff::Timestamp,
}

/// Takes events off the recorder's queue and writes them; see the
/// [module documentation](super).
pub struct EventWriter<S> {
    rx: mpsc::Receiver<EventRecord>,
    sink: S,
    config: RecorderConfig,
    cache: HashMap<EventKey, Entry>,
}

impl<S: EventSink> EventWriter<S> {
    pub(super) fn new(rx: mpsc::Receiver<EventRecord>, sink: S, config: RecorderConfig) -> Self {
        EventWriter {
            rx,
            sink,
            config,
            cache: HashMap::new(),
        }
    }

    #[cfg(test)]
    pub(super) fn sink_for_tests(&self) -> S
    where
        S: Clone,
    {
        self.sink.clone()
    }

    /// Writes events until `cancel` fires or every recorder is dropped;
    /// events already queued at that point are written before it returns.
    pub async fn run(mut self, cancel: CancellationToken) {
        loop {
            let first = tokio::select! {
                _ = cancel.cancelled() => None,
                r = self.rx.recv() => r,
            };
            let Some(first) = first else { break };
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match self.rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            self.write_batch(batch).await;
        }
        self.rx.close();
        let mut rest = Vec::new();
        while let Ok(r) = self.rx.try_recv() {
            rest.push(r);
        }
        if !rest.is_empty() {
            self.write_batch(rest).await;
        }
    }

    /// Folds `batch` into the cache, then writes each touched event once.
    async fn write_batch(&mut self, batch: Vec<EventRecord>) {
        let now = Instant::now();
        self.cache
            .retain(|_, e| now.saturating_duration_since(e.last_seen) <= self.config.series_window);
        let mut touched: Vec<EventKey> = Vec::new();
        for record in batch {
            let key = EventKey::of(&record);
            match self.cache.get_mut(&key) {
                Some(entry) => {
                    entry.count = entry.count.saturating_add(1);
                    entry.last_seen = now;
                }
                None => {
                    self.make_room();
                    self.cache.insert(
                        key.clone(),
                        Entry {
                            record,
                            written: None,
                            count: 1,
                            last_seen: now,
                            first_time: jiff::Timestamp::now(),
                        },
                    );
                }
            }
            if !touched.contains(&key) {
                touched.push(key);
            }
        }
        for key in touched {
            self.write(&key).await;
        }
    }

    fn make_room(&mut self) {
        while self.cache.len() >= self.config.cache_capacity {
            let oldest = self
                .cache
                .iter()
                .min_by_key(|(_, e)| e.last_seen)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(key) => {
                    self.cache.remove(&key);
                }
                None => break,
            }
        }
    }

    async fn write(&mut self, key: &EventKey) {
        let Some(entry) = self.cache.get(key) else {
            return;
        };
        let series = (entry.count > 1).then(|| EventSeries {
            count: entry.count,
            last_observed_time: MicroTime(jiff::Timestamp::now()),
        });
        if let (Some((namespace, name)), Some(series)) = (entry.written.clone(), series.clone()) {
            match self.sink.update_series(&namespace, &name, series).await {
                Ok(_) => return,
                Err(error) if error.is_not_found() => {
                    tracing::debug!(%error, "event gone; writing it anew");
                }
                Err(error) => {
                    tracing::warn!(%error, "updating event series failed");
                    return;
                }
            }
        }
        let event = self.build_event(&entry.record, entry.first_time, series);
        let name = event.metadata.name.clone().unwrap_or_default();
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        match self.sink.create(event).await {
            Ok(_) => {
                if let Some(entry) = self.cache.get_mut(key) {
                    entry.written = Some((namespace, name));
                }
            }
            Err(error) => {
                tracing::warn!(%error, "writing event failed");
                self.cache.remove(key);
            }
        }
    }

    fn build_event(
        &self,
        record: &EventRecord,
        first_time: jiff::Timestamp,
        series: Option<EventSeries>,
    ) -> Event {
        let regarding_name = record.regarding.name.as_deref().unwrap_or("unknown");
        let namespace = record
            .regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_string());
        let nanos = jiff::Timestamp::now().as_nanosecond();
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{regarding_name}.{nanos:x}")),
                namespace: Some(namespace),
                ..Default::default()
            },
            event_time: Some(MicroTime(first_time)),
            series,
            reporting_controller: Some(
                record
                    .reporting_controller
                    .as_deref()
                    .unwrap_or(&self.config.reporting_controller)
                    .to_string(),
            ),
            reporting_instance: Some(self.config.reporting_instance.clone()),
            action: Some(record.action.clone()),
            reason: Some(record.reason.clone()),
            note: Some(truncate(&record.note, MAX_NOTE_BYTES).to_string()),
            type_: Some(record.type_.as_str().to_string()),
            regarding: Some(record.regarding.clone()),
            related: record.related.clone(),
            ..Default::default()
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes ending on a char boundary.
pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
