//! Bytes received but not yet turned into replies; shared by the blocking and the async connection.

use bytes::{Buf, BytesMut};
use ruvio_protocol::{decode_value, DecodeLimits, Value};

use crate::error::Result;

/// The least room each read gets.
const CHUNK: usize = 16 * 1024;
/// The most room one read gets.
const MAX_CHUNK: usize = 4 * 1024 * 1024;

#[derive(Debug, Default)]
pub(crate) struct ReplyBuffer {
    buf: BytesMut,
    /// The size of the slice handed out by the last [`ReplyBuffer::spare`].
    offered: usize,
}

impl ReplyBuffer {
    /// The next whole reply, if one has arrived. Out-of-band RESP3 pushes (pub/sub, invalidation) answer no
    /// command, so they are skipped rather than paired with the wrong request.
    pub fn next(&mut self) -> Result<Option<Value>> {
        loop {
            match decode_value(&self.buf, DecodeLimits::default())? {
                None => return Ok(None),
                Some((value, used)) => {
                    self.buf.advance(used);
                    if !matches!(value, Value::Push(_)) {
                        return Ok(Some(value));
                    }
                }
            }
        }
    }

    /// Room for the next read: the caller reads into the returned slice and reports how much came in.
    ///
    /// The decoder parses a partial reply from its start each time, so the room grows with what is already
    /// buffered: a large reply is then parsed a logarithmic number of times, not once per fixed-size chunk.
    pub fn spare(&mut self) -> &mut [u8] {
        let len = self.buf.len();
        self.offered = len.clamp(CHUNK, MAX_CHUNK);
        self.buf.resize(len + self.offered, 0);
        &mut self.buf[len..]
    }

    /// Keeps `n` of the bytes of the last [`ReplyBuffer::spare`] slice.
    pub fn filled(&mut self, n: usize) {
        let keep = self.buf.len() - (self.offered - n);
        self.buf.truncate(keep);
        self.offered = 0;
    }
}
