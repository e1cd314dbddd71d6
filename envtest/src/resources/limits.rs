//! Size limits with the API server's numbers and answers, so that no request
//! can make the server allocate without bound: a stored object is at most
//! 1.5 MiB (etcd's request limit; 413 `RequestEntityTooLarge`, "etcdserver:
//! request is too large"), a JSON patch has at most 10,000 operations (413)
//! and its `copy` operations together copy at most 3 MiB (413), as the API
//! server configures its JSON-patch library. Copies are weighed by what
//! they cost in memory (each JSON node counts, not just its text), and no
//! copy may nest the object deeper than a request body may be nested, so a
//! patch that copies a value into itself stops after a few steps. The
//! request body limit (3 MiB) lives with the HTTP front; annotation size
//! with metadata validation.

use crate::error::ApiError;
use serde_json::Value;
use std::io;

/// Largest stored object, in bytes of JSON.
pub const MAX_OBJECT_BYTES: usize = 3 * 512 * 1024;

/// Most operations one JSON patch may carry.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Most bytes the `copy` operations of one JSON patch may copy in total.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// A writer that only counts, and fails once past a limit.
struct Counter {
    n: usize,
    limit: usize,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.n += buf.len();
        if self.n > self.limit {
            return Err(io::Error::other("limit reached"));
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The serialized size of `v` if it is at most `limit` bytes; None past it
/// (the walk stops there, so measuring a huge value is cheap).
pub fn size_within(v: &Value, limit: usize) -> Option<usize> {
    let mut c = Counter { n: 0, limit };
    serde_json::to_writer(&mut c, v).ok().map(|()| c.n)
}

/// 413 for an object larger than [`MAX_OBJECT_BYTES`].
pub fn check_object_size(obj: &Value) -> Result<(), ApiError> {
    match size_within(obj, MAX_OBJECT_BYTES) {
        Some(_) => Ok(()),
        None => Err(ApiError::too_large("etcdserver: request is too large")),
    }
}

/// 413 for a JSON patch with more than [`MAX_JSON_PATCH_OPERATIONS`].
pub fn check_patch_operations(n: usize) -> Result<(), ApiError> {
    if n > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::too_large(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {n}"
        )));
    }
    Ok(())
}

/// Roughly what `v` occupies in memory, if at most `limit` and nested at
/// most `depth_left` levels; None otherwise (the walk stops there).
fn weight_within(v: &Value, limit: usize, depth_left: usize) -> Option<usize> {
    const NODE: usize = 32;
    let w = match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => NODE,
        Value::String(s) => NODE + s.len(),
        Value::Array(items) => {
            let depth_left = depth_left.checked_sub(1)?;
            let mut w = NODE;
            for i in items {
                w += weight_within(i, limit.checked_sub(w)?, depth_left)?;
            }
            w
        }
        Value::Object(map) => {
            let depth_left = depth_left.checked_sub(1)?;
            let mut w = NODE;
            for (k, i) in map {
                w += NODE + k.len();
                w += weight_within(i, limit.checked_sub(w)?, depth_left)?;
            }
            w
        }
    };
    (w <= limit).then_some(w)
}

/// What the `copy` operations of one JSON patch have copied so far.
#[derive(Debug, Default)]
pub struct CopyBudget {
    spent: usize,
}

impl CopyBudget {
    /// Account for copying `v` to a place `dest_depth` levels deep; 413 once
    /// the patch has copied more than [`MAX_JSON_PATCH_COPY_BYTES`] in total
    /// or the copy would nest deeper than [`crate::resources::validation::MAX_DEPTH`].
    pub fn spend(&mut self, v: &Value, dest_depth: usize) -> Result<(), ApiError> {
        let left = MAX_JSON_PATCH_COPY_BYTES.saturating_sub(self.spent);
        let depth_left = crate::resources::validation::MAX_DEPTH.saturating_sub(dest_depth);
        match weight_within(v, left, depth_left) {
            Some(n) => {
                self.spent += n;
                Ok(())
            }
            None => Err(ApiError::too_large(format!(
                "Unable to apply the JSON patch: its copy operations would copy more than {MAX_JSON_PATCH_COPY_BYTES} bytes in total or nest the object more than {} levels deep",
                crate::resources::validation::MAX_DEPTH
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_stop_at_the_limit() {
        let v = json!({"a": "x".repeat(100)});
        assert_eq!(size_within(&v, 1000), Some(v.to_string().len()));
        assert_eq!(size_within(&v, 10), None);
    }

    #[test]
    fn objects_and_patches_are_bounded() {
        check_object_size(&json!({"data": "x".repeat(MAX_OBJECT_BYTES - 20)})).unwrap();
        let e = check_object_size(&json!({"data": "x".repeat(MAX_OBJECT_BYTES)})).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (413, "RequestEntityTooLarge"));
        check_patch_operations(MAX_JSON_PATCH_OPERATIONS).unwrap();
        assert_eq!(check_patch_operations(20_000).unwrap_err().code, 413);
        let mut b = CopyBudget::default();
        let chunk = json!("x".repeat(MAX_JSON_PATCH_COPY_BYTES / 2 - 100));
        b.spend(&chunk, 1).unwrap();
        b.spend(&chunk, 1).unwrap();
        assert_eq!(b.spend(&chunk, 1).unwrap_err().code, 413);
    }

    #[test]
    fn copies_count_nodes_and_depth() {
        let leaves = json!(vec![0; 1000]);
        let mut b = CopyBudget::default();
        b.spend(&leaves, 1).unwrap();
        assert!(b.spent >= 32 * 1000, "each node weighs, not just its text");
        let mut deep = json!(1);
        for _ in 0..10 {
            deep = json!([deep]);
        }
        let mut b = CopyBudget::default();
        b.spend(&deep, 90).unwrap();
        assert_eq!(b.spend(&deep, 91).unwrap_err().code, 413);
    }
}
