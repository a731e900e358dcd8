package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** LEASE, RENEW, RELEASE, SEMAPHORE, IFGT, LOCKINFO and their waiting forms, sync and async, RESP3 and RESP2. */
class LockCommandsTest {
    static ServerProcess server;
    static RuvioClient c;
    static RuvioClient c2;

    @BeforeAll
    static void start() {
        server = ServerProcess.ruvio();
        c = RuvioClient.connect("127.0.0.1", server.port);
        c2 = RuvioClient.connect(ClientOptions.builder().port(server.port).protocol(2).build());
    }

    @AfterAll
    static void stop() {
        c.close();
        c2.close();
        server.close();
    }

    static String key(String s) {
        return s + ":" + UUID.randomUUID();
    }

    @Test
    void leaseRenewReleaseBothProtocols() {
        assertEquals(3, c.protocol());
        assertEquals(2, c2.protocol());
        for (RuvioClient x : new RuvioClient[] {c, c2}) {
            String k = key("lease");
            Long t = x.lease(k, 30_000);
            assertNotNull(t);
            assertNull(x.lease(k, 30_000));
            assertEquals("lease", x.command("TYPE", k));
            assertTrue(x.renew(k, t, 60_000));
            long pttl = (Long) x.command("PTTL", k);
            assertTrue(pttl > 30_000 && pttl <= 60_000, "renewed to 60 s, PTTL " + pttl);
            assertFalse(x.renew(k, t + 1_000_000, 60_000), "another token does not hold it");
            assertTrue(x.release(k, t));
            assertFalse(x.release(k, t));
            assertFalse(x.renew(k, t, 1000), "RENEW never revives");
            Long t2 = x.lease(k, 30_000);
            assertTrue(t2 > t);
            x.del(k);
        }
    }

    @Test
    void expiredLeaseIsNotRenewed() {
        String k = key("exp");
        Long t = c.lease(k, 1);
        assertNotNull(t);
        assertTrue(ServerProcess.waitFor(10_000, () -> c.command("EXISTS", k).equals(0L)));
        assertFalse(c.renew(k, t, 30_000));
        assertFalse(c.release(k, t));
    }

    @Test
    void semaphoreSlotsAndLimitMismatch() {
        String k = key("sem");
        Long a = c.semaphore(k, 2, 30_000);
        Long b = c.semaphore(k, 2, 30_000);
        assertNotNull(a);
        assertTrue(b > a);
        assertNull(c.semaphore(k, 2, 30_000));
        RuvioServerException e = assertThrows(RuvioServerException.class, () -> c.semaphore(k, 3, 30_000));
        assertEquals("ERR", e.code());
        assertTrue(e.getMessage().contains("semaphore limit is 2, not 3"), e.getMessage());
        assertTrue(c.renew(k, a, 30_000));
        assertTrue(c.release(k, a));
        assertNotNull(c.semaphore(k, 2, 30_000));
    }

    @Test
    void errorsCarryTheServerCode() {
        String k = key("str");
        c.set(k, "v");
        RuvioServerException e = assertThrows(RuvioServerException.class, () -> c.lease(k, 1000));
        assertEquals("WRONGTYPE", e.code());
        e = assertThrows(RuvioServerException.class, () -> c.lease(key("x"), 0));
        assertEquals("ERR", e.code());
        assertTrue(e.serverMessage().startsWith("ERR invalid ttl_ms"), e.serverMessage());
        e = assertThrows(RuvioServerException.class, () -> c.release(key("x"), 0));
        assertEquals("ERR value is not an integer or out of range", e.serverMessage());
        e = assertThrows(RuvioServerException.class, () -> c.lease(key("x"), 1000, -1));
        assertEquals("ERR timeout is negative", e.serverMessage());
    }

    @Test
    void ifGtFencedWrite() {
        String k = key("fence");
        String lockKey = key("l");
        Long t1 = c.lease(lockKey, 30_000);
        assertTrue(c.release(lockKey, t1));
        Long t2 = c.lease(lockKey, 30_000);
        assertTrue(c.ifGt(k, t2, "v2"));
        assertFalse(c.ifGt(k, t1, "v1"), "an older token is refused");
        assertEquals("v2", c.get(k));
        assertTrue(c.ifGt(k, t2, "v2b", 60_000), "the same token may write again");
        long pttl = (Long) c.command("PTTL", k);
        assertTrue(pttl > 0 && pttl <= 60_000);
        assertEquals("v2b", c.get(k));
    }

