//! Watch streams as they arrive: newline-delimited JSON events, or
//! length-prefixed protobuf frames (see [`super::protobuf`]), each turned
//! into [`WatchEvent`]s the same way.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use informer_codec::FrameReader;
use serde::de::DeserializeOwned;

use super::decode::decode_event;
use super::limits::OversizedPart;
use super::protobuf::{ProtobufMode, Target};
use super::{ListWatchError, WatchEvent};

/// Bytes of a JSON watch stream, split into lines as they arrive.
///
/// Each byte is searched for the newline once: the search resumes where
/// the previous one ended rather than at the start of the buffer (which,
/// for a line arriving in many small chunks, would cost time growing with
/// the square of its length).
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    buf: BytesMut,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
    /// Bytes searched in all (for tests).
    #[cfg(test)]
    pub(crate) searched: usize,
}

/// A line longer than the cap.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LineTooLong;

impl LineBuffer {
    /// Appends a chunk read from the stream.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole line (with its newline), `Ok(None)` until one has
    /// arrived, or [`LineTooLong`] as soon as the line under way (without
    /// its newline) is longer than `max` bytes.
    pub(crate) fn next_line(&mut self, max: usize) -> Result<Option<BytesMut>, LineTooLong> {
        let unscanned = self.buf.get(self.scanned..).unwrap_or_default();
        let found = unscanned.iter().position(|b| *b == b'\n');
        #[cfg(test)]
        {
            self.searched += found.map_or(unscanned.len(), |i| i + 1);
        }
        let Some(found) = found else {
            self.scanned = self.buf.len();
            if self.buf.len() > max {
                *self = Self::default();
                return Err(LineTooLong);
            }
            return Ok(None);
        };
        let pos = self.scanned + found;
        self.scanned = 0;
        if pos > max {
            *self = Self::default();
            return Err(LineTooLong);
        }
        let line = self.buf.split_to(pos + 1);
        if self.buf.is_empty() {
            // All read: a fresh buffer for the next chunk, so the
            // allocation a burst (a streaming list's initial events)
            // grew goes with its last line.
            self.buf = BytesMut::new();
        }
        Ok(Some(line))
    }

    /// What is left once the stream has ended (a last line without its
    /// newline, or nothing).
    fn rest(&mut self) -> BytesMut {
        self.scanned = 0;
        self.buf.split()
    }
}

/// Splits a byte stream into newline-terminated lines and decodes each as
/// a watch event. Ends after a server `ERROR` event or a read error, and
/// with [`ListWatchError::Oversized`] once a line (without its newline) is
/// longer than `max_line` bytes: no more than that and one chunk is held.
pub(crate) fn event_stream<K, S>(
    body: S,
    max_line: usize,
) -> impl Stream<Item = Result<WatchEvent<K>, ListWatchError>>
where
    K: DeserializeOwned,
    S: Stream<Item = Result<Bytes, kube_client::Error>> + Unpin,
{
    struct State<S> {
        body: S,
        lines: LineBuffer,
        done: bool,
    }
    let state = State {
        body,
        lines: LineBuffer::default(),
        done: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            match st.lines.next_line(max_line) {
                Ok(Some(line)) => {
                    let line = line.trim_ascii();
                    if line.is_empty() {
                        continue;
                    }
                    let item = decode_event::<K>(line);
                    st.done = item.is_err();
                    return Some((item, st));
                }
                Ok(None) => {}
                Err(LineTooLong) => {
                    st.done = true;
                    let err = ListWatchError::Oversized {
                        part: OversizedPart::WatchEvent,
                        limit: max_line,
                    };
                    return Some((Err(err), st));
                }
            }
            match st.body.next().await {
                Some(Ok(chunk)) => st.lines.push(&chunk),
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(ListWatchError::Stream(e)), st));
                }
                None => {
                    st.done = true;
                    let rest = st.lines.rest();
                    let rest = rest.trim_ascii();
                    if rest.is_empty() {
                        return None;
                    }
                    // A last line without its newline: decode it if it is whole.
                    return match serde_json::from_slice::<serde::de::IgnoredAny>(rest) {
                        Ok(_) => Some((decode_event::<K>(rest), st)),
                        Err(_) => None,
                    };
                }
            }
        }
    })
}

