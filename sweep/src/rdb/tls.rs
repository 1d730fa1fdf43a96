//! TLS to the database through rustls (no OpenSSL in the wheel), with
//! libpq's meanings: `prefer` and `require` encrypt without checking the
//! server's certificate unless `sslrootcert` names a CA file (then it is
//! checked); `verify-ca` and `verify-full` check the chain and the host
//! name, against `sslrootcert` or else Mozilla's roots (webpki-roots).

use super::target::{Target, Tls};
use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

pub fn connector(target: &Target) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("rustls: protocol versions")?;
    let config = match (&target.tls, &target.root_cert) {
        (Tls::Prefer | Tls::Require | Tls::Disable, None) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
            .with_no_client_auth(),
        (_, root) => {
            let mut roots = RootCertStore::empty();
            match root {
                Some(path) => {
                    let bad = |e: &dyn std::fmt::Display| {
                        common::bad_input!("sslrootcert {}: {e}", path.display())
                    };
                    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
                        roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
                    }
                }
                None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// libpq's `require` without a CA file: encrypted, the certificate taken
/// as it comes (the handshake's signatures are still checked).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