    @Test
    void lockInfoBothProtocols() {
        for (RuvioClient x : new RuvioClient[] {c, c2}) {
            assertNull(x.lockInfo(key("none")));
            String k = key("info");
            Long a = x.semaphore(k, 3, 30_000);
            Long b = x.semaphore(k, 3, 20_000);
            LockInfo info = x.lockInfo(k);
            assertEquals("semaphore", info.kind());
            assertEquals(3, info.limit());
            assertEquals(2, info.holders().size());
            assertEquals(a, info.holders().get(0).token());
            assertEquals(b, info.holders().get(1).token());
            assertTrue(info.holders().get(0).remainingMs() > 20_000);
            assertEquals(0, info.waiters());
            String l = key("info-lease");
            Long t = x.lease(l, 30_000);
            LockInfo li = x.lockInfo(l);
            assertEquals("lease", li.kind());
            assertEquals(1, li.limit());
            assertEquals(t, li.holders().get(0).token());
        }
    }

    @Test
    void waitingFormsAreServedOnRelease() throws Exception {
        String k = key("wait");
        Long t = c.lease(k, 30_000);
        // a waiter on a dedicated connection does not block the shared one
        CompletableFuture<Long> waiter = c.async().lease(k, 30_000, 20_000);
        assertTrue(ServerProcess.waitFor(10_000, () -> c.lockInfo(k).waiters() == 1));
        assertEquals("PONG", c.ping(), "the shared connection is not blocked by the waiter");
        assertFalse(waiter.isDone());
        assertTrue(c.release(k, t));
        Long granted = waiter.get(20, TimeUnit.SECONDS);
        assertNotNull(granted);
        assertTrue(granted > t);
        // a wait that times out answers null
        assertNull(c.lease(k, 30_000, 100));
        // semaphore waiting form
        String s = key("semwait");
        Long s1 = c.semaphore(s, 1, 30_000);
        CompletableFuture<Long> sw = c.async().semaphore(s, 1, 30_000, 20_000);
        assertTrue(ServerProcess.waitFor(10_000, () -> c.lockInfo(s).waiters() == 1));
        assertTrue(c.release(s, s1));
        assertNotNull(sw.get(20, TimeUnit.SECONDS));
        assertNull(c.semaphore(s, 1, 30_000, 100));
    }

    @Test
    void asyncSurface() throws Exception {
        RuvioAsyncClient a = c.async();
        String k = key("async");
        Long t = a.lease(k, 30_000).get(10, TimeUnit.SECONDS);
        assertNotNull(t);
        assertNull(a.lease(k, 30_000).get(10, TimeUnit.SECONDS));
        assertTrue(a.renew(k, t, 30_000).get(10, TimeUnit.SECONDS));
        assertEquals("lease", a.lockInfo(k).get(10, TimeUnit.SECONDS).kind());
        assertTrue(a.ifGt(key("f"), t, "x").get(10, TimeUnit.SECONDS));
        assertTrue(a.ifGt(key("f"), t, "x", 1000).get(10, TimeUnit.SECONDS));
        assertTrue(a.release(k, t).get(10, TimeUnit.SECONDS));
        Long s = a.semaphore(k, 2, 1000).get(10, TimeUnit.SECONDS);
        assertTrue(a.release(k, s).get(10, TimeUnit.SECONDS));
        assertEquals("OK", a.set(k, "v").get(10, TimeUnit.SECONDS));
        assertEquals("v", a.get(k).get(10, TimeUnit.SECONDS));
        assertEquals(1L, a.del(k).get(10, TimeUnit.SECONDS));
        assertEquals("PONG", a.ping().get(10, TimeUnit.SECONDS));
        assertEquals(0L, a.publish("nobody", "x").get(10, TimeUnit.SECONDS));
        var failed = a.command("LEASE", k);
        var ex = assertThrows(java.util.concurrent.ExecutionException.class, () -> failed.get(10, TimeUnit.SECONDS));
        assertTrue(ex.getCause() instanceof RuvioServerException);
        try (LockHandle h = a.tryLock(key("h"), java.time.Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS)) {
            assertTrue(h.isHeld());
        }
    }

    @Test
    void tokensIncreaseAcrossThreadsSharingOneClient() throws Exception {
        int threads = 16;
        int perThread = 50;
        var pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        var all = java.util.Collections.synchronizedList(new java.util.ArrayList<Long>());
        var futures = new java.util.ArrayList<java.util.concurrent.Future<?>>();
        String prefix = key("mt");
        for (int i = 0; i < threads; i++) {
            final int id = i;
            futures.add(pool.submit(() -> {
                long last = 0;
                for (int j = 0; j < perThread; j++) {
                    String k = prefix + ":" + id;
                    Long t = c.lease(k, 30_000);
                    assertNotNull(t);
                    assertTrue(t > last, "tokens grow for one caller");
                    last = t;
                    assertTrue(c.release(k, t));
                    all.add(t);
                }
            }));
        }
        for (var f : futures) {
            f.get(120, TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertEquals(threads * perThread, new java.util.HashSet<>(all).size(), "every token is unique");
    }
}
