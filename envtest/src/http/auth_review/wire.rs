//! Just enough of the protobuf wire format to read the review requests
//! kubectl sends as `application/vnd.kubernetes.protobuf`: the `k8s\0`
//! magic, the `runtime.Unknown` envelope, and string fields of nested
//! messages. Unknown fields are skipped, as protobuf requires; anything
//! malformed is an error, never a panic.

/// The four bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The body does not start with `k8s\0`.
    #[error("not a Kubernetes protobuf body: the k8s\\0 prefix is missing")]
    NoMagic,
    /// A varint, length or field runs past the end of the body.
    #[error("truncated protobuf message")]
    Truncated,
    /// A field uses a wire type protobuf 3 does not have (groups, 6, 7).
    #[error("unsupported protobuf wire type {0}")]
    WireType(u64),
    /// A string field is not UTF-8.
    #[error("protobuf field {0} is not valid UTF-8")]
    Utf8(u32),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or(WireError::Truncated)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(WireError::Truncated)
}

/// The length-delimited fields of a message, in order: (field number, bytes).
/// Scalar fields are skipped.
pub fn fields(buf: &[u8]) -> Result<Vec<(u32, &[u8])>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let field = u32::try_from(key >> 3).map_err(|_| WireError::Truncated)?;
        let skip = match key & 7 {
            0 => {
                varint(buf, &mut pos)?;
                0
            }
            1 => 8,
            5 => 4,
            2 => {
                let len =
                    usize::try_from(varint(buf, &mut pos)?).map_err(|_| WireError::Truncated)?;
                let end = pos.checked_add(len).ok_or(WireError::Truncated)?;
                let bytes = buf.get(pos..end).ok_or(WireError::Truncated)?;
                out.push((field, bytes));
                len
            }
            other => return Err(WireError::WireType(other)),
        };
        pos = pos.checked_add(skip).ok_or(WireError::Truncated)?;
        if pos > buf.len() {
            return Err(WireError::Truncated);
        }
    }
    Ok(out)
}

/// The last occurrence of embedded message / bytes field `n` (protobuf's
/// last-one-wins), or empty.
pub fn message(buf: &[u8], n: u32) -> Result<&[u8], WireError> {
    Ok(fields(buf)?
        .into_iter()
        .rev()
        .find(|(f, _)| *f == n)
        .map_or(&[][..], |(_, b)| b))
}

/// String field `n` of a message, or empty.
pub fn string(buf: &[u8], n: u32) -> Result<String, WireError> {
    let bytes = message(buf, n)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| WireError::Utf8(n))
}

/// The object inside a `k8s\0` + `runtime.Unknown` body (its `raw` field).
pub fn unwrap_unknown(body: &[u8]) -> Result<&[u8], WireError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(WireError::NoMagic)?;
    message(envelope, 2)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encode a length-delimited field (test helper, also used by the
    /// review tests).
    pub(crate) fn ld(field: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |mut v: u64| {
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
        };
        put(u64::from(field) << 3 | 2);
        put(bytes.len() as u64);
        out.extend_from_slice(bytes);
        out
    }

    /// A `k8s\0` body holding `raw` in a `runtime.Unknown`.
    pub(crate) fn envelope(raw: &[u8]) -> Vec<u8> {
        let type_meta = [ld(1, b"authorization.k8s.io/v1"), ld(2, b"Kind")].concat();
        let mut out = MAGIC.to_vec();
        out.extend(ld(1, &type_meta));
        out.extend(ld(2, raw));
        out.extend(ld(4, b"application/vnd.kubernetes.protobuf"));
        out
    }

    #[test]
    fn nested_strings_are_read_and_scalars_skipped() {
        let inner = [ld(2, b"get"), ld(5, b"pods")].concat();
        // A varint field (7 = 150), a fixed64 and a fixed32 before it.
        let mut msg = vec![0x38, 0x96, 0x01];
        msg.extend([0x09, 1, 2, 3, 4, 5, 6, 7, 8]);
        msg.extend([0x15, 1, 2, 3, 4]);
        msg.extend(ld(1, &inner));
        let body = envelope(&msg);
        let raw = unwrap_unknown(&body).unwrap();
        let attrs = message(raw, 1).unwrap();
        assert_eq!(string(attrs, 2).unwrap(), "get");
        assert_eq!(string(attrs, 5).unwrap(), "pods");
        assert_eq!(string(attrs, 7).unwrap(), "", "absent is empty");
    }

    #[test]
    fn malformed_bodies_are_errors() {
        assert_eq!(unwrap_unknown(b"{}"), Err(WireError::NoMagic));
        assert_eq!(fields(&[0x0a, 0x05, b'a']), Err(WireError::Truncated));
        assert_eq!(fields(&[0x80]), Err(WireError::Truncated));
        assert_eq!(fields(&[0x0b]), Err(WireError::WireType(3)));
        assert_eq!(fields(&[0x09, 1, 2]), Err(WireError::Truncated));
        assert_eq!(string(&ld(1, &[0xff, 0xfe]), 1), Err(WireError::Utf8(1)));
        // A length near u64::MAX must not overflow.
        let mut huge = vec![0x0a];
        huge.extend([0xff; 9]);
        huge.push(0x01);
        assert_eq!(fields(&huge), Err(WireError::Truncated));
    }
}
