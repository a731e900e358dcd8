package dev.ruvio.redissonproof;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.ruvio.LockHandle;
import io.ruvio.RuvioClient;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * The "after" code of docs/migrating.md's Redisson section, against {@code $RUVIO_BIN} only (it uses LEASE, IFGT and
 * SEMAPHORE, which redis-server does not have: test.sh runs this class in the Ruvio pass only). Each method is the
 * doc's snippet with the names it assumes (c, redisson, buildReport, ...) bound, plus checks of what the snippet's
 * comments promise.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MigrationTest {
    private TestServer server;
    private RuvioClient c;
    private RedissonClient redisson;

    @BeforeEach
    void start() throws Exception {
        if (!TestServer.target().equals("ruvio")) {
            throw new IllegalStateException("MigrationTest runs against ruvio only (LIBRARY_TARGET=ruvio)");
        }
        server = TestServer.start();
        c = RuvioClient.connect("127.0.0.1", server.port);
        redisson = Redisson.create(RedissonProofTest.config(server.address()));
    }

    @AfterEach
    void stop() throws Exception {
        redisson.shutdown(0, 5, TimeUnit.SECONDS);
        c.close();
        server.close();
    }

    static String buildReport() {
        return "report";
    }

    @Test
    void lockWithWatchdogBecomesLockHelperAndIfgt() throws Exception {
        try (LockHandle held = c.lock("lease:invoice:42", Duration.ofSeconds(30))) {
            if (!c.ifGt("invoice:42:state", held.token(), "charged")) {
                throw new IllegalStateException("stale lease: a newer holder already wrote");
            }
            assertNull(c.lease("lease:invoice:42", 30_000), "held");
        }
        assertEquals("charged", c.command("GET", "invoice:42:state"));
        assertNotNull(c.lease("lease:invoice:42", 30_000), "released by close()");
    }

    @Test
    void tryLockBecomesLeaseWait() throws Exception {
        Long token = c.lease("lease:report:nightly", 30_000, 5_000);
        assertNotNull(token);
        try {
            if (!c.ifGt("report:nightly:result", token, buildReport())) {
                throw new IllegalStateException("stale lease: a newer holder already wrote");
            }
        } finally {
            c.release("lease:report:nightly", token);
        }
        assertEquals("report", c.command("GET", "report:nightly:result"));
    }

    @Test
    void aStaleHolderWriteIsRefused() throws Exception {
        // What RFencedLock's token cannot do by itself: the server refuses the older token's write.
        Long old = c.lease("lease:ledger:7", 200);
        assertNotNull(old);
        TestServerWait.until("the 200 ms lease to expire", () -> c.command("EXISTS", "lease:ledger:7").equals(0L));
        try (LockHandle held = c.lock("lease:ledger:7", Duration.ofSeconds(30))) {
            assertTrue(held.token() > old);
            assertTrue(c.ifGt("ledger:7:entry", held.token(), "new"));
        }
        assertFalse(c.ifGt("ledger:7:entry", old, "stale"), "the paused holder's write is refused");
        assertEquals("new", c.command("GET", "ledger:7:entry"));
    }

    @Test
    void semaphoreSlotsHaveTtlAndTokens() throws Exception {
        Long slot = c.semaphore("upstream:billing", 8, 15_000, 2_000);
        assertNotNull(slot);
        try {
            for (int i = 0; i < 7; i++) {
                assertNotNull(c.semaphore("upstream:billing", 8, 300));
            }
            assertNull(c.semaphore("upstream:billing", 8, 15_000), "all 8 taken");
            // Seven holders that "died" (never release): their slots come back with their TTL.
            assertNotNull(c.semaphore("upstream:billing", 8, 15_000, 30_000));
        } finally {
            c.release("upstream:billing", slot);
        }
    }

    @Test
    void redissonScriptApiRunsTheLockCommands() throws Exception {
        RScript script = redisson.getScript(StringCodec.INSTANCE);
        // Inside a script a fencing token is an exact decimal string (Lua numbers are doubles; docs/scripting.md).
        String granted = script.eval(RScript.Mode.READ_WRITE,
                "return redis.call('LEASE', KEYS[1], ARGV[1])",
                RScript.ReturnType.VALUE, List.of("lease:invoice:42"), "30000");
        assertNotNull(granted);
        long token = Long.parseLong(granted);
        String again = script.eval(RScript.Mode.READ_WRITE,
                "return redis.call('LEASE', KEYS[1], ARGV[1])",
                RScript.ReturnType.VALUE, List.of("lease:invoice:42"), "30000");
        assertNull(again, "held: nil");
        Long written = script.eval(RScript.Mode.READ_WRITE,
                "return redis.call('IFGT', KEYS[1], ARGV[1], ARGV[2])",
                RScript.ReturnType.INTEGER, List.of("invoice:42:state"), String.valueOf(token), "charged");
        assertEquals(1L, written);
        Long released = script.eval(RScript.Mode.READ_WRITE, "return redis.call('RELEASE', KEYS[1], ARGV[1])",
                RScript.ReturnType.INTEGER, List.of("lease:invoice:42"), String.valueOf(token));
        assertEquals(1L, released);
        Long stale = script.eval(RScript.Mode.READ_WRITE,
                "return redis.call('IFGT', KEYS[1], ARGV[1], ARGV[2])",
                RScript.ReturnType.INTEGER, List.of("invoice:42:state"), String.valueOf(token - 1), "late");
        assertEquals(0L, stale);
        assertThrows(Exception.class, () -> script.eval(RScript.Mode.READ_WRITE,
                "return redis.call('RELEASE', KEYS[1])", RScript.ReturnType.INTEGER, List.of("x")));
    }

    /** Bounded condition wait. */
    static final class TestServerWait {
        interface Cond {
            boolean ok() throws Exception;
        }

        static void until(String what, Cond cond) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!cond.ok()) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("timed out waiting for " + what);
                }
                Thread.sleep(25);
            }
        }
    }
}
