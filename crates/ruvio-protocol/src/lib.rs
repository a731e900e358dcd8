//! The Redis serialization protocol (RESP2 and RESP3), shared by the Ruvio server and `ruvio-client`.
//!
//! - [`Value`]: every RESP3 type, with how each degrades to RESP2.
//! - [`encode`]: writes a [`Value`] in either protocol version.
//! - [`RequestParser`]: the server's incremental, bounded parser for client requests (multibulk or inline).
//! - [`decode_value`]: the client's parser for any reply.
//! - [`lock_args`]: the lock commands' arguments, typed: encoded by the client, parsed by the server.

mod decode;
mod encode;
pub mod lock_args;
mod request;
mod value;

pub use decode::{decode_value, DecodeError, DecodeLimits};
pub use encode::{encode, encode_command};
pub use request::{ProtocolError, RequestLimits, RequestParser, UNAUTHENTICATED_MAX_ARGS, UNAUTHENTICATED_MAX_BULK};
pub use value::{BulkArray, BulkArrayIter, Protocol, Value};
