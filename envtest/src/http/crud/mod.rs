//! Request handlers for objects: reads here (GET and LIST with
//! resourceVersion semantics, `limit` + `continue` pagination from one
//! snapshot, selectors), writes in [`write`], deletion in [`delete`].
//!
//! GET/LIST `resourceVersion`: unset or `0` serve the latest state; `N`
//! serves the latest state if the server has reached `N` and answers 504
//! (reason Timeout, cause ResourceVersionTooLarge) otherwise;
//! `resourceVersionMatch=Exact` serves the snapshot at exactly `N` (410 once
//! `N` left the history window).

mod admit;
mod delete;
mod gc;
mod persist;
mod scale;
mod write;

pub use delete::{delete, delete_collection};
pub use scale::scale;
pub use write::{create, patch, update};

use crate::error::ApiError;
use crate::http::state::{Server, Target};
use crate::request::Req;
use crate::resources::objects::{
    Filter, decode_continue, encode_continue, json_response, obj_key, render,
};
use crate::storage::{ObjKey, StorageError, StoredObject};
use axum::response::Response;
use bytes::Bytes;
use std::sync::Arc;

/// Parse a resourceVersion parameter: None for unset/empty.
pub(crate) fn parse_rv(s: Option<&str>) -> Result<Option<u64>, ApiError> {
    match s {
        None | Some("") => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: Invalid value: {v:?}: must be a resource version returned by this server"))
        }),
    }
}

fn check_not_too_new(srv: &Server, rv: Option<u64>) -> Result<(), ApiError> {
    if let Some(n) = rv {
        let cur = srv.store.rev();
        if n > cur {
            return Err(ApiError::too_large_rv(n, cur));
        }
    }
    Ok(())
}

/// GET one object.
pub async fn get(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let name = t.name.as_deref().unwrap_or("");
    check_not_too_new(srv, parse_rv(r.query.get("resourceVersion"))?)?;
    let key = obj_key(&t.info, t.namespace.as_deref(), name);
    let obj = srv
        .store
        .txn(|txn| txn.get(&t.info.storage_key(), &key))
        .ok_or_else(|| ApiError::not_found(&t.info.group, &t.info.plural, name))?;
    let obj = crate::http::conversion::present_one(srv, &t.info, obj).await?;
    if crate::resources::table::wants_table(r.accept()) {
        return Ok(crate::resources::table::single(&t.info, &obj));
    }
    Ok(json_response(200, render(&obj, &t.info)))
}

fn expired_continue(e: StorageError) -> ApiError {
    match e {
        StorageError::Expired { .. } => ApiError::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        ),
        StorageError::TooLarge { requested, current } => ApiError::too_large_rv(requested, current),
    }
}

/// LIST a collection.
pub async fn list(srv: &Arc<Server>, t: &Target, r: &Req) -> Result<Response, ApiError> {
    let info = &t.info;
    let filter = Filter::from_query(info, t.namespace.as_deref(), &r.query)?;
    let rv = parse_rv(r.query.get("resourceVersion"))?;
    let limit: usize = match r.query.get("limit") {
        None | Some("") | Some("0") => 0,
        Some(l) => l.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "limit: Invalid value: {l:?}: must be a non-negative integer"
            ))
        })?,
    };
    let rv_match = r.query.get("resourceVersionMatch").unwrap_or("");
    let cont = r.query.get("continue").filter(|c| !c.is_empty());
    let res = info.storage_key();

    // Pick the snapshot: its revision (None = latest) and the key to start after.
    let (at, after): (Option<u64>, Option<ObjKey>) = if let Some(token) = cont {
        if rv.is_some() {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        if !rv_match.is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        let (rev, last) = decode_continue(token)?;
        (Some(rev), Some(last))
    } else {
        match (rv_match, rv) {
            ("", _) | ("NotOlderThan", Some(_)) => {
                check_not_too_new(srv, rv)?;
                (None, None)
            }
            ("Exact", Some(n)) if n > 0 => (Some(n), None),
            ("NotOlderThan" | "Exact", _) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Forbidden: resourceVersionMatch {rv_match} requires a non-zero resourceVersion"
                )));
            }
            (other, _) => {
                return Err(ApiError::bad_request(format!(
                    "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
                )));
            }
        }
    };

    // O(page): the storage stops at the first object past the page and
    // remembers the remaining count from one page to the next.
    let request = crate::storage::PageRequest {
        res: &res,
        at,
        ns: filter.namespace.as_deref(),
        after: after.as_ref(),
        limit,
        count_remaining: !filter.has_selectors(),
    };
    // The scan already keeps to the namespace (it is part of the key), so
    // without selectors every object it visits matches: skip the lookups.
    let selective = filter.has_selectors();
    let page = srv.store.list_page(&request, |obj| {
        !selective || filter.matches(info, &obj.value)
    });
    let crate::storage::Page {
        rev: snap_rev,
        items: matched,
        last: last_key,
        more,
        remaining,
    } = page.map_err(|e| match (e, cont.is_some()) {
        (e @ StorageError::Expired { .. }, true) => expired_continue(e),
        (StorageError::Expired { requested, oldest }, false) => {
            ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
        }
        (StorageError::TooLarge { requested, current }, _) => {
            ApiError::too_large_rv(requested, current)
        }
    })?;
    // A page in another version than stored goes through one conversion.
    let matched = crate::http::conversion::present(srv, info, matched).await?;
    let matched: Vec<&Arc<StoredObject>> = matched.iter().collect();
    let continue_token = match (more, &last_key) {
        (true, Some(k)) => Some(encode_continue(snap_rev, k)),
        _ => None,
    };
    if crate::resources::table::wants_table(r.accept()) {
        return Ok(crate::resources::table::list(
            info,
            &matched,
            snap_rev,
            continue_token.as_deref(),
        ));
    }
    let mut meta = serde_json::json!({"resourceVersion": snap_rev.to_string()});
    if let Some(tok) = &continue_token {
        meta["continue"] = serde_json::Value::String(tok.clone());
        if !filter.has_selectors() {
            meta["remainingItemCount"] = serde_json::json!(remaining);
        }
    }
    let values: Vec<&serde_json::Value> = matched.iter().map(|o| &o.value).collect();
    if let Some(resp) = crate::codec::metadata_list(info, r.accept(), &values, &meta) {
        return Ok(resp);
    }
    if let Some(resp) = crate::codec::protobuf_list(info, r.accept(), &matched, &meta) {
        return Ok(resp);
    }
    let items: Vec<Bytes> = matched.iter().map(|o| render(o, info)).collect();
    let head = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
        info.kind,
        info.api_version(),
        meta
    );
    let total: usize = head.len() + items.iter().map(|i| i.len() + 1).sum::<usize>() + 2;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(head.as_bytes());
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.extend_from_slice(b"]}");
    Ok(json_response(200, Bytes::from(out)))
}
