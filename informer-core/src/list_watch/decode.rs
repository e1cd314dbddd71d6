//! Decoding what the API server sends for LIST and WATCH: a list page in
//! one pass when every item fits `K` (its metadata handed on before the
//! items, so the next page can be asked for while they decode), item by
//! item otherwise; a watch event the same way. An object that does not fit
//! `K` is reported as a [`DecodeFailure`], never fatal to its page or stream.

use std::marker::PhantomData;

use kube_core::Status;
use serde::Deserialize;
use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{Bookmark, DecodeFailure, ListPage, ListWatchError, WatchEvent};

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// Just enough of an object to name it in a log line.
#[derive(Deserialize, Default)]
struct RawObject {
    #[serde(default)]
    metadata: RawObjectMeta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawObjectMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

impl RawObject {
    fn into_bookmark(self) -> Bookmark {
        Bookmark {
            resource_version: self.metadata.resource_version.unwrap_or_default(),
            annotations: self.metadata.annotations.unwrap_or_default(),
        }
    }
}

fn decode_failure(event_type: &str, raw: &str, error: &serde_json::Error) -> DecodeFailure {
    let meta = serde_json::from_str::<RawObject>(raw)
        .map(|o| o.metadata)
        .unwrap_or_default();
    let key = meta.name.map(|name| match meta.namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name,
    });
    DecodeFailure {
        event_type: Some(event_type.to_owned()),
        key,
        resource_version: meta.resource_version,
        error: error.to_string(),
    }
}

/// A LIST answer decoded in one pass (the common case: every item fits
/// `K`), handing the list's metadata to `on_meta` as soon as it is read:
/// before the items when the server sends it first, as API servers do.
struct TypedList<K, F> {
    on_meta: F,
    _kind: PhantomData<fn() -> K>,
}

/// The top-level fields of a list.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum ListField {
    Metadata,
    Items,
    #[serde(other)]
    Other,
}

