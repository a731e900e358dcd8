package io.ruvio;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * The asynchronous face of a {@link RuvioClient} (Lettuce style): the same commands, each returning a
 * {@link CompletableFuture}. Get it with {@link RuvioClient#async()}; it shares the client's connections, and closing
 * the client closes it.
 *
 * <p>Futures complete on the connection's reader thread (or the client's timer thread): do not block in dependent
 * stages; use the {@code ...Async} stage methods with your own executor for slow work. A method may block briefly
 * while a lost connection is being reopened (at most the connect timeout). A failed future holds the same
 * exceptions the sync client throws ({@link RuvioServerException}, {@link RuvioTimeoutException},
 * {@link RuvioConnectionException}).
 *
 * <p>Thread-safe.
 */
public final class RuvioAsyncClient {
    private final ClientCore core;

    RuvioAsyncClient(ClientCore core) {
        this.core = core;
    }

    /**
     * Sends any command and returns its reply in Java types (see {@link RuvioClient#command(Object...)}).
     *
     * @param args the command name and its arguments ({@link String}, {@code byte[]}, numbers)
     * @return the reply
     */
    public CompletableFuture<Object> command(Object... args) {
        return core.send(args);
    }

    /**
     * Sends any command and returns its reply binary-safe (see {@link RuvioClient#commandBytes(Object...)}): bulk
     * strings as {@code byte[]}.
     *
     * @param args the command name and its arguments ({@link String}, {@code byte[]}, numbers)
     * @return the reply, bulk strings as {@code byte[]}
     */
    public CompletableFuture<Object> commandBytes(Object... args) {
        return core.sendBinary(args);
    }

    /**
     * {@code PING}.
     *
     * @return {@code "PONG"}
     */
    public CompletableFuture<String> ping() {
        return core.send("PING").thenApply(String::valueOf);
    }

    /**
     * {@code GET key}.
     *
     * @param key the key
     * @return the value, or {@code null} when the key does not exist
     */
    public CompletableFuture<String> get(String key) {
        return core.send("GET", key).thenApply(v -> (String) v);
    }

    /**
     * {@code SET key value}.
     *
     * @param key the key
     * @param value the value
     * @return {@code "OK"}
     */
    public CompletableFuture<String> set(String key, String value) {
        return core.send("SET", key, value).thenApply(v -> (String) v);
    }

    /**
     * {@code DEL key [key ...]}.
     *
     * @param keys the keys
     * @return how many existed
     */
    public CompletableFuture<Long> del(String... keys) {
        Object[] args = new Object[keys.length + 1];
        args[0] = "DEL";
        System.arraycopy(keys, 0, args, 1, keys.length);
        return core.send(args).thenApply(v -> (Long) v);
    }

    /**
     * {@code PUBLISH channel message}.
     *
     * @param channel the channel
     * @param message the message
     * @return how many subscribers received it
     */
    public CompletableFuture<Long> publish(String channel, String message) {
        return core.send("PUBLISH", channel, message).thenApply(v -> (Long) v);
    }

    /**
     * {@code LEASE key ttl_ms}: takes the single-holder lock. Never retried automatically.
     *
     * @param key the lock's key
     * @param ttlMs the lease time in milliseconds (1 to 30 days)
     * @return the fencing token, or {@code null} when someone else holds the lock
     */
    public CompletableFuture<Long> lease(String key, long ttlMs) {
        return core.send("LEASE", key, ttlMs).thenApply(v -> (Long) v);
    }

    /**
     * {@code LEASE key ttl_ms WAIT timeout_ms}: waits in line for the lock. Runs on a dedicated connection so it does
     * not hold up other commands. Never retried automatically.
     *
     * @param key the lock's key
     * @param ttlMs the lease time in milliseconds
     * @param waitMs how long to wait; 0 waits without a limit
     * @return the fencing token, or {@code null} when the wait ended without a grant
     */
    public CompletableFuture<Long> lease(String key, long ttlMs, long waitMs) {
        return core.sendDedicated(waitTimeout(waitMs), "LEASE", key, ttlMs, "WAIT", waitMs).thenApply(v -> (Long) v);
    }

    /**
     * {@code SEMAPHORE key limit ttl_ms}: takes one of {@code limit} slots. Never retried automatically.
     *
     * @param key the semaphore's key
     * @param limit the number of slots
     * @param ttlMs this slot's TTL in milliseconds
     * @return the slot's fencing token, or {@code null} when all slots are taken
     */
    public CompletableFuture<Long> semaphore(String key, int limit, long ttlMs) {
        return core.send("SEMAPHORE", key, limit, ttlMs).thenApply(v -> (Long) v);
    }

