//! The URLs of LIST and WATCH calls: selectors, limits, continue tokens
//! and resource version semantics as query parameters.

use super::{ListRequest, ListWatchOptions, ResourceVersionMatch, WatchRequest};

fn selectors(q: &mut form_urlencoded::Serializer<'_, String>, options: &ListWatchOptions) {
    if let Some(s) = options.label_selector.as_deref().filter(|s| !s.is_empty()) {
        q.append_pair("labelSelector", s);
    }
    if let Some(s) = options.field_selector.as_deref().filter(|s| !s.is_empty()) {
        q.append_pair("fieldSelector", s);
    }
}

/// The URL of one LIST call.
pub(crate) fn list_url(base: &str, options: &ListWatchOptions, req: &ListRequest) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    selectors(&mut q, options);
    if let Some(limit) = req.limit {
        q.append_pair("limit", &limit.to_string());
    }
    match req.continue_token.as_deref() {
        // The server refuses a resource version together with a continue token.
        Some(token) => {
            q.append_pair("continue", token);
        }
        None => {
            if !req.resource_version.is_empty() {
                q.append_pair("resourceVersion", &req.resource_version);
                if let Some(m) = req.resource_version_match {
                    q.append_pair("resourceVersionMatch", m.as_str());
                }
            }
        }
    }
    join(base, q.finish())
}

/// The URL of one WATCH call.
pub(crate) fn watch_url(base: &str, options: &ListWatchOptions, req: &WatchRequest) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    q.append_pair("watch", "true");
    selectors(&mut q, options);
    if !req.resource_version.is_empty() {
        q.append_pair("resourceVersion", &req.resource_version);
    }
    if let Some(t) = req.timeout_seconds {
        q.append_pair("timeoutSeconds", &t.to_string());
    }
    if req.allow_bookmarks || req.send_initial_events {
        q.append_pair("allowWatchBookmarks", "true");
    }
    if req.send_initial_events {
        q.append_pair("sendInitialEvents", "true");
        q.append_pair(
            "resourceVersionMatch",
            ResourceVersionMatch::NotOlderThan.as_str(),
        );
    }
    join(base, q.finish())
}

fn join(url: &str, query: String) -> String {
    if query.is_empty() {
        url.to_owned()
    } else {
        format!("{url}?{query}")
    }
}
