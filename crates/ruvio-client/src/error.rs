//! The one error type every call returns.

use std::fmt;
use std::io;

/// What went wrong, broadly. See [`Error`] for the predicates most code needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server answered with an error reply (`-WRONGTYPE ...`); see [`Error::code`].
    Server,
    /// A network error other than a timeout or a dropped connection (for example: connection refused).
    Io,
    /// The connect timeout or the command timeout passed without an answer.
    Timeout,
    /// The server closed the connection, or it was reset, before the whole reply arrived.
    ConnectionDropped,
    /// The server sent bytes that are not valid RESP, or more than the client accepts.
    Protocol,
    /// The reply arrived but does not convert to the type that was asked for.
    Type,
    /// The address or options cannot work (for example: a host name that does not resolve).
    InvalidConfig,
}

/// An error from any call of this crate.
///
/// Whether a command reached the server matters for commands that are not safe to repeat (`LEASE`,
/// `SEMAPHORE`): after [`Error::is_timeout`] or [`Error::is_connection_dropped`] the command may or may not
/// have run.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    detail: String,
    source: Option<io::Error>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, detail: impl Into<String>) -> Error {
        Error { kind, detail: detail.into(), source: None }
    }

    /// An error reply, text as sent by the server (code first).
    pub(crate) fn server(text: &[u8]) -> Error {
        Error::new(ErrorKind::Server, String::from_utf8_lossy(text).into_owned())
    }

    pub(crate) fn type_error(detail: impl Into<String>) -> Error {
        Error::new(ErrorKind::Type, detail)
    }

    pub(crate) fn timeout(what: &str) -> Error {
        Error::new(ErrorKind::Timeout, format!("{what} timed out"))
    }

    pub(crate) fn dropped() -> Error {
        Error::new(ErrorKind::ConnectionDropped, "the server closed the connection")
    }

    /// Sorts an `io::Error` into timeout, dropped connection or other I/O failure.
    pub(crate) fn io(e: io::Error) -> Error {
        use io::ErrorKind as K;
        let kind = match e.kind() {
            K::TimedOut | K::WouldBlock => ErrorKind::Timeout,
            K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::NotConnected => {
                ErrorKind::ConnectionDropped
            }
            _ => ErrorKind::Io,
        };
        Error { kind, detail: e.to_string(), source: Some(e) }
    }

    /// The broad category.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// True for every network-level failure: timeouts, dropped connections, refused connections.
    pub fn is_io_error(&self) -> bool {
        matches!(self.kind, ErrorKind::Io | ErrorKind::Timeout | ErrorKind::ConnectionDropped)
    }

    /// True when a connect or command timeout passed.
    pub fn is_timeout(&self) -> bool {
        self.kind == ErrorKind::Timeout
    }

    /// True when the server closed or reset the connection.
    pub fn is_connection_dropped(&self) -> bool {
        self.kind == ErrorKind::ConnectionDropped
    }

    /// True when the connection could not be opened because nothing listens at the address.
    pub fn is_connection_refused(&self) -> bool {
        self.source.as_ref().is_some_and(|e| e.kind() == io::ErrorKind::ConnectionRefused)
    }

    /// True when the server answered with an error reply.
    pub fn is_server_error(&self) -> bool {
        self.kind == ErrorKind::Server
    }

    /// For an error reply, its code: the first word, such as `ERR`, `WRONGTYPE`, `READONLY`, `NOREPLICAS`.
    pub fn code(&self) -> Option<&str> {
        match self.kind {
            ErrorKind::Server => self.detail.split(' ').next(),
            _ => None,
        }
    }

    /// The human-readable detail: the whole error reply for server errors.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// True when the connection this error came from must not be used again: after a network or protocol
    /// failure a reply may still be in flight, and reading it later would pair it with the wrong command.
    pub(crate) fn breaks_connection(&self) -> bool {
        self.is_io_error() || self.kind == ErrorKind::Protocol
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Server => write!(f, "server error: {}", self.detail),
            ErrorKind::Io => write!(f, "I/O error: {}", self.detail),
            ErrorKind::Timeout => write!(f, "timeout: {}", self.detail),
            ErrorKind::ConnectionDropped => write!(f, "connection dropped: {}", self.detail),
            ErrorKind::Protocol => write!(f, "protocol error: {}", self.detail),
            ErrorKind::Type => write!(f, "unexpected reply type: {}", self.detail),
            ErrorKind::InvalidConfig => write!(f, "invalid configuration: {}", self.detail),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

impl From<ruvio_protocol::DecodeError> for Error {
    fn from(e: ruvio_protocol::DecodeError) -> Error {
        Error::new(ErrorKind::Protocol, e.to_string())
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
