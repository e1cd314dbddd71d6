//! Metadata-only answers: what a client gets when its `Accept` names
//! `as=PartialObjectMetadata` or `as=PartialObjectMetadataList` (group
//! `meta.k8s.io`, version `v1` or `v1beta1`), as kube-apiserver's response
//! transformation gives them. An object becomes `kind: PartialObjectMetadata`
//! with its whole `metadata` and nothing else; a list becomes
//! `PartialObjectMetadataList` whose items are such objects, keeping the
//! list's `resourceVersion` and `continue` (and `remainingItemCount` in
//! `v1`); every watch event's object is reshaped the same way, `Status`
//! objects (errors) excepted. Asking for the one shape and getting the other
//! (a list as `PartialObjectMetadata`, an object as
//! `PartialObjectMetadataList`) is 406, with the cluster's message.
//!
//! This sits in the codec layer: handlers answer in full JSON, and the answer
//! is reshaped here on its way out, before it is encoded as JSON or protobuf.

use crate::error::ApiError;
use serde_json::{Map, Value, json};

/// A metadata-only shape the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Partial {
    /// `PartialObjectMetadataList` (else `PartialObjectMetadata`).
    pub(crate) list: bool,
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    pub(crate) api_version: &'static str,
}

/// What an `as=`/`g=`/`v=` triple of an `Accept` media range asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conversion {
    /// No `as=`: the resource itself.
    None,
    /// `as=Table` (rendered by the handlers).
    Table,
    /// A metadata-only shape.
    Metadata(Partial),
    /// A kind or group version this server cannot convert to.
    Unsupported,
}

/// Read the conversion parameters of one media range.
pub(crate) fn conversion(params: &[(String, String)]) -> Conversion {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let Some(kind) = get("as") else {
        return Conversion::None;
    };
    if kind == "Table" {
        // Tables keep the leniency they always had here (the handlers
        // render them whatever `g`/`v` say).
        return Conversion::Table;
    }
    let api_version = match (get("g"), get("v")) {
        (Some("meta.k8s.io"), Some("v1")) => "meta.k8s.io/v1",
        (Some("meta.k8s.io"), Some("v1beta1")) => "meta.k8s.io/v1beta1",
        _ => return Conversion::Unsupported,
    };
    match kind {
        "PartialObjectMetadata" => Conversion::Metadata(Partial {
            list: false,
            api_version,
        }),
        "PartialObjectMetadataList" => Conversion::Metadata(Partial {
            list: true,
            api_version,
        }),
        _ => Conversion::Unsupported,
    }
}

fn not_acceptable(message: String) -> ApiError {
    ApiError::new(406, "NotAcceptable", message)
}

/// The Go type the API server names in its 406 messages.
fn go_type(v: &Value, custom: bool) -> String {
    let kind = v["kind"].as_str().unwrap_or("");
    match (custom, kind.ends_with("List")) {
        (true, true) => "*unstructured.UnstructuredList".into(),
        (true, false) => "*unstructured.Unstructured".into(),
        (false, _) => {
            let av = v["apiVersion"].as_str().unwrap_or("");
            let version = av.rsplit('/').next().unwrap_or(av);
            format!("*{version}.{kind}")
        }
    }
}

fn is_list(v: &Value) -> bool {
    v["items"].is_array() && v["kind"].as_str().is_some_and(|k| k.ends_with("List"))
}

/// One object as `PartialObjectMetadata` of `api_version`.
pub(crate) fn object(v: &Value, api_version: &str) -> Value {
    let metadata = v
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    json!({"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": metadata})
}

/// The list metadata a `PartialObjectMetadataList` of `api_version` keeps.
pub(crate) fn list_meta(meta: &Value, api_version: &str) -> Value {
    let keep: &[&str] = if api_version == "meta.k8s.io/v1" {
        &["resourceVersion", "continue", "remainingItemCount"]
    } else {
        &["resourceVersion", "continue"]
    };
    let mut out = Map::new();
    for k in keep {
        if let Some(x) = meta.get(*k) {
            out.insert((*k).to_string(), x.clone());
        }
    }
    Value::Object(out)
}

/// A list as `PartialObjectMetadataList` of `api_version`.
pub(crate) fn list(v: &Value, api_version: &str) -> Value {
    let items: Vec<Value> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|it| object(it, api_version))
        .collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": api_version,
        "metadata": list_meta(&v["metadata"], api_version), "items": items})
}

/// Marks an answer a handler already gave in its metadata-only shape (a
/// list built from the stored objects' metadata, without rendering them
/// whole), so it is not reshaped again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shaped;

