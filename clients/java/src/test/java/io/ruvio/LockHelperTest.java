package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The lock helper: try-with-resources, watchdog renewals, loss signal, hold cap, release after loss. */
class LockHelperTest {
    static ServerProcess server;
    static RuvioClient c;

    @BeforeAll
    static void start() {
        server = ServerProcess.ruvio();
        c = RuvioClient.connect("127.0.0.1", server.port);
    }

    @AfterAll
    static void stop() {
        c.close();
        server.close();
    }

    static String key(String s) {
        return s + ":" + UUID.randomUUID();
    }

    @Test
    void tryWithResourcesHoldsAndReleases() {
        String k = key("twr");
        LockHandle outside;
        try (var held = c.lock(k, Duration.ofSeconds(30))) {
            outside = held;
            assertTrue(held.token() > 0);
            assertEquals(k, held.name());
            assertTrue(held.isHeld());
            assertNull(c.lease(k, 1000), "someone else cannot take it");
            assertEquals(held.token(), c.lockInfo(k).holders().get(0).token());
            assertTrue(c.ifGt(key("data"), held.token(), "written under the lock"));
        }
        assertEquals(0L, c.command("EXISTS", k), "released at the end of the scope");
        assertFalse(outside.release(), "a second release answers false");
        assertFalse(outside.lost().isDone(), "a released lock is not lost");
        assertNull(outside.lossReason());
    }

    @Test
    void renewsOverSeveralTtls() {
        String k = key("renew");
        try (LockHandle h = c.tryLock(k, Duration.ofMillis(1500))) {
            assertNotNull(h);
            // 3 TTLs: without renewals the lease would be gone after the first
            ServerProcess.sleep(4500);
            assertTrue(h.isHeld(), "still held: " + h.lossReason());
            assertFalse(h.lost().isDone());
            LockInfo info = c.lockInfo(k);
            assertNotNull(info, "the lease still exists on the server");
            assertEquals(h.token(), info.holders().get(0).token(), "the same grant, renewed");
            long renewals = infoLocks("lock_renewals");
            assertTrue(renewals >= 3, "renewed at about TTL/3: " + renewals);
            assertTrue(h.release());
        }
    }

