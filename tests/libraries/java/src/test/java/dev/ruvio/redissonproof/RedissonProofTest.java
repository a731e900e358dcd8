package dev.ruvio.redissonproof;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.Protocol;
import org.redisson.config.ReadMode;

/**
 * Redisson's normal lock flows, unchanged, against a real server: {@code $RUVIO_BIN} by default, Debian's
 * {@code redis-server} with {@code LIBRARY_TARGET=redis} (the same tests, so a pass proves compatibility rather than a
 * Ruvio-only path). Each test starts its own server on a free port with a fresh data folder.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class RedissonProofTest {
    /** Low on purpose: the watchdog test holds a lock past several of these. */
    static final long WATCHDOG_MS = 3_000;

    private TestServer server;
    private final List<RedissonClient> clients = new ArrayList<>();
    private final ExecutorService pool = Executors.newCachedThreadPool();

    static Config config(String address) {
        Config config = new Config();
        config.setLockWatchdogTimeout(WATCHDOG_MS);
        config.setThreads(2);
        config.setNettyThreads(4);
        config.useSingleServer()
                .setAddress(address)
                .setConnectionMinimumIdleSize(1)
                .setConnectionPoolSize(4)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(2)
                // Every second instead of every 30 s: the tests' connections, pub/sub ones included, get PINGed.
                .setPingConnectionInterval(1_000)
                .setTimeout(10_000)
                .setRetryAttempts(0);
        return config;
    }

    @BeforeEach
    void start() throws Exception {
        server = TestServer.start();
    }

    @AfterEach
    void stop() throws Exception {
        pool.shutdownNow();
        for (RedissonClient c : clients) {
            c.shutdown(0, 5, TimeUnit.SECONDS);
        }
        server.close();
    }

    /** A Redisson client of its own (its own connection pool and id), as a separate service would have. */
    RedissonClient client() {
        RedissonClient c = Redisson.create(config(server.address()));
        clients.add(c);
        return c;
    }

    static void waitFor(String what, long timeoutMs, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for: " + what);
            }
            Thread.sleep(25);
        }
    }

    /** A check through the raw connection that may throw IOException. */
    interface Check {
        boolean ok() throws Exception;
    }

    static BooleanSupplier unchecked(Check c) {
        return () -> {
            try {
                return c.ok();
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        };
    }

    @Test
    void lockUnlockIsReentrantAndOwnedByTheThread() throws Exception {
        RedissonClient redisson = client();
        RLock lock = redisson.getLock("j:basic");
        try (Resp raw = server.resp()) {
            lock.lock();
            assertTrue(lock.isLocked());
            assertTrue(lock.isHeldByCurrentThread());
            // Redisson's lock is a hash {"<client id>:<thread id>": hold count} with a TTL (the watchdog's).
            assertEquals("hash", raw.call("TYPE", "j:basic"));
            @SuppressWarnings("unchecked")
            List<Object> fields = (List<Object>) raw.call("HGETALL", "j:basic");
            assertEquals(2, fields.size(), "one holder field: " + fields);
            assertTrue(((String) fields.get(0)).endsWith(":" + Thread.currentThread().getId()), fields.toString());
            assertEquals("1", fields.get(1));
            long pttl = raw.integer("PTTL", "j:basic");
            assertTrue(pttl > 0 && pttl <= WATCHDOG_MS, "pttl " + pttl);

            lock.lock(); // re-entrant
            assertEquals(2, lock.getHoldCount());
            assertEquals("2", raw.call("HGET", "j:basic", fields.get(0)));

            // Another thread of the same client, and another client, cannot take it; nor unlock it.
            assertFalse(pool.submit(() -> lock.tryLock()).get());
            RLock other = client().getLock("j:basic");
            assertFalse(other.tryLock());
            assertThrows(IllegalMonitorStateException.class, other::unlock);

            lock.unlock();
            assertTrue(lock.isLocked(), "one unlock of two holds keeps it");
            assertEquals(1, lock.getHoldCount());
            lock.unlock();
            assertFalse(lock.isLocked());
            assertEquals(0, raw.integer("EXISTS", "j:basic"));
            assertThrows(IllegalMonitorStateException.class, lock::unlock);

            // Now free: the other client takes it at once, and forceUnlock clears it.
            assertTrue(other.tryLock());
            assertTrue(other.forceUnlock());
            assertEquals(0, raw.integer("EXISTS", "j:basic"));
        }
    }

    @Test
    void tryLockWithWaitAndLeaseTime() throws Exception {
        RedissonClient a = client();
        RedissonClient b = client();
        RLock held = a.getLock("j:lease");
        RLock wanted = b.getLock("j:lease");
        try (Resp raw = server.resp()) {
            assertTrue(held.tryLock(0, 60, TimeUnit.SECONDS));
            long pttl = raw.integer("PTTL", "j:lease");
            assertTrue(pttl > 50_000 && pttl <= 60_000, "lease time sets the TTL (no watchdog): " + pttl);
            assertTrue(held.remainTimeToLive() > 50_000);

            // Held: a bounded wait gives up and returns false.
            assertFalse(wanted.tryLock(300, 5_000, TimeUnit.MILLISECONDS));
            assertTrue(held.isLocked());

            held.unlock();
            assertTrue(wanted.tryLock(10, 2, TimeUnit.SECONDS));
            pttl = raw.integer("PTTL", "j:lease");
            assertTrue(pttl > 0 && pttl <= 2_000, "pttl " + pttl);

            // A lease time means no watchdog: the lock expires by itself and another client takes it.
            waitFor("the 2 s lease to expire", 30_000, unchecked(() -> raw.integer("EXISTS", "j:lease") == 0));
            assertFalse(wanted.isLocked());
            assertTrue(held.tryLock(0, 30, TimeUnit.SECONDS));
            assertThrows(IllegalMonitorStateException.class, wanted::unlock, "the expired holder cannot unlock");
            held.unlock();
        }
    }

    @Test
    void watchdogExtendsALockTakenWithoutLeaseTime() throws Exception {
        RedissonClient redisson = client();
        RLock lock = redisson.getLock("j:watchdog");
        try (Resp raw = server.resp()) {
            lock.lock();
            long start = System.nanoTime();
            long lastPttl = raw.integer("PTTL", "j:watchdog");
            assertTrue(lastPttl > 0 && lastPttl <= WATCHDOG_MS, "pttl " + lastPttl);
            int renewals = 0;
            // Hold it for three watchdog timeouts: without renewals it would have expired twice over.
            while (System.nanoTime() - start < TimeUnit.MILLISECONDS.toNanos(3 * WATCHDOG_MS)) {
                Thread.sleep(100);
                long pttl = raw.integer("PTTL", "j:watchdog");
                assertTrue(pttl > 0, "the watchdog let the lock expire (pttl " + pttl + ")");
                if (pttl > lastPttl) {
                    renewals++;
                }
                lastPttl = pttl;
            }
            assertTrue(renewals >= 2, "the watchdog renewed " + renewals + " times");
            assertEquals(1, raw.integer("EXISTS", "j:watchdog"));
            long pttl = raw.integer("PTTL", "j:watchdog");
            assertTrue(pttl > 0 && pttl <= WATCHDOG_MS, "pttl " + pttl);
            assertTrue(lock.isHeldByCurrentThread());
            assertFalse(client().getLock("j:watchdog").tryLock());
            lock.unlock();
            assertEquals(0, raw.integer("EXISTS", "j:watchdog"));
        }
    }

    @Test
    void unlockWakesAWaiterThroughPubSub() throws Exception {
        RedissonClient a = client();
        RedissonClient b = client();
        RLock held = a.getLock("j:wake");
        assertTrue(held.tryLock(0, 120, TimeUnit.SECONDS));
        long asked = System.nanoTime();
        // The waiter retries when the lock's TTL runs out (120 s) or when a message on the lock's channel says it was
        // released: it can only get the lock well before 120 s through the unlock's PUBLISH.
        Future<Boolean> waiter = pool.submit(() -> {
            RLock l = b.getLock("j:wake");
            boolean got = l.tryLock(100, 10, TimeUnit.SECONDS);
            if (got) {
                l.unlock();
            }
            return got;
        });
        try (Resp raw = server.resp()) {
            waitFor("the waiter to subscribe to the lock's channel", 30_000, unchecked(() -> {
                List<?> numsub = (List<?>) raw.call("PUBSUB", "NUMSUB", "redisson_lock__channel:{j:wake}");
                return (Long) numsub.get(1) >= 1;
            }));
        }
        assertFalse(waiter.isDone(), "the waiter must still be waiting while the lock is held");
        held.unlock();
        assertTrue(waiter.get(60, TimeUnit.SECONDS), "the waiter got the lock after the unlock");
        long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - asked);
        assertTrue(waitedMs < 100_000, "woken by the unlock, not by the 120 s TTL: " + waitedMs + " ms");
    }

    @Test
    void resp3ConnectionsLockWakeAndCountPermits() throws Exception {
        // Protocol.RESP3: Redisson says HELLO 3 on every connection and gets pub/sub messages as RESP3 pushes.
        Config config = config(server.address());
        config.setProtocol(Protocol.RESP3);
        RedissonClient a = Redisson.create(config);
        clients.add(a);
        RedissonClient b = Redisson.create(config);
        clients.add(b);
        RLock held = a.getLock("j:resp3");
        assertTrue(held.tryLock(0, 120, TimeUnit.SECONDS));
        assertTrue(held.isLocked());
        assertTrue(held.remainTimeToLive() > 100_000);
        Future<Boolean> waiter = pool.submit(() -> {
            RLock l = b.getLock("j:resp3");
            boolean got = l.tryLock(100, 10, TimeUnit.SECONDS);
            if (got) {
                l.unlock();
            }
            return got;
        });
        try (Resp raw = server.resp()) {
            waitFor("the waiter to subscribe to the lock's channel", 30_000, unchecked(() -> {
                List<?> numsub = (List<?>) raw.call("PUBSUB", "NUMSUB", "redisson_lock__channel:{j:resp3}");
                return (Long) numsub.get(1) >= 1;
            }));
        }
        held.unlock();
        assertTrue(waiter.get(60, TimeUnit.SECONDS));

        RFencedLock fenced = a.getFencedLock("j:resp3:fenced");
        Long first = fenced.lockAndGetToken();
        fenced.unlock();
        Long second = b.getFencedLock("j:resp3:fenced").lockAndGetToken();
        assertTrue(second > first, second + " after " + first);
        b.getFencedLock("j:resp3:fenced").unlock();

        RSemaphore sem = b.getSemaphore("j:resp3:sem");
        assertTrue(sem.trySetPermits(1));
        assertTrue(sem.tryAcquire());
        assertFalse(a.getSemaphore("j:resp3:sem").tryAcquire());
        sem.release();
        assertEquals(1, a.getSemaphore("j:resp3:sem").availablePermits());
    }

    @Test
    void connectsWithPasswordDatabaseAndClientName() throws Exception {
        // AUTH, SELECT and CLIENT SETNAME at connect time, on command and pub/sub connections.
        try (TestServer secured = TestServer.start(null, "s3cret"); Resp raw = secured.resp()) {
            Config config = config(secured.address());
            config.useSingleServer().setPassword("s3cret").setDatabase(3).setClientName("redisson-proof");
            RedissonClient a = Redisson.create(config);
            clients.add(a);
            RedissonClient b = Redisson.create(config);
            clients.add(b);
            RLock held = a.getLock("j:db3");
            assertTrue(held.tryLock(0, 120, TimeUnit.SECONDS));
            Future<Boolean> waiter = pool.submit(() -> {
                RLock l = b.getLock("j:db3");
                boolean got = l.tryLock(100, 10, TimeUnit.SECONDS);
                if (got) {
                    l.unlock();
                }
                return got;
            });
            raw.call("AUTH", "s3cret");
            waitFor("the waiter to subscribe", 30_000, unchecked(() -> {
                List<?> numsub = (List<?>) raw.call("PUBSUB", "NUMSUB", "redisson_lock__channel:{j:db3}");
                return (Long) numsub.get(1) >= 1;
            }));
            assertEquals(0, raw.integer("EXISTS", "j:db3"), "not in database 0");
            raw.call("SELECT", 3);
            assertEquals("hash", raw.call("TYPE", "j:db3"));
            String clients = (String) raw.call("CLIENT", "LIST");
            assertTrue(clients.contains("name=redisson-proof"), clients);
            assertTrue(clients.contains("db=3"), clients);
            held.unlock();
            assertTrue(waiter.get(60, TimeUnit.SECONDS));
        }
    }

    /**
     * Synced locks: on a server with an append-only log Redisson waits with WAITAOF, which answers once the write is
     * fsynced on the primary and the replica; a replica under `appendfsync everysec` (the default) fsyncs once a
     * second, which can pass Redisson's default slavesSyncTimeout (1 s). docs/migrating.md says to run such servers
     * with `appendfsync always` and to allow more than 1 s: so do the tests.
     */
    static void fsyncEveryWrite(TestServer... servers) throws Exception {
        for (TestServer s : servers) {
            try (Resp r = s.resp()) {
                assertEquals("OK", r.call("CONFIG", "SET", "appendfsync", "always"));
            }
        }
    }

    @Test
    void syncedLocksWaitForTheReplica() throws Exception {
        // With a primary/replica configuration (not single-server), Redisson runs each lock script followed by WAIT
        // (or WAITAOF when INFO says aof_enabled:1) and, with checkLockSyncedSlaves (the default), refuses a lock
        // that no replica acknowledged in slavesSyncTimeout.
        try (TestServer replica = TestServer.start(server.port); Resp raw = replica.resp()) {
            waitFor("the replica to be in sync", 60_000, unchecked(() -> {
                String info = (String) raw.call("INFO", "replication");
                return info.contains("master_link_status:up");
            }));
            try (Resp primary = server.resp()) {
                waitFor("the primary to count its replica", 60_000, unchecked(() ->
                        ((String) primary.call("INFO", "replication")).contains("connected_slaves:1")));
            }
            Config config = new Config();
            config.setLockWatchdogTimeout(WATCHDOG_MS);
            config.setThreads(2);
            config.setNettyThreads(4);
            fsyncEveryWrite(server, replica);
            config.setSlavesSyncTimeout(5_000);
            config.useMasterSlaveServers()
                    .setMasterAddress(server.address())
                    .addSlaveAddress(replica.address())
                    .setReadMode(ReadMode.MASTER)
                    .setMasterConnectionMinimumIdleSize(1)
                    .setSlaveConnectionMinimumIdleSize(1)
                    .setSubscriptionConnectionMinimumIdleSize(1)
                    .setTimeout(10_000)
                    .setRetryAttempts(0);
            RedissonClient redisson = Redisson.create(config);
            clients.add(redisson);

            RLock lock = redisson.getLock("j:synced");
            assertTrue(lock.tryLock(5, 30, TimeUnit.SECONDS));
            try (Resp primary = server.resp()) {
                // The lock script's connection ended with WAITAOF when the server says aof_enabled:1 (Ruvio always
                // logs its writes), with WAIT otherwise (redis-server here runs without AOF).
                String persistence = (String) primary.call("INFO", "persistence");
                String expected = persistence.contains("aof_enabled:1") ? "cmd=waitaof " : "cmd=wait ";
                String clientList = (String) primary.call("CLIENT", "LIST");
                assertTrue(clientList.contains(expected), expected + "in\n" + clientList);
            }
            // Acknowledged by the replica: it holds the lock hash already.
            @SuppressWarnings("unchecked")
            List<Object> fields = (List<Object>) raw.call("HGETALL", "j:synced");
            assertEquals(2, fields.size(), "the replica has the lock: " + fields);
            lock.unlock();
            RFencedLock fenced = redisson.getFencedLock("j:synced:fenced");
            Long token = fenced.lockAndGetToken();
            assertNotNull(token);
            assertEquals(String.valueOf(token), raw.call("GET", "redisson_lock_token:{j:synced:fenced}"));
            fenced.unlock();

            // The replica stops answering: the next lock's WAIT/WAITAOF counts no replica, and Redisson refuses it.
            replica.pause(true);
            try {
                RLock second = redisson.getLock("j:synced:2");
                Exception refused = assertThrows(Exception.class, () -> second.tryLock(5, 30, TimeUnit.SECONDS));
                assertTrue(String.valueOf(refused.getMessage()).contains("None of slaves were synced")
                        || refused.getClass().getSimpleName().equals("NoSyncedSlavesException")
                        || refused.getCause() != null && refused.getCause().getClass().getSimpleName()
                                .equals("NoSyncedSlavesException"), refused.toString());
            } finally {
                replica.pause(false);
            }
        }
    }

    @Test
    void sentinelConfigurationFindsThePrimary() throws Exception {
        // Redisson's Sentinel mode: it asks the sentinel for the primary, its replicas and the other sentinels, and
        // subscribes to the sentinel's events. redis-sentinel for redis-server, `ruvio coordinator` for ruvio.
        try (TestServer replica = TestServer.start(server.port); Resp raw = replica.resp();
             TestServer sentinel = TestServer.startSentinel(server.port); Resp s = sentinel.resp()) {
            waitFor("the sentinel to know the replica", 60_000, unchecked(() ->
                    ((List<?>) s.call("SENTINEL", "REPLICAS", "mymaster")).size() == 1
                            && ((String) raw.call("INFO", "replication")).contains("master_link_status:up")));
            fsyncEveryWrite(server, replica);
            Config config = new Config();
            config.setLockWatchdogTimeout(WATCHDOG_MS);
            config.setThreads(2);
            config.setNettyThreads(4);
            config.setSlavesSyncTimeout(5_000);
            config.useSentinelServers()
                    .addSentinelAddress(sentinel.address())
                    .setMasterName("mymaster")
                    .setCheckSentinelsList(false) // one sentinel: Redisson wants two unless told otherwise
                    .setReadMode(ReadMode.MASTER)
                    .setMasterConnectionMinimumIdleSize(1)
                    .setSlaveConnectionMinimumIdleSize(1)
                    .setSubscriptionConnectionMinimumIdleSize(1)
                    .setTimeout(10_000)
                    .setRetryAttempts(0);
            RedissonClient redisson = Redisson.create(config);
            clients.add(redisson);
            RLock lock = redisson.getLock("j:sentinel");
            assertTrue(lock.tryLock(5, 30, TimeUnit.SECONDS));
            try (Resp primary = server.resp()) {
                assertEquals("hash", primary.call("TYPE", "j:sentinel"), "the lock went to the primary");
            }
            waitFor("the replica to have the lock", 30_000, unchecked(() -> raw.integer("EXISTS", "j:sentinel") == 1));
            lock.unlock();
            RFencedLock fenced = redisson.getFencedLock("j:sentinel:fenced");
            Long token = fenced.lockAndGetToken();
            assertNotNull(token);
            fenced.unlock();

            // A failover: the sentinel promotes the replica and publishes +switch-master; Redisson follows it.
            // (redis-sentinel kills the promoted node's normal connections: the checks below open new ones.)
            assertEquals("OK", s.call("SENTINEL", "FAILOVER", "mymaster"));
            String newPort = String.valueOf(replica.port);
            waitFor("the sentinel to name the replica as primary", 60_000, unchecked(() ->
                    newPort.equals(((List<?>) s.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")).get(1))));
            RBucket<String> probe = redisson.getBucket("j:sentinel:probe", StringCodec.INSTANCE);
            waitFor("Redisson to write to the new primary", 60_000, unchecked(() -> {
                try {
                    probe.set(newPort);
                } catch (RuntimeException notYet) {
                    return false;
                }
                try (Resp promoted = replica.resp()) {
                    return newPort.equals(promoted.call("GET", "j:sentinel:probe"));
                }
            }));
            // Synced locks need the old primary re-pointed at the new one and in sync first.
            waitFor("the old primary to replicate from the new one", 60_000, unchecked(() -> {
                try (Resp old = server.resp(); Resp promoted = replica.resp()) {
                    return ((String) old.call("INFO", "replication")).contains("master_link_status:up")
                            && ((String) promoted.call("INFO", "replication")).contains("connected_slaves:1");
                }
            }));
            RLock after = redisson.getLock("j:sentinel:after");
            assertTrue(after.tryLock(5, 30, TimeUnit.SECONDS));
            try (Resp promoted = replica.resp()) {
                assertEquals("hash", promoted.call("TYPE", "j:sentinel:after"), "the lock went to the new primary");
            }
            after.unlock();
            Long next = fenced.lockAndGetToken();
            assertTrue(next > token, "the token counter moved with the data: " + next + " after " + token);
            fenced.unlock();
        }
    }

    @Test
    void readWriteLockSpinLockAndCountDownLatch() throws Exception {
        RedissonClient a = client();
        RedissonClient b = client();
        RReadWriteLock rwA = a.getReadWriteLock("j:rw");
        RReadWriteLock rwB = b.getReadWriteLock("j:rw");
        rwA.readLock().lock();
        assertTrue(rwB.readLock().tryLock(1, 10, TimeUnit.SECONDS), "readers share");
        assertFalse(rwB.writeLock().tryLock(200, 10_000, TimeUnit.MILLISECONDS), "a writer waits for readers");
        rwB.readLock().unlock();
        rwA.readLock().unlock();
        assertTrue(rwB.writeLock().tryLock(5, 10, TimeUnit.SECONDS));
        assertFalse(rwA.readLock().tryLock(200, 10_000, TimeUnit.MILLISECONDS), "readers wait for the writer");
        rwB.writeLock().unlock();
        assertTrue(rwA.readLock().tryLock(5, 10, TimeUnit.SECONDS));
        rwA.readLock().unlock();

        RLock spin = a.getSpinLock("j:spin");
        assertTrue(spin.tryLock(1, 10, TimeUnit.SECONDS));
        assertFalse(b.getSpinLock("j:spin").tryLock(200, 10_000, TimeUnit.MILLISECONDS));
        spin.unlock();
        assertTrue(b.getSpinLock("j:spin").tryLock(5, 10, TimeUnit.SECONDS));
        b.getSpinLock("j:spin").unlock();

        RCountDownLatch latch = a.getCountDownLatch("j:latch");
        assertTrue(latch.trySetCount(2));
        Future<Boolean> awaiting = pool.submit(() -> b.getCountDownLatch("j:latch").await(60, TimeUnit.SECONDS));
        latch.countDown();
        assertEquals(1, b.getCountDownLatch("j:latch").getCount());
        assertFalse(awaiting.isDone());
        b.getCountDownLatch("j:latch").countDown();
        assertTrue(awaiting.get(60, TimeUnit.SECONDS), "countDown to 0 wakes the waiter (pub/sub)");
    }

    @Test
    void fencedLockReturnsIncreasingTokens() throws Exception {
        RedissonClient a = client();
        RedissonClient b = client();
        RFencedLock lockA = a.getFencedLock("j:fenced");
        RFencedLock lockB = b.getFencedLock("j:fenced");
        long previous = Long.MIN_VALUE;
        for (int i = 0; i < 5; i++) {
            RFencedLock l = i % 2 == 0 ? lockA : lockB;
            Long token = l.lockAndGetToken();
            assertNotNull(token);
            assertTrue(token > previous, "token " + token + " after " + previous);
            assertEquals(token, l.getToken());
            previous = token;
            // (The no-argument tryLockAndGetToken() waits for the lock in Redisson 3.52.0, on redis-server too: use a
            // bounded wait.)
            assertNull((i % 2 == 0 ? lockB : lockA).tryLockAndGetToken(200, TimeUnit.MILLISECONDS),
                    "held: the other gets no token");
            l.unlock();
        }
        Long withLease = lockB.tryLockAndGetToken(5, 10, TimeUnit.SECONDS);
        assertNotNull(withLease);
        assertTrue(withLease > previous);
        try (Resp raw = server.resp()) {
            long pttl = raw.integer("PTTL", "j:fenced");
            assertTrue(pttl > 0 && pttl <= 10_000, "pttl " + pttl);
        }
        lockB.unlock();
    }

    @Test
    void semaphorePermits() throws Exception {
        RedissonClient a = client();
        RedissonClient b = client();
        RSemaphore sem = a.getSemaphore("j:sem");
        RSemaphore other = b.getSemaphore("j:sem");
        assertTrue(sem.trySetPermits(2));
        assertFalse(other.trySetPermits(5), "already set");
        assertEquals(2, other.availablePermits());

        sem.acquire();
        assertTrue(other.tryAcquire());
        assertEquals(0, sem.availablePermits());
        assertFalse(sem.tryAcquire());
        assertFalse(other.tryAcquire(200, TimeUnit.MILLISECONDS));

        sem.release();
        assertEquals(1, other.availablePermits());
        assertTrue(other.tryAcquire(5, TimeUnit.SECONDS));
        assertFalse(sem.tryAcquire(2));

        // A blocked acquire() is woken by release() (Redisson publishes on the semaphore's channel).
        CompletableFuture<Void> blocked = CompletableFuture.runAsync(() -> {
            try {
                other.acquire();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }, pool);
        try (Resp raw = server.resp()) {
            waitFor("the blocked acquire to subscribe", 30_000, unchecked(() -> {
                List<?> numsub = (List<?>) raw.call("PUBSUB", "NUMSUB", "redisson_sc:{j:sem}");
                return (Long) numsub.get(1) >= 1;
            }));
            assertFalse(blocked.isDone());
            sem.release();
            blocked.get(60, TimeUnit.SECONDS);
            assertEquals("0", raw.call("GET", "j:sem"));
        }
        sem.release(2);
        assertEquals(2, sem.availablePermits());
        assertTrue(sem.tryAcquire(2, 1, TimeUnit.SECONDS));
        assertEquals(0, other.availablePermits());
    }

    @Test
    void twoProcessesContendingNeverOverlap() throws Exception {
        int rounds = 30;
        Path record = Files.createTempFile("ruvio-redisson-contend-", ".log");
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<Process> procs = new ArrayList<>();
        try {
            for (int id = 0; id < 2; id++) {
                procs.add(new ProcessBuilder(java, "-cp", classpath, Contender.class.getName(),
                        server.address(), String.valueOf(rounds), "p" + id)
                        .redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.appendTo(record.toFile()))
                        .start());
            }
            for (Process p : procs) {
                assertTrue(p.waitFor(120, TimeUnit.SECONDS), "a contender did not finish");
            }
            String output = Files.readString(record);
            for (Process p : procs) {
                assertEquals(0, p.exitValue(), "a contender failed:\n" + output);
            }
            assertTrue(output.contains("p0 done " + rounds) && output.contains("p1 done " + rounds), output);
            try (Resp raw = server.resp()) {
                assertEquals(String.valueOf(2 * rounds), raw.call("GET", "j:count"),
                        "lost updates: the lock did not exclude\n" + output);
                // The record: field n = the process that moved the counter from n-1 to n. Every n is there once,
                // each process has its rounds, and they alternated at least twice (they really contended).
                assertEquals(2L * rounds, raw.integer("HLEN", "j:record"));
                String last = null;
                int switches = 0;
                int p0 = 0;
                for (int n = 1; n <= 2 * rounds; n++) {
                    String who = (String) raw.call("HGET", "j:record", n);
                    assertNotNull(who, "no record for round " + n);
                    if (who.equals("p0")) {
                        p0++;
                    }
                    if (last != null && !last.equals(who)) {
                        switches++;
                    }
                    last = who;
                }
                assertEquals(rounds, p0);
                assertTrue(switches >= 2, "the processes did not alternate (" + switches + " switches)");
                assertEquals(0, raw.integer("EXISTS", "j:contended"));
            }
        } finally {
            for (Process p : procs) {
                p.destroyForcibly();
            }
            new File(record.toString()).delete();
        }
    }
}