/// Splits a protobuf watch stream into frames and decodes each as a watch
/// event. Ends after a server `ERROR` event or a read error; a frame that
/// does not decode makes `mode` give up protobuf (counted) and ends the
/// stream without an error, so the reflector watches again from the last
/// event it got, in JSON, and the event is read again. A frame longer than
/// `max_frame` bytes ends the stream with [`ListWatchError::Oversized`]
/// once that much of it has arrived.
pub(crate) fn frame_stream<K, S>(
    body: S,
    target: Target<K>,
    mode: Arc<ProtobufMode>,
    name: String,
    max_frame: usize,
) -> impl Stream<Item = Result<WatchEvent<K>, ListWatchError>>
where
    K: DeserializeOwned + 'static,
    S: Stream<Item = Result<Bytes, kube_client::Error>> + Unpin,
{
    struct State<S, K> {
        body: S,
        frames: FrameReader,
        /// Bytes pushed into `frames` and not yet taken out as frames
        /// (with their 4-byte lengths).
        buffered: usize,
        target: Target<K>,
        done: bool,
    }
    let state = State {
        body,
        frames: FrameReader::default(),
        buffered: 0,
        target,
        done: false,
    };
    let oversized = move || ListWatchError::Oversized {
        part: OversizedPart::WatchEvent,
        limit: max_frame,
    };
    let opts = mode.options();
    futures::stream::unfold(state, move |mut st| {
        let mode = Arc::clone(&mode);
        let name = name.clone();
        async move {
            loop {
                if st.done {
                    return None;
                }
                let frame = match st.frames.next_frame() {
                    Ok(frame) => frame,
                    Err(e) => {
                        mode.give_up(&name, "undecodable", &e);
                        return None;
                    }
                };
                if let Some(frame) = frame {
                    st.buffered = st.buffered.saturating_sub(frame.len() + 4);
                    if frame.len() > max_frame {
                        st.done = true;
                        return Some((Err(oversized()), st));
                    }
                    match super::protobuf::decode_event(&frame, &st.target, opts) {
                        Ok(event) => return Some((Ok(event), st)),
                        Err(Ok(server_error)) => {
                            st.done = true;
                            return Some((Err(server_error), st));
                        }
                        Err(Err(e)) => {
                            mode.give_up(&name, "undecodable", &e);
                            return None;
                        }
                    }
                }
                // What is buffered now is (the start of) one frame.
                if st.buffered > max_frame.saturating_add(4) {
                    st.done = true;
                    st.frames = FrameReader::default();
                    return Some((Err(oversized()), st));
                }
                match st.body.next().await {
                    Some(Ok(chunk)) => {
                        st.buffered += chunk.len();
                        st.frames.push(&chunk);
                    }
                    Some(Err(e)) => {
                        st.done = true;
                        return Some((Err(ListWatchError::Stream(e)), st));
                    }
                    // A frame cut short by the end of the stream is dropped.
                    None => return None,
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use k8s_openapi::api::core::v1::ConfigMap;

    /// The frames of a protobuf watch body cut into `chunks`, read with a
    /// cap of `max` bytes per frame.
    fn read_frames(
        chunks: Vec<Vec<u8>>,
        max: usize,
    ) -> Vec<Result<WatchEvent<ConfigMap>, ListWatchError>> {
        let body = futures::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from(c))));
        let target = Target::<ConfigMap>::of(false).expect("ConfigMap reads in protobuf");
        let mode = Arc::new(ProtobufMode::new(true));
        block_on(frame_stream(body, target, mode, "test".into(), max).collect())
    }

    #[test]
    fn a_frame_over_the_cap_ends_the_watch_once_that_much_arrived() {
        let cap = 1024;
        // A frame announced far longer than the cap, arriving without end.
        let mut chunks = vec![u32::try_from(100 * cap).unwrap().to_be_bytes().to_vec()];
        chunks.extend(std::iter::repeat_n(vec![0u8; 100], 100));
        let read = read_frames(chunks, cap);
        assert_eq!(read.len(), 1, "{read:?}");
        assert!(
            matches!(&read[0], Err(e) if e.oversized() == Some(OversizedPart::WatchEvent)),
            "{read:?}"
        );

        // A frame over the cap arriving whole in one chunk.
        let mut whole = u32::try_from(cap + 1).unwrap().to_be_bytes().to_vec();
        whole.extend(vec![0u8; cap + 1]);
        let read = read_frames(vec![whole], cap);
        assert!(
            matches!(&read[..], [Err(e)] if e.oversized().is_some()),
            "{read:?}"
        );

        // At the cap, the frame is read (and, not being a real event, makes
        // the reader give up protobuf without an error).
        let mut at_cap = u32::try_from(cap).unwrap().to_be_bytes().to_vec();
        at_cap.extend(vec![0u8; cap]);
        let read = read_frames(vec![at_cap], cap);
        assert!(
            read.iter().all(|r| r
                .as_ref()
                .err()
                .and_then(ListWatchError::oversized)
                .is_none()),
            "{read:?}"
        );
    }

    #[test]
    fn a_line_in_many_chunks_is_searched_once() {
        let mut lines = LineBuffer::default();
        for _ in 0..10_000 {
            lines.push(b"x");
            assert_eq!(lines.next_line(usize::MAX), Ok(None));
        }
        lines.push(b"\n{}\n");
        let line = lines.next_line(usize::MAX).unwrap().unwrap();
        assert_eq!(line.len(), 10_001);
        assert_eq!(&lines.next_line(usize::MAX).unwrap().unwrap()[..], b"{}\n");
        assert_eq!(lines.next_line(usize::MAX), Ok(None));
        // Every byte once (a search from the start each time: ~50 million).
        assert_eq!(lines.searched, 10_004);
    }

    #[test]
    fn a_line_over_the_cap_is_refused_as_soon_as_it_is_too_long() {
        let mut lines = LineBuffer::default();
        lines.push(&[b'x'; 10]);
        assert_eq!(lines.next_line(10), Ok(None), "exactly the cap is fine");
        lines.push(b"x");
        assert_eq!(lines.next_line(10), Err(LineTooLong));
        assert!(lines.buf.capacity() == 0, "the buffer is let go");

        // A long line that arrives whole, newline included, in one chunk.
        let mut lines = LineBuffer::default();
        lines.push(b"xxxxxxxxxxxx\n");
        assert_eq!(lines.next_line(10), Err(LineTooLong));

        let mut lines = LineBuffer::default();
        lines.push(b"xxxxxxxxxx\nyy");
        assert_eq!(lines.next_line(10).unwrap().unwrap().len(), 11);
        assert_eq!(lines.next_line(10), Ok(None));
    }
}