    static long infoLocks(String field) {
        String info = (String) c.command("INFO", "locks");
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(field + ":")) {
                return Long.parseLong(line.substring(field.length() + 1).trim());
            }
        }
        throw new AssertionError(field + " not in INFO locks");
    }

    @Test
    void lossIsSignalledBeforeTheDeadlineWhenTheServerIsPaused() throws Exception {
        try (ServerProcess own = ServerProcess.ruvio();
             RuvioClient a = RuvioClient.connect("127.0.0.1", own.port)) {
            AtomicLong lostAt = new AtomicLong();
            AtomicReference<LockHandle> seen = new AtomicReference<>();
            long ttl = 2000;
            long sent = System.nanoTime();
            LockHandle h = a.tryLock("job", Duration.ofMillis(ttl), LockOptions.defaults().onLost(x -> {
                lostAt.set(System.nanoTime());
                seen.set(x);
            }));
            assertNotNull(h);
            own.pause();
            try {
                h.lost().get(20, TimeUnit.SECONDS);
                assertTrue(lostAt.get() != 0, "the callback ran before the future completed");
                assertTrue(lostAt.get() < sent + TimeUnit.MILLISECONDS.toNanos(ttl),
                        "loss signalled before the earliest server-side deadline");
                assertSame(h, seen.get());
                assertEquals(LockLossReason.DEADLINE_PASSED, h.lossReason());
                assertFalse(h.isHeld());
                ServerProcess.sleep(ttl + 500);
            } finally {
                own.resume();
            }
            assertFalse(h.release(), "release after loss answers false and does not throw");
            assertTrue(ServerProcess.waitFor(20_000, () -> a.lockInfo("job") == null), "the lease expired");
            Long next = a.lease("job", 30_000);
            assertNotNull(next);
            assertTrue(next > h.token());
            assertFalse(h.release());
            assertEquals(next, a.lockInfo("job").holders().get(0).token(), "the stale handle freed nothing");
        }
    }

    @Test
    void releaseAfterLossNeverThrowsEvenWhileTheServerIsDown() throws Exception {
        ServerProcess own = ServerProcess.ruvio();
        try (RuvioClient a = RuvioClient.connect(ClientOptions.builder().port(own.port)
                .commandTimeout(Duration.ofMillis(500)).connectTimeout(Duration.ofMillis(500)).build())) {
            LockHandle h = a.tryLock("job", Duration.ofMillis(1000));
            own.kill();
            h.lost().get(20, TimeUnit.SECONDS);
            assertFalse(h.release());
        } finally {
            own.close();
        }
    }

    @Test
    void brokenLockIsReportedAtTheNextRenewal() throws Exception {
        String k = key("broken");
        CompletableFuture<LockHandle> cb = new CompletableFuture<>();
        LockHandle h = c.tryLock(k, Duration.ofMillis(1500), LockOptions.defaults().onLost(cb::complete));
        assertEquals(1L, c.del(k));
        h.lost().get(20, TimeUnit.SECONDS);
        assertEquals(LockLossReason.RENEW_REJECTED, h.lossReason());
        assertSame(h, cb.get(1, TimeUnit.SECONDS));
        Long other = c.lease(k, 30_000);
        assertNotNull(other, "the helper never re-acquires");
        assertFalse(h.release());
        assertEquals(other, c.lockInfo(k).holders().get(0).token());
    }

    @Test
    void holdCapStopsRenewing() throws Exception {
        String k = key("cap");
        long start = System.nanoTime();
        LockHandle h = c.tryLock(k, Duration.ofMillis(1000), LockOptions.defaults().maxHold(Duration.ofMillis(2500)));
        h.lost().get(20, TimeUnit.SECONDS);
        assertEquals(LockLossReason.HOLD_CAP_REACHED, h.lossReason());
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(1000),
                "it renewed past the first TTL before the cap");
        assertTrue(ServerProcess.waitFor(10_000, () -> c.command("EXISTS", k).equals(0L)), "the lease ran out");
        assertFalse(h.release());
    }

    @Test
    void withoutAutoRenewLossComesBeforeTheTtl() throws Exception {
        String k = key("norenew");
        long sent = System.nanoTime();
        LockHandle h = c.tryLock(k, Duration.ofMillis(2000), LockOptions.defaults().autoRenew(false));
        CompletableFuture<Boolean> ran = new CompletableFuture<>();
        h.onLost(() -> ran.complete(true));
        h.lost().get(20, TimeUnit.SECONDS);
        assertTrue(ran.get(5, TimeUnit.SECONDS), "onLost(Runnable) ran");
        assertEquals(LockLossReason.DEADLINE_PASSED, h.lossReason());
        assertTrue(h.lostAtNanos() < sent + TimeUnit.MILLISECONDS.toNanos(2000),
                "loss detected before the earliest server-side deadline");
        assertTrue(h.lostAtNanos() >= sent + TimeUnit.MILLISECONDS.toNanos(1000), "not long before it either");
        assertTrue(ServerProcess.waitFor(10_000, () -> c.command("EXISTS", k).equals(0L)));
    }

    @Test
    void semaphoreSlotsWithTheHelper() throws Exception {
        String k = key("semhelper");
        try (LockHandle a = c.trySemaphore(k, 2, Duration.ofMillis(1500), LockOptions.defaults());
             LockHandle b = c.trySemaphore(k, 2, Duration.ofMillis(1500), LockOptions.defaults())) {
            assertNotNull(a);
            assertNotNull(b);
            assertTrue(b.token() > a.token());
            assertNull(c.trySemaphore(k, 2, Duration.ofSeconds(10), LockOptions.defaults()), "both slots taken");
            ServerProcess.sleep(4000); // more than two TTLs: both slots are renewed
            assertTrue(a.isHeld() && b.isHeld());
            LockInfo info = c.lockInfo(k);
            assertEquals("semaphore", info.kind());
            assertEquals(2, info.holders().size());
            CompletableFuture<LockHandle> waiter = c.async().trySemaphore(k, 2, Duration.ofSeconds(10),
                    LockOptions.defaults().waitFor(Duration.ofSeconds(20)));
            assertTrue(ServerProcess.waitFor(10_000, () -> c.lockInfo(k).waiters() == 1));
            assertTrue(a.release());
            try (LockHandle third = waiter.get(30, TimeUnit.SECONDS)) {
                assertNotNull(third);
                assertTrue(third.token() > b.token());
            }
        }
        assertEquals(0L, c.command("EXISTS", k), "the semaphore goes away with its last holder");
    }

    @Test
    void waitingForms() throws Exception {
        String k = key("wait");
        Long t = c.lease(k, 30_000);
        assertNull(c.tryLock(k, Duration.ofSeconds(10)), "taken: null at once");
        assertNull(c.tryLock(k, Duration.ofSeconds(10), Duration.ofMillis(200)), "taken for the whole wait: null");
        CompletableFuture<LockHandle> waiter = c.async().lock(k, Duration.ofSeconds(10));
        assertTrue(ServerProcess.waitFor(10_000, () -> c.lockInfo(k).waiters() == 1));
        assertTrue(c.release(k, t));
        try (LockHandle h = waiter.get(20, TimeUnit.SECONDS)) {
            assertTrue(h.token() > t);
            assertTrue(h.isHeld());
        }
        Long t2 = c.lease(k, 30_000);
        CompletableFuture<LockHandle> w2 = c.async().tryLock(k, Duration.ofSeconds(10),
                LockOptions.defaults().waitFor(Duration.ofSeconds(20)));
        assertTrue(ServerProcess.waitFor(10_000, () -> c.lockInfo(k).waiters() == 1));
        assertTrue(c.release(k, t2));
        try (LockHandle h2 = w2.get(30, TimeUnit.SECONDS)) {
            assertNotNull(h2);
        }
    }
}