impl<'de, K, F> DeserializeSeed<'de> for TypedList<K, F>
where
    K: DeserializeOwned,
    F: FnMut(&RawListMeta),
{
    type Value = (RawListMeta, Vec<K>);

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K, F> Visitor<'de> for TypedList<K, F>
where
    K: DeserializeOwned,
    F: FnMut(&RawListMeta),
{
    type Value = (RawListMeta, Vec<K>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Kubernetes list")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut meta = None;
        let mut items = None;
        while let Some(field) = map.next_key::<ListField>()? {
            match field {
                ListField::Metadata => {
                    let m = map.next_value::<Option<RawListMeta>>()?.unwrap_or_default();
                    (self.on_meta)(&m);
                    meta = Some(m);
                }
                ListField::Items => items = map.next_value::<Option<Vec<K>>>()?,
                ListField::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok((meta.unwrap_or_default(), items.unwrap_or_default()))
    }
}

/// Runs `seed` over the whole input: trailing characters are an error.
fn whole<'de, R, S>(mut de: serde_json::Deserializer<R>, seed: S) -> serde_json::Result<S::Value>
where
    R: serde_json::de::Read<'de>,
    S: DeserializeSeed<'de>,
{
    let value = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Decodes a LIST answer: in one pass when every item fits `K`, else item
/// by item so that the items that fit are kept and the others reported.
#[cfg(test)]
pub(super) fn decode_list<K: DeserializeOwned>(body: &[u8]) -> Result<ListPage<K>, ListWatchError> {
    decode_list_then(body, |_| {})
}

/// [`decode_list`], handing the page's continue token (if it has one) to
/// `on_continue` as soon as it is read: before the items are decoded when
/// the metadata comes first.
pub(super) fn decode_list_then<K: DeserializeOwned>(
    body: &[u8],
    on_continue: impl FnOnce(&str),
) -> Result<ListPage<K>, ListWatchError> {
    let mut on_continue = Some(on_continue);
    let mut tell = |meta: &RawListMeta| {
        let token = meta.continue_token.as_deref().filter(|t| !t.is_empty());
        if let (Some(token), Some(f)) = (token, on_continue.take()) {
            f(token);
        }
    };
    let seed = TypedList::<K, _> {
        on_meta: &mut tell,
        _kind: PhantomData,
    };
    // Validating UTF-8 once up front lets the parser skip it for every string.
    let typed = match std::str::from_utf8(body) {
        Ok(text) => whole(serde_json::Deserializer::from_str(text), seed),
        Err(_) => whole(serde_json::Deserializer::from_slice(body), seed),
    };
    if let Ok((meta, items)) = typed {
        return Ok(ListPage {
            items,
            resource_version: meta.resource_version.unwrap_or_default(),
            continue_token: meta.continue_token.filter(|c| !c.is_empty()),
            undecodable: Vec::new(),
        });
    }
    let raw: RawList<'_> = serde_json::from_slice(body).map_err(ListWatchError::DecodeList)?;
    tell(&raw.metadata);
    let raw_items = raw.items.unwrap_or_default();
    let mut page = ListPage {
        items: Vec::with_capacity(raw_items.len()),
        resource_version: raw.metadata.resource_version.unwrap_or_default(),
        continue_token: raw.metadata.continue_token.filter(|c| !c.is_empty()),
        undecodable: Vec::new(),
    };
    for item in raw_items {
        match serde_json::from_str::<K>(item.get()) {
            Ok(obj) => page.items.push(obj),
            Err(e) => page
                .undecodable
                .push(decode_failure("LIST", item.get(), &e)),
        }
    }
    Ok(page)
}

/// A watch event decoded in one pass (the common case).
#[derive(Deserialize)]
#[serde(tag = "type", content = "object", rename_all = "UPPERCASE")]
#[serde(bound = "K: DeserializeOwned")]
enum TypedEvent<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    Bookmark(RawObject),
    Error(Status),
}

/// Decodes one line of a watch stream: in one pass when it fits, else
/// envelope first, so that an object that does not fit `K` is reported
/// with its key instead of ending the stream.
pub(super) fn decode_event<K: DeserializeOwned>(
    line: &[u8],
) -> Result<WatchEvent<K>, ListWatchError> {
    if let Ok(event) = serde_json::from_slice::<TypedEvent<K>>(line) {
        return match event {
            TypedEvent::Added(o) => Ok(WatchEvent::Added(o)),
            TypedEvent::Modified(o) => Ok(WatchEvent::Modified(o)),
            TypedEvent::Deleted(o) => Ok(WatchEvent::Deleted(o)),
            TypedEvent::Bookmark(o) => Ok(WatchEvent::Bookmark(o.into_bookmark())),
            TypedEvent::Error(status) => Err(ListWatchError::Api {
                status: Box::new(status),
                retry_after: None,
            }),
        };
    }
    let raw: RawEvent<'_> = match serde_json::from_slice(line) {
        Ok(raw) => raw,
        Err(e) => {
            return Ok(WatchEvent::Undecodable(DecodeFailure {
                event_type: None,
                key: None,
                resource_version: None,
                error: e.to_string(),
            }));
        }
    };
    let object = raw.object.get();
    let decoded = match raw.kind.as_str() {
        "ADDED" => serde_json::from_str(object).map(WatchEvent::Added),
        "MODIFIED" => serde_json::from_str(object).map(WatchEvent::Modified),
        "DELETED" => serde_json::from_str(object).map(WatchEvent::Deleted),
        "BOOKMARK" => serde_json::from_str::<RawObject>(object)
            .map(|o| WatchEvent::Bookmark(o.into_bookmark())),
        "ERROR" => {
            return match serde_json::from_str::<Status>(object) {
                Ok(status) => Err(ListWatchError::Api {
                    status: Box::new(status),
                    retry_after: None,
                }),
                Err(e) => Ok(WatchEvent::Undecodable(decode_failure("ERROR", object, &e))),
            };
        }
        other => {
            return Ok(WatchEvent::Undecodable(DecodeFailure {
                event_type: Some(other.to_owned()),
                key: None,
                resource_version: None,
                error: format!("unknown watch event type {other:?}"),
            }));
        }
    };
    Ok(decoded.unwrap_or_else(|e| WatchEvent::Undecodable(decode_failure(&raw.kind, object, &e))))
}

#[cfg(test)]
mod tests;