    /**
     * {@code SEMAPHORE key limit ttl_ms WAIT timeout_ms}, on a dedicated connection. Never retried automatically.
     *
     * @param key the semaphore's key
     * @param limit the number of slots
     * @param ttlMs this slot's TTL in milliseconds
     * @param waitMs how long to wait; 0 waits without a limit
     * @return the slot's fencing token, or {@code null} when the wait ended without a grant
     */
    public CompletableFuture<Long> semaphore(String key, int limit, long ttlMs, long waitMs) {
        return core.sendDedicated(waitTimeout(waitMs), "SEMAPHORE", key, limit, ttlMs, "WAIT", waitMs)
                .thenApply(v -> (Long) v);
    }

    /**
     * {@code RENEW key token ttl_ms}: moves the holder's deadline to now + ttl. Retried once after a lost connection
     * (it carries the token, so this is safe).
     *
     * @param key the lock's key
     * @param token the holder's token
     * @param ttlMs the new TTL in milliseconds
     * @return {@code true} when renewed, {@code false} when the token does not hold the lock
     */
    public CompletableFuture<Boolean> renew(String key, long token, long ttlMs) {
        return core.retryOnConnectionLoss(() -> core.send("RENEW", key, token, ttlMs))
                .thenApply(v -> ((Long) v) == 1L);
    }

    /**
     * {@code RELEASE key token}: frees what the token holds. Retried once after a lost connection.
     *
     * @param key the lock's key
     * @param token the holder's token
     * @return {@code true} when released, {@code false} when the token no longer matches
     */
    public CompletableFuture<Boolean> release(String key, long token) {
        return core.retryOnConnectionLoss(() -> core.send("RELEASE", key, token))
                .thenApply(v -> ((Long) v) == 1L);
    }

    /**
     * {@code IFGT key token value}: the fenced write.
     *
     * @param key the key written
     * @param token the writer's fencing token
     * @param value the value
     * @return {@code true} when written, {@code false} when a higher token already wrote the key
     */
    public CompletableFuture<Boolean> ifGt(String key, long token, String value) {
        return core.send("IFGT", key, token, value).thenApply(v -> ((Long) v) == 1L);
    }

    /**
     * {@code IFGT key token value PX ms}: the fenced write with a TTL.
     *
     * @param key the key written
     * @param token the writer's fencing token
     * @param value the value
     * @param pxMs the value's TTL in milliseconds
     * @return {@code true} when written, {@code false} when a higher token already wrote the key
     */
    public CompletableFuture<Boolean> ifGt(String key, long token, String value, long pxMs) {
        return core.send("IFGT", key, token, value, "PX", pxMs).thenApply(v -> ((Long) v) == 1L);
    }

    /**
     * {@code LOCKINFO key}.
     *
     * @param key the lock's key
     * @return the description, or {@code null} when the key does not exist
     */
    public CompletableFuture<LockInfo> lockInfo(String key) {
        return core.send("LOCKINFO", key).thenApply(LockInfo::parse);
    }

    /**
     * The lock helper, waiting without a limit (see {@link RuvioClient#lock(String, Duration)}).
     *
     * @param name the lock's key
     * @param ttl the lease TTL (renewed at TTL/3)
     * @return the handle
     */
    public CompletableFuture<LockHandle> lock(String name, Duration ttl) {
        return LockHandle.acquire(this, core, name, ttl, LockOptions.defaults().waitForever());
    }

    /**
     * The lock helper without waiting (see {@link RuvioClient#tryLock(String, Duration)}).
     *
     * @param name the lock's key
     * @param ttl the lease TTL
     * @return the handle, or {@code null} when the lock is taken
     */
    public CompletableFuture<LockHandle> tryLock(String name, Duration ttl) {
        return LockHandle.acquire(this, core, name, ttl, LockOptions.defaults());
    }

    /**
     * The lock helper with options (see {@link RuvioClient#tryLock(String, Duration, LockOptions)}).
     *
     * @param name the lock's key
     * @param ttl the lease TTL
     * @param options waiting, hold cap, renewal, loss callback
     * @return the handle, or {@code null} when the lock was not granted
     */
    public CompletableFuture<LockHandle> tryLock(String name, Duration ttl, LockOptions options) {
        return LockHandle.acquire(this, core, name, ttl, options);
    }

    /**
     * The lock helper for one slot of a semaphore (see
     * {@link RuvioClient#trySemaphore(String, int, Duration, LockOptions)}).
     *
     * @param name the semaphore's key
     * @param limit the number of slots
     * @param ttl the slot's TTL
     * @param options waiting, hold cap, renewal, loss callback
     * @return the handle of the slot, or {@code null} when no slot was granted
     */
    public CompletableFuture<LockHandle> trySemaphore(String name, int limit, Duration ttl, LockOptions options) {
        if (limit < 1) {
            throw new IllegalArgumentException("limit must be at least 1");
        }
        return LockHandle.acquire(this, core, name, limit, ttl, options);
    }

    private long waitTimeout(long waitMs) {
        if (waitMs < 0) {
            return core.commandTimeoutMs(); // the server answers its error
        }
        return waitMs == 0 ? 0 : waitMs + core.commandTimeoutMs();
    }
}
