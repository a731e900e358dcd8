package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The product post's Java snippets (shared/product/fencing-tokens-with-lease.md), copied verbatim, then checked
 * against what their comments promise.
 *
 * <p>The snippets connect to 127.0.0.1:6379. So that they run unchanged against this test's own server (on a free
 * port, never a shared 6379), the name {@code RuvioClient} inside this class is a tiny shim whose {@code connect}
 * calls the real {@link io.ruvio.RuvioClient#connect(String, int)} with the test server's port. Everything the
 * snippets call after {@code connect} is the real client.
 */
class SnippetTest {
    static ServerProcess server;

    /** Shadows io.ruvio.RuvioClient for the verbatim snippets: only the port of connect() is redirected. */
    static final class RuvioClient {
        static io.ruvio.RuvioClient connect(String host, int port) {
            return io.ruvio.RuvioClient.connect(host, port == 6379 ? server.port : port);
        }
    }

    @BeforeAll
    static void start() {
        server = ServerProcess.ruvio();
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    @Test
    void leaseSnippet() {
        var c = RuvioClient.connect("127.0.0.1", 6379);

        Long token = c.lease("job:nightly-report", 30_000);
        // token -> you hold it
        // null -> someone else holds it
        if (token != null) {
            Boolean released = c.release("job:nightly-report", token);
            // true -> released (false if the token no longer matches)
        }

        // What the comments promise:
        assertNotNull(token, "a free lock is granted");
        assertTrue(token > 0);
        assertFalse(c.release("job:nightly-report", token), "released already: the token no longer matches");
        assertEquals(0L, c.command("EXISTS", "job:nightly-report"), "the release freed the lock");
        Long mine = c.lease("job:nightly-report", 30_000);
        try (var other = io.ruvio.RuvioClient.connect("127.0.0.1", server.port)) {
            assertNull(other.lease("job:nightly-report", 30_000), "someone else holds it -> null");
        }
        assertTrue(mine > token, "tokens only grow");
        assertTrue(c.release("job:nightly-report", mine));
        c.close();
    }

    @Test
    void semaphoreSnippet() {
        var c = RuvioClient.connect("127.0.0.1", 6379);

        Long token = c.semaphore("upstream:billing", 8, 15_000);
        // 1700000000123 -> a slot, this is your token
        // null          -> all 8 slots are taken
        if (token != null) {
            c.release("upstream:billing", token);
        }

        assertNotNull(token, "a free slot is granted");
        assertEquals(0L, c.command("EXISTS", "upstream:billing"), "the semaphore goes away with its last holder");
        Long[] slots = new Long[8];
        for (int i = 0; i < 8; i++) {
            slots[i] = c.semaphore("upstream:billing", 8, 15_000);
            assertNotNull(slots[i]);
        }
        assertNull(c.semaphore("upstream:billing", 8, 15_000), "all 8 slots are taken -> null");
        for (Long s : slots) {
            assertTrue(c.release("upstream:billing", s));
        }
        c.close();
    }
}
