//! TLS settings (feature `tls`): the CAs the client trusts, the certificate it presents, the name it checks.

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};

/// How connections are secured with TLS: built with [`TlsConfig::builder`] from PEM files, or from a rustls
/// configuration of your own ([`TlsConfig::from_rustls`], for roots kept in memory or a custom verifier). Given to
/// [`ClientBuilder::tls`](crate::ClientBuilder::tls); every connection made from those options (reconnects, the
/// renewal connection of a lock guard, Sentinel-protocol lookups) uses it.
///
/// ```no_run
/// use ruvio_client::{Client, TlsConfig};
///
/// let tls = TlsConfig::builder().ca_file("/etc/ruvio/tls/ca.crt").client_cert("/etc/ruvio/tls/client.crt", "/etc/ruvio/tls/client.key").build()?;
/// let mut db = Client::builder("ruvio.internal", 6380).tls(tls).connect()?;
/// # Ok::<(), ruvio_client::Error>(())
/// ```
#[derive(Clone)]
pub struct TlsConfig {
    pub(crate) config: Arc<ruvio_tls::rustls::ClientConfig>,
    /// The name the server's certificate must carry, when it is not the host connected to.
    pub(crate) server_name: Option<String>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Settings read from PEM files.
    pub fn builder() -> TlsBuilder {
        TlsBuilder { files: ruvio_tls::ClientFiles { verify_hostname: true, ..Default::default() }, server_name: None }
    }

    /// A rustls client configuration made by the caller (`ruvio_client::rustls` is the version this crate uses;
    /// build it with the `ring` provider).
    pub fn from_rustls(config: Arc<ruvio_tls::rustls::ClientConfig>) -> TlsConfig {
        TlsConfig { config, server_name: None }
    }

    /// Checks the server's certificate against `name` instead of the host connected to (an IP address that the
    /// certificate does not list, for example).
    pub fn server_name(mut self, name: impl Into<String>) -> TlsConfig {
        self.server_name = Some(name.into());
        self
    }

    pub(crate) fn name_for<'a>(&'a self, host: &'a str) -> &'a str {
        self.server_name.as_deref().unwrap_or(host)
    }
}

/// Builds a [`TlsConfig`] from PEM files.
#[derive(Debug, Clone)]
pub struct TlsBuilder {
    files: ruvio_tls::ClientFiles,
    server_name: Option<String>,
}

impl TlsBuilder {
    /// The CA certificates (PEM) the server's certificate must be signed by. The system's store is not read.
    pub fn ca_file(mut self, path: impl AsRef<std::path::Path>) -> Self {
        self.files.ca_cert_file = path.as_ref().display().to_string();
        self
    }

    /// A folder of CA certificate files (every PEM certificate in it is trusted).
    pub fn ca_dir(mut self, path: impl AsRef<std::path::Path>) -> Self {
        self.files.ca_cert_dir = path.as_ref().display().to_string();
        self
    }

    /// The certificate and key (PEM) presented to a server that asks for one (`tls-auth-clients yes`).
    pub fn client_cert(mut self, cert: impl AsRef<std::path::Path>, key: impl AsRef<std::path::Path>) -> Self {
        self.files.cert_file = cert.as_ref().display().to_string();
        self.files.key_file = key.as_ref().display().to_string();
        self
    }

    /// Whether the server's certificate must name the host connected to (default: yes). Turning it off trusts
    /// any certificate the CAs signed, as redis-server's own links do; only for a private CA.
    pub fn verify_hostname(mut self, verify: bool) -> Self {
        self.files.verify_hostname = verify;
        self
    }

    /// See [`TlsConfig::server_name`].
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Reads the files; fails with [`ErrorKind::InvalidConfig`] naming the file that does not load.
    pub fn build(self) -> Result<TlsConfig> {
        let config = ruvio_tls::client_config(&self.files).map_err(|e| Error::new(ErrorKind::InvalidConfig, e))?;
        Ok(TlsConfig { config, server_name: self.server_name })
    }
}
