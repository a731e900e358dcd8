package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * TLS against a real TLS server: Ruvio (RUVIO_BIN) on a TLS-only port, its certificate signed by a throwaway CA made
 * with openssl for this run.
 */
class TlsTest {
    static Path certs;
    static ServerProcess server;

    @BeforeAll
    static void start() throws Exception {
        certs = Files.createTempDirectory("ruvio-java-tls");
        // The CA the server's certificate is signed by, and another CA nobody signed anything with.
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ruvio test CA",
                "-keyout", "ca.key", "-out", "ca.crt");
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=some other CA",
                "-keyout", "other-ca.key", "-out", "other-ca.crt");
        // The server's key and certificate, valid for 127.0.0.1 and localhost, signed by the CA.
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
                "-out", "server.csr");
        Files.writeString(certs.resolve("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "ext.cnf", "-out", "server.crt");
        server = ServerProcess.ruvioTls(certs.resolve("server.crt"), certs.resolve("server.key"),
                certs.resolve("ca.crt"));
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.close();
        }
    }

    static void openssl(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add("openssl");
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(certs.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("openssl failed: " + cmd + "\n" + out);
        }
    }

    /** A socket factory that trusts only the given CA certificate (PEM). */
    static SSLSocketFactory trusting(String caFile) throws Exception {
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        try (InputStream in = Files.newInputStream(certs.resolve(caFile))) {
            Certificate ca = CertificateFactory.getInstance("X.509").generateCertificate(in);
            ks.setCertificateEntry("ca", ca);
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tmf.getTrustManagers(), null);
        return ctx.getSocketFactory();
    }

    @Test
    void trustedCaConnectsAndRunsCommands() throws Exception {
        String k = "tls:" + UUID.randomUUID();
        byte[] bin = BinaryRepliesTest.ALL_BYTES;
        try (RuvioClient c = RuvioClient.connect(ClientOptions.builder()
                .host("127.0.0.1").port(server.port)
                .sslSocketFactory(trusting("ca.crt"))        // implies tls(true); the host name is checked
                .build())) {
            assertEquals("PONG", c.ping());
            assertEquals("OK", c.command("SET", k, "over tls"));
            assertEquals("over tls", c.get(k));
            assertEquals(3, c.protocol(), "HELLO 3 over TLS");
            c.command("SET", k + ":bin", bin);
            assertArrayEquals(bin, c.getBytes(k + ":bin"), "binary values over TLS");
            Pipeline p = c.pipeline();
            for (int i = 0; i < 100; i++) {
                p.command("INCR", k + ":n");
            }
            List<Object> r = p.execute();
            assertEquals(100L, r.get(99));
            try (RuvioConnection conn = c.dedicated()) {
                assertEquals("over tls", conn.command("GET", k), "pooled connections use TLS too");
            }
        }
        // The same through a rediss:// URL (scheme sets TLS) and RESP2.
        try (RuvioClient c = RuvioClient.connect(ClientOptions.builder()
                .uri("rediss://localhost:" + server.port + "/0?timeout=5000")
                .sslSocketFactory(trusting("ca.crt"))
                .protocol(2)
                .build())) {
            assertEquals(2, c.protocol());
            assertEquals("over tls", c.get(k), "host name localhost is in the certificate");
        }
    }

    @Test
    void serverCertificateNotTrustedFailsWithinTheConnectTimeout() throws Exception {
        Duration connectTimeout = Duration.ofSeconds(5);
        for (SSLSocketFactory f : new SSLSocketFactory[] {trusting("other-ca.crt"), null}) {
            ClientOptions.Builder b = ClientOptions.builder()
                    .uri("rediss://127.0.0.1:" + server.port)         // null factory: the JVM's default trust store
                    .connectTimeout(connectTimeout).commandTimeout(connectTimeout);
            if (f != null) {
                b.sslSocketFactory(f);
            }
            ClientOptions o = b.build();
            long t0 = System.nanoTime();
            RuvioConnectionException e = assertThrows(RuvioConnectionException.class, () -> {
                try (RuvioClient c = RuvioClient.connect(o)) {
                    c.ping();
                }
            });
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertInstanceOf(SSLException.class, e.getCause(), "the TLS failure is the cause: " + e);
            assertTrue(e.getMessage().contains("cannot connect to 127.0.0.1:" + server.port), e.getMessage());
            assertTrue(e.getMessage().contains("PKIX") || e.getMessage().contains("certificat"),
                    "says the certificate is not trusted: " + e.getMessage());
            // A refused certificate fails at the handshake, not after the timeout; the bound is deliberately loose
            // (connect timeout plus slack for a loaded machine), the point is "no hang".
            assertTrue(ms < connectTimeout.toMillis() + 10_000, "took " + ms + " ms");
            assertTrue(!e.isFateUnknown(), "nothing was sent");
        }
    }

    @Test
    void hostNameNotInTheCertificateIsRefusedUnlessVerificationIsOff() throws Exception {
        // A certificate from the trusted CA, but for another name only.
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=ruvio.invalid", "-keyout", "other.key",
                "-out", "other.csr");
        Files.writeString(certs.resolve("other-ext.cnf"), "subjectAltName=DNS:ruvio.invalid\n");
        openssl("x509", "-req", "-in", "other.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "other-ext.cnf", "-out", "other.crt");
        try (ServerProcess named = ServerProcess.ruvioTls(certs.resolve("other.crt"), certs.resolve("other.key"),
                certs.resolve("ca.crt"))) {
            RuvioConnectionException e = assertThrows(RuvioConnectionException.class, () -> {
                try (RuvioClient c = RuvioClient.connect(ClientOptions.builder()
                        .host("127.0.0.1").port(named.port).sslSocketFactory(trusting("ca.crt"))
                        .connectTimeout(Duration.ofSeconds(5)).build())) {
                    c.ping();
                }
            });
            assertInstanceOf(SSLException.class, e.getCause(), e.toString());
            assertTrue(e.getMessage().contains("127.0.0.1"), "names the address: " + e.getMessage());
            try (RuvioClient c = RuvioClient.connect(ClientOptions.builder()
                    .host("127.0.0.1").port(named.port).sslSocketFactory(trusting("ca.crt"))
                    .verifyHostname(false).build())) {
                assertEquals("PONG", c.ping(), "the chain is trusted; only the name check is off");
            }
        }
    }

    @Test
    void tlsHandshakeWithAPausedServerTimesOut() throws Exception {
        Duration connectTimeout = Duration.ofSeconds(1);
        server.pause(); // the kernel still accepts the TCP connection; the TLS handshake gets no answer
        try {
            long t0 = System.nanoTime();
            assertThrows(RuvioTimeoutException.class, () -> {
                try (RuvioClient c = RuvioClient.connect(ClientOptions.builder()
                        .host("127.0.0.1").port(server.port).sslSocketFactory(trusting("ca.crt"))
                        .connectTimeout(connectTimeout).commandTimeout(connectTimeout).build())) {
                    c.ping();
                }
            });
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(ms < connectTimeout.toMillis() + 10_000, "took " + ms + " ms: no hang");
        } finally {
            server.resume();
        }
        try (RuvioClient c = RuvioClient.connect(ClientOptions.builder()
                .host("127.0.0.1").port(server.port).sslSocketFactory(trusting("ca.crt")).build())) {
            assertEquals("PONG", c.ping(), "fine again once resumed");
        }
    }

    @Test
    void plainClientAgainstTheTlsPortFailsWithinTheTimeout() {
        Duration t = Duration.ofSeconds(2);
        long t0 = System.nanoTime();
        RuvioException e = assertThrows(RuvioException.class, () -> {
            try (RuvioClient c = RuvioClient.connect(ClientOptions.builder().host("127.0.0.1").port(server.port)
                    .connectTimeout(t).commandTimeout(t).build())) {
                c.ping();
            }
        });
        assertTrue(e instanceof RuvioConnectionException || e instanceof RuvioTimeoutException, e.toString());
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms < t.toMillis() + 10_000, "took " + ms + " ms: no hang");
    }
}
