//! The framing of a protobuf watch stream: each `metav1.WatchEvent`
//! message preceded by its length (4 bytes, big endian), the event's object
//! inside in its own envelope.

use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use prost::Message;

use crate::CodecError;
use crate::proto::Envelope;

/// The largest frame accepted (the API server's own limit on a request
/// body is 3 MiB; objects stay far below this).
const MAX_FRAME: usize = 256 << 20;

/// Buffer room a [`FrameReader`] keeps once everything was read; more is
/// freed.
const KEEP_CAPACITY: usize = 64 * 1024;

/// Splits the bytes of a watch stream, as they arrive, into whole
/// `WatchEvent` messages.
///
/// ```
/// use informer_codec::{FrameReader, WatchMessage};
/// let ev = serde_json::json!({"type": "ADDED", "object": {
///     "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}});
/// let frame = informer_codec::watch_frame(&ev)?;
/// let mut reader = FrameReader::default();
/// reader.push(&frame[..3]);
/// assert!(reader.next_frame()?.is_none());
/// reader.push(&frame[3..]);
/// let msg = reader.next_frame()?.expect("a whole frame");
/// let event = WatchMessage::read(&msg)?;
/// assert_eq!(event.event_type, "ADDED");
/// assert_eq!(event.object.kind, "Namespace");
/// assert!(reader.is_empty());
/// // A burst of thousands of frames (well over 64 KiB), read: its room
/// // is given back.
/// assert!(frame.len() > 40);
/// for _ in 0..2_000 {
///     reader.push(&frame);
/// }
/// while reader.next_frame()?.is_some() {}
/// assert_eq!(reader.capacity(), 0);
/// # Ok::<(), informer_codec::CodecError>(())
/// ```
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Where the unread bytes of `buf` start.
    pos: usize,
}

impl FrameReader {
    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole message (without its length), `None` until one has
    /// arrived; an error for a length past any sane object.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, CodecError> {
        let rest = &self.buf[self.pos..];
        let Some(len) = rest.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > MAX_FRAME {
            return Err(CodecError::Protobuf(format!(
                "watch frame of {len} bytes is larger than {MAX_FRAME}"
            )));
        }
        let Some(msg) = rest.get(4..4 + len) else {
            return Ok(None);
        };
        let msg = msg.to_vec();
        self.pos += 4 + len;
        if self.pos == self.buf.len() {
            // All read: start over, and give back the room a burst (a
            // streaming list's initial events) grew, so that a watch idle
            // for hours does not hold it.
            self.pos = 0;
            if self.buf.capacity() > KEEP_CAPACITY {
                self.buf = Vec::new();
            } else {
                self.buf.clear();
            }
        }
        Ok(Some(msg))
    }

    /// Bytes of buffer kept between frames (what a burst grew beyond this
    /// is freed once it has been read).
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether no unread bytes are left (a stream that ends otherwise was
    /// cut in the middle of a frame).
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
}

/// One `WatchEvent` message: its type and its object's envelope.
/// See [`FrameReader`] for an example.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchMessage {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: String,
    /// The object, in its envelope.
    pub object: Envelope,
}

impl WatchMessage {
    /// Reads one message (a frame without its length).
    pub fn read(message: &[u8]) -> Result<Self, CodecError> {
        let ev = pb_meta::WatchEvent::decode(message)
            .map_err(|e| CodecError::Protobuf(e.to_string()))?;
        let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
        Ok(Self {
            event_type: ev.r#type.unwrap_or_default(),
            object: Envelope::read(&raw)?,
        })
    }
}
