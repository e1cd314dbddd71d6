//! Watch streams as they arrive: newline-delimited JSON events, or
//! length-prefixed protobuf frames (see [`super::protobuf`]), each turned
//! into [`WatchEvent`]s the same way.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use informer_codec::FrameReader;
use serde::de::DeserializeOwned;

use super::decode::decode_event;
use super::protobuf::{ProtobufMode, Target};
use super::{ListWatchError, WatchEvent};

/// Splits a byte stream into newline-terminated lines and decodes each as
/// a watch event. Ends after a server `ERROR` event or a read error.
pub(crate) fn event_stream<K, S>(
    body: S,
) -> impl Stream<Item = Result<WatchEvent<K>, ListWatchError>>
where
    K: DeserializeOwned,
    S: Stream<Item = Result<Bytes, kube_client::Error>> + Unpin,
{
    struct State<S> {
        body: S,
        buf: BytesMut,
        done: bool,
    }
    let state = State {
        body,
        buf: BytesMut::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(pos) = st.buf.iter().position(|b| *b == b'\n') {
                let line = st.buf.split_to(pos + 1);
                if st.buf.is_empty() {
                    // All read: a fresh buffer for the next chunk, so the
                    // allocation a burst (a streaming list's initial
                    // events) grew goes with its last line.
                    st.buf = BytesMut::new();
                }
                let line = line.trim_ascii();
                if line.is_empty() {
                    continue;
                }
                let item = decode_event::<K>(line);
                st.done = item.is_err();
                return Some((item, st));
            }
            match st.body.next().await {
                Some(Ok(chunk)) => st.buf.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    st.done = true;
                    return Some((Err(ListWatchError::Stream(e)), st));
                }
                None => {
                    st.done = true;
                    let rest = st.buf.split();
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
/// event it got, in JSON, and the event is read again.
pub(crate) fn frame_stream<K, S>(
    body: S,
    target: Target<K>,
    mode: Arc<ProtobufMode>,
    name: String,
) -> impl Stream<Item = Result<WatchEvent<K>, ListWatchError>>
where
    K: DeserializeOwned + 'static,
    S: Stream<Item = Result<Bytes, kube_client::Error>> + Unpin,
{
    struct State<S, K> {
        body: S,
        frames: FrameReader,
        target: Target<K>,
        done: bool,
    }
    let state = State {
        body,
        frames: FrameReader::default(),
        target,
        done: false,
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
                match st.body.next().await {
                    Some(Ok(chunk)) => st.frames.push(&chunk),
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
