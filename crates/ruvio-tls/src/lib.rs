//! TLS for Ruvio's server, coordinator and Rust client, configured as Redis configures it (`tls-cert-file`,
//! `tls-key-file`, `tls-ca-cert-file`, `tls-ca-cert-dir`, `tls-auth-clients`).
//!
//! rustls with the `ring` provider (rustls's default provider, aws-lc, needs a C toolchain with cmake and nasm and
//! is not among the vendored crates). This crate only reads PEM files and builds rustls configurations; with the
//! `tokio` feature it also has [`Stream`], one connection that is plain TCP or TLS, and the handshakes.

use std::sync::Arc;

pub use rustls;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

#[cfg(feature = "tokio")]
mod stream;
#[cfg(feature = "tokio")]
pub use stream::{accept, connect, Stream, TlsAcceptor};

/// `tls-auth-clients`: whether a client must present a certificate signed by a trusted CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// `no`: no certificate is asked for.
    No,
    /// `optional`: a certificate is asked for; one that is sent must be valid, none at all is accepted.
    Optional,
    /// `yes` (Redis's default): a valid certificate is required.
    #[default]
    Required,
}

impl ClientAuth {
    /// Parses `yes`, `no` or `optional` (Redis's values).
    pub fn parse(v: &str) -> Result<ClientAuth, String> {
        match v.to_ascii_lowercase().as_str() {
            "yes" => Ok(ClientAuth::Required),
            "no" => Ok(ClientAuth::No),
            "optional" => Ok(ClientAuth::Optional),
            _ => Err("argument must be one of yes, no, optional".into()),
        }
    }

    /// The value as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::Required => "yes",
            ClientAuth::No => "no",
            ClientAuth::Optional => "optional",
        }
    }
}

/// Where a server's certificate, key and trusted CAs are.
#[derive(Debug, Clone, Default)]
pub struct ServerFiles {
    pub cert_file: String,
    pub key_file: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: ClientAuth,
}

/// Where a client's trusted CAs and (optional) certificate and key are.
#[derive(Debug, Clone, Default)]
pub struct ClientFiles {
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    /// The certificate presented to the server (empty: none).
    pub cert_file: String,
    pub key_file: String,
    /// Check that the server's certificate names the host connected to. Links between Ruvio's own processes
    /// (replication, coordinators) only check the chain, as Redis does: their addresses are often bare IPs that
    /// the certificates do not name, and trust comes from the private CA.
    pub verify_hostname: bool,
}

/// rustls's `ring` provider: deprecated in 0.23.48 only because it has no post-quantum key exchange; it is the
/// one provider that builds here (aws-lc is not vendored). Classical ECDHE (X25519, P-256) as Redis with OpenSSL.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM file.
pub fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let data = std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut &data[..]).collect::<Result<_, _>>().map_err(|e| format!("{path}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path}: no certificate found (expected PEM 'BEGIN CERTIFICATE')"));
    }
    Ok(certs)
}

/// The first private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    let data = std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))?;
    rustls_pemfile::private_key(&mut &data[..])
        .map_err(|e| format!("{path}: not a PEM key file: {e}"))?
        .ok_or_else(|| format!("{path}: no private key found (expected PEM 'BEGIN PRIVATE KEY')"))
}

/// The trusted CAs of `ca_file` and of every certificate file in `ca_dir` (Redis's `tls-ca-cert-dir` is an OpenSSL
/// hashed folder; every regular file there that holds PEM certificates is read, others are skipped).
pub fn load_roots(ca_file: &str, ca_dir: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let mut add = |path: &str, strict: bool| -> Result<(), String> {
        let certs = match load_certs(path) {
            Ok(c) => c,
            Err(e) if strict => return Err(e),
            Err(_) => return Ok(()),
        };
        for c in certs {
            roots.add(c).map_err(|e| format!("{path}: not a usable CA certificate: {e}"))?;
        }
        Ok(())
    };
    if !ca_file.is_empty() {
        add(ca_file, true)?;
    }
    if !ca_dir.is_empty() {
        let entries = std::fs::read_dir(ca_dir).map_err(|e| format!("reading {ca_dir}: {e}"))?;
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink()) {
                add(&e.path().display().to_string(), false)?;
            }
        }
    }
    Ok(roots)
}

/// A server's configuration: its certificate and key, and what it asks of clients (`tls-auth-clients`).
pub fn server_config(f: &ServerFiles) -> Result<Arc<ServerConfig>, String> {
    if f.cert_file.is_empty() || f.key_file.is_empty() {
        return Err("TLS needs tls-cert-file and tls-key-file".into());
    }
    let certs = load_certs(&f.cert_file)?;
    let key = load_key(&f.key_file)?;
    let builder = ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
    let builder = match f.auth_clients {
        ClientAuth::No => builder.with_no_client_auth(),
        auth => {
            if f.ca_cert_file.is_empty() && f.ca_cert_dir.is_empty() {
                return Err(format!("tls-auth-clients {} needs tls-ca-cert-file or tls-ca-cert-dir (the CAs client certificates must be signed by)", auth.as_str()));
            }
            let roots = load_roots(&f.ca_cert_file, &f.ca_cert_dir)?;
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
            let v = if auth == ClientAuth::Optional { v.allow_unauthenticated() } else { v };
            builder.with_client_cert_verifier(v.build().map_err(|e| format!("TLS client verification: {e}"))?)
        }
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| format!("{} and {} do not make a usable certificate and key: {e}", f.cert_file, f.key_file))?;
    Ok(Arc::new(config))
}

/// A client's configuration: the CAs it trusts (the system's are never read: Ruvio's deployments use their own
/// CA) and the certificate it presents, if any.
pub fn client_config(f: &ClientFiles) -> Result<Arc<ClientConfig>, String> {
    if f.ca_cert_file.is_empty() && f.ca_cert_dir.is_empty() {
        return Err("a TLS client needs a CA to trust (tls-ca-cert-file or tls-ca-cert-dir)".into());
    }
    let roots = Arc::new(load_roots(&f.ca_cert_file, &f.ca_cert_dir)?);
    let builder = ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions().map_err(|e| e.to_string())?;
    let builder = if f.verify_hostname {
        builder.with_root_certificates(roots)
    } else {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider()).build().map_err(|e| format!("TLS server verification: {e}"))?;
        builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
    };
    let config = match (f.cert_file.is_empty(), f.key_file.is_empty()) {
        (true, true) => builder.with_no_client_auth(),
        (false, false) => {
            let certs = load_certs(&f.cert_file)?;
            let key = load_key(&f.key_file)?;
            builder.with_client_auth_cert(certs, key).map_err(|e| format!("{} and {} do not make a usable certificate and key: {e}", f.cert_file, f.key_file))?
        }
        _ => return Err("a client certificate needs both its certificate file and its key file".into()),
    };
    Ok(Arc::new(config))
}

/// The name a client checks the server's certificate against: an IP address or a DNS name.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|_| format!("'{host}' is neither an IP address nor a DNS name"))
}

/// Verifies the server's chain against the trusted CAs, its validity and signatures, but not that it names the
/// host (see [`ClientFiles::verify_hostname`]).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