/// A list page as `PartialObjectMetadataList` JSON, straight from the
/// stored objects: `meta` is the list's metadata as the full list has it.
pub(crate) fn list_of(objects: &[&Value], meta: &Value, api_version: &str) -> Vec<u8> {
    let mut out = format!(
        "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":{},\"metadata\":{},\"items\":[",
        json!(api_version),
        list_meta(meta, api_version)
    )
    .into_bytes();
    /// One item, borrowing the object's metadata.
    #[derive(serde::Serialize)]
    struct Item<'a> {
        kind: &'static str,
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        metadata: &'a Value,
    }
    let empty = Value::Object(Map::new());
    for (i, o) in objects.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let item = Item {
            kind: "PartialObjectMetadata",
            api_version,
            metadata: o.get("metadata").unwrap_or(&empty),
        };
        // Serializing borrowed JSON values cannot fail.
        let _ = serde_json::to_writer(&mut out, &item);
    }
    out.extend_from_slice(b"]}");
    out
}

/// A successful answer's JSON in the shape asked for: `Status` objects stay
/// as they are; a list asked for as an object (or the reverse) is 406.
pub(crate) fn reshape(v: &Value, want: Partial, custom: bool) -> Result<Value, ApiError> {
    if v["kind"] == "Status" {
        return Ok(v.clone());
    }
    match (want.list, is_list(v)) {
        (true, true) => Ok(list(v, want.api_version)),
        (false, false) => Ok(object(v, want.api_version)),
        (true, false) => Err(not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type(v, custom)
        ))),
        (false, true) => Err(not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type(v, custom)
        ))),
    }
}

/// One watch event (`{"type", "object"}`) with its object reshaped: every
/// event of a metadata-only watch carries a `PartialObjectMetadata`
/// (BOOKMARKs included), an ERROR its `Status` unchanged.
pub(crate) fn event(mut ev: Value, api_version: &str) -> Value {
    let obj = &ev["object"];
    if obj["kind"] != "Status" && obj.is_object() {
        ev["object"] = object(obj, api_version);
    }
    ev
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(s: &str) -> Vec<(String, String)> {
        s.split(';')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn conversions_are_read_from_as_g_and_v() {
        let v1 = Partial {
            list: true,
            api_version: "meta.k8s.io/v1",
        };
        assert_eq!(
            conversion(&params("as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")),
            Conversion::Metadata(v1)
        );
        assert_eq!(
            conversion(&params("as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1")),
            Conversion::Metadata(Partial {
                list: false,
                api_version: "meta.k8s.io/v1beta1"
            })
        );
        for bad in [
            "as=PartialObjectMetadata;g=meta.k8s.io;v=v2",
            "as=PartialObjectMetadata;g=apps;v=v1",
            "as=PartialObjectMetadata",
            "as=Deployment;g=meta.k8s.io;v=v1",
        ] {
            assert_eq!(conversion(&params(bad)), Conversion::Unsupported, "{bad}");
        }
        assert_eq!(conversion(&params("q=1")), Conversion::None);
        assert_eq!(conversion(&params("as=Table;v=v1")), Conversion::Table);
    }

    #[test]
    fn objects_lists_and_events_keep_only_metadata() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}},
            "data": {"k": "v"}});
        let want = Partial {
            list: false,
            api_version: "meta.k8s.io/v1",
        };
        assert_eq!(
            reshape(&cm, want, false).unwrap(),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "resourceVersion": "7", "labels": {"x": "y"}}})
        );
        let l = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9", "continue": "c", "remainingItemCount": 3},
            "items": [cm]});
        let e = reshape(&l, want, false).unwrap_err();
        assert_eq!(e.code, 406);
        assert!(e.message.contains("(*v1.ConfigMapList)"), "{}", e.message);
        let beta = Partial {
            list: true,
            api_version: "meta.k8s.io/v1beta1",
        };
        let got = reshape(&l, beta, false).unwrap();
        assert_eq!(
            got["metadata"],
            json!({"resourceVersion": "9", "continue": "c"})
        );
        assert_eq!(got["items"][0]["apiVersion"], "meta.k8s.io/v1beta1");
        assert!(got["items"][0].get("data").is_none());
        let e = reshape(&cm, beta, true).unwrap_err();
        assert!(e.message.contains("*unstructured.Unstructured)"));
        let status = json!({"kind": "Status", "apiVersion": "v1", "code": 410});
        assert_eq!(reshape(&status, beta, false).unwrap(), status);
        let ev = event(json!({"type": "ERROR", "object": status}), "meta.k8s.io/v1");
        assert_eq!(ev["object"]["kind"], "Status");
        // A list built from the stored objects equals the reshaped full list.
        for av in ["meta.k8s.io/v1", "meta.k8s.io/v1beta1"] {
            let built: Value =
                serde_json::from_slice(&list_of(&[&cm], &l["metadata"], av)).unwrap();
            assert_eq!(built, list(&l, av), "{av}");
        }
        let ev = event(json!({"type": "ADDED", "object": cm}), "meta.k8s.io/v1");
        assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(ev["type"], "ADDED");
    }
}
