//! Bytes received but not yet turned into replies; shared by the blocking and the async connection.

use bytes::{Buf, BytesMut};
use ruvio_protocol::{decode_value, DecodeLimits, Value};

use crate::error::Result;

/// How much room each read gets.
const CHUNK: usize = 16 * 1024;

#[derive(Debug, Default)]
pub(crate) struct ReplyBuffer {
    buf: BytesMut,
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
    pub fn spare(&mut self) -> &mut [u8] {
        let len = self.buf.len();
        self.buf.resize(len + CHUNK, 0);
        &mut self.buf[len..]
    }

    /// Keeps `n` of the bytes of the last [`ReplyBuffer::spare`] slice.
    pub fn filled(&mut self, n: usize) {
        let keep = self.buf.len() - (CHUNK - n);
        self.buf.truncate(keep);
    }
}
