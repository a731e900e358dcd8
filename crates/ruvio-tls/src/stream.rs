//! One connection that is plain TCP or TLS, and the two handshakes, each bounded in time.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
pub use tokio_rustls::TlsAcceptor;

/// A connection: plain TCP, or TLS over TCP (either side of the handshake). Reading and writing go through the
/// one `match`, so code that serves connections is written once for both.
pub enum Stream {
    Plain(TcpStream),
    /// Boxed: a TLS session is a few hundred bytes of state that a plain connection should not carry.
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under the connection (addresses, socket options).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.tcp().peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.tcp().local_addr()
    }

    /// Reads what can be read without waiting: `Err(WouldBlock)` when nothing is there. With TLS, "there" includes
    /// what an earlier read already decrypted.
    pub async fn try_read_buf(&mut self, buf: &mut bytes::BytesMut) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.try_read_buf(buf),
            Stream::Tls(_) => {
                let read = self.read_buf(buf);
                tokio::pin!(read);
                std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
                    Poll::Pending => Poll::Ready(Err(io::ErrorKind::WouldBlock.into())),
                    done => done,
                })
                .await
            }
        }
    }
}

use std::future::Future as _;

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

fn timed_out(what: &str, limit: Duration) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("TLS handshake {what} took longer than {} ms", limit.as_millis()))
}

/// The server's side of the handshake. A peer that sends nothing, or anything that is not TLS (a plain RESP
/// client on the TLS port), ends here with an error within `limit`: the caller closes the socket.
pub async fn accept(acceptor: &TlsAcceptor, tcp: TcpStream, limit: Duration) -> io::Result<Stream> {
    let s = tokio::time::timeout(limit, acceptor.accept(tcp)).await.map_err(|_| timed_out("with a client", limit))??;
    Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s))))
}

/// The client's side of the handshake with `host` (the name its certificate is checked against, when the
/// configuration checks names).
pub async fn connect(config: Arc<ClientConfig>, host: &str, tcp: TcpStream, limit: Duration) -> io::Result<Stream> {
    let name = crate::server_name(host).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let s = tokio::time::timeout(limit, connector.connect(name, tcp)).await.map_err(|_| timed_out("with the server", limit))??;
    Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(s))))
}
