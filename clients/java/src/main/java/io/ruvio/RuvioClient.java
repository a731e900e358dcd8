package io.ruvio;

import java.time.Duration;

/**
 * The Ruvio client: fencing-token locks ({@code LEASE}, {@code RENEW}, {@code RELEASE}, {@code SEMAPHORE},
 * {@code IFGT}, {@code LOCKINFO}), the lock helper, and any other Redis-protocol command.
 *
 * <pre>{@code
 * var c = RuvioClient.connect("127.0.0.1", 6379);
 *
 * Long token = c.lease("job:nightly-report", 30_000);
 * // token -> you hold it
 * // null -> someone else holds it
 * if (token != null) {
 *     Boolean released = c.release("job:nightly-report", token);
 *     // true -> released (false if the token no longer matches)
 * }
 * }</pre>
 *
 * <p><b>Threads.</b> One client is meant to be shared by every thread of an application. Ordinary commands are
 * multiplexed on one connection (requests from all threads are written in turn and answered in order, so many threads
 * keep that one connection busy, as Lettuce does). Commands that block a connection (the {@code WAIT} forms of
 * {@code LEASE}/{@code SEMAPHORE}, the lock helper's waits) and connection state ({@link #dedicated()} for WATCH and
 * MULTI/EXEC, {@link #subscribe}) use dedicated connections; up to
 * {@link ClientOptions#maxIdleConnections()} idle ones are kept for reuse.
 *
 * <p><b>Errors.</b> Every method throws only unchecked exceptions: {@link RuvioServerException} (an error reply,
 * with its {@link RuvioServerException#code() code}), {@link RuvioTimeoutException} (no reply within the command
 * timeout: the command's fate is unknown) and {@link RuvioConnectionException} (could not connect, or the connection
 * was lost). A lost connection is reopened by the next command (a restarted server is reconnected to).
 *
 * <p><b>Retries.</b> Nothing is retried automatically after an ambiguous failure, except {@code RENEW} and
 * {@code RELEASE}, which carry the token and are retried once after a lost connection. {@code LEASE} and
 * {@code SEMAPHORE} are never retried: the grant may have happened and its token would be lost.
 */
public final class RuvioClient implements AutoCloseable {
    private final ClientCore core;
    private final RuvioAsyncClient async;

    private RuvioClient(ClientOptions options) {
        this.core = new ClientCore(options);
        this.async = new RuvioAsyncClient(core);
        try {
            core.shared();
        } catch (RuntimeException e) {
            core.close();
            throw e;
        }
    }

    /**
     * Connects to a server (RESP3, falling back to RESP2; 5 s connect and command timeouts).
     *
     * @param host the host
     * @param port the port
     * @return the client, connected
     * @throws RuvioConnectionException or {@link RuvioTimeoutException} when the server cannot be reached
     */
    public static RuvioClient connect(String host, int port) {
        return new RuvioClient(ClientOptions.builder().host(host).port(port).build());
    }

    /**
     * Connects with a {@code redis://} or {@code rediss://} URI (see {@link ClientOptions#fromUri(String)}).
     *
     * @param uri the URI, e.g. {@code redis://:secret@127.0.0.1:6379/2}
     * @return the client, connected
     */
    public static RuvioClient connect(String uri) {
        return new RuvioClient(ClientOptions.fromUri(uri));
    }

    /**
     * Connects with options.
     *
     * @param options the options
     * @return the client, connected
     */
    public static RuvioClient connect(ClientOptions options) {
        return new RuvioClient(options);
    }

    /**
     * The asynchronous API over the same connections.
     *
     * @return the async client
     */
    public RuvioAsyncClient async() {
        return async;
    }

    /**
     * Sends any command and returns the reply in Java types: simple, bulk and verbatim strings as {@link String}
     * (UTF-8), integers as {@link Long}, nil as {@code null}, arrays as {@link java.util.List}, RESP3 maps as
     * {@link java.util.LinkedHashMap}, sets as {@link java.util.LinkedHashSet}, doubles as {@link Double}, booleans as
     * {@link Boolean}, big numbers as {@link java.math.BigInteger}. An error nested in an array (EXEC) is a
     * {@link RuvioServerException} value. For values that are not UTF-8 text use {@link #commandBytes(Object...)}.
     *
     * @param args the command name and its arguments ({@link String}, {@code byte[]}, numbers)
     * @return the reply
     * @throws RuvioServerException when the server answers an error
     */
    public Object command(Object... args) {
        return Futures.await(async.command(args));
    }

    /**
     * Sends any command and returns the reply binary-safe, as Jedis's {@code byte[]} methods and Lettuce's
     * {@code ByteArrayCodec} do. Bulk and verbatim strings come back as {@code byte[]} (binary-safe: every byte as
     * sent, never decoded), also inside arrays, sets and maps (where map keys are then {@code byte[]}, compared by
     * identity: iterate rather than look up). Everything else as in {@link RuvioClient#command(Object...)}: simple
     * strings such as {@code "OK"} stay {@link String}, integers {@link Long}, nil {@code null}.
     *
     * <pre>{@code
     * byte[] value = {0, (byte) 0xff, (byte) 0xc3};           // not UTF-8
     * c.command("SET", "k", value);
     * byte[] back = (byte[]) c.commandBytes("GET", "k");     // the same three bytes
     * }</pre>
     *
     * @param args the command name and its arguments ({@link String}, {@code byte[]}, numbers)
     * @return the reply, bulk strings as {@code byte[]}
     * @throws RuvioServerException when the server answers an error
     */
    public Object commandBytes(Object... args) {
        return Futures.await(async.commandBytes(args));
    }

    /**
     * {@code GET key}, binary-safe.
     *
     * @param key the key ({@link String} or {@code byte[]})
     * @return the value's bytes, or {@code null} when the key does not exist
     */
    public byte[] getBytes(Object key) {
        return (byte[]) commandBytes("GET", key);
    }

    /**
     * {@code PING}.
     *
     * @return {@code "PONG"}
     */
    public String ping() {
        return Futures.await(async.ping());
    }

    /**
     * {@code GET key}.
     *
     * @param key the key
     * @return the value, or {@code null}
     */
    public String get(String key) {
        return Futures.await(async.get(key));
    }

    /**
     * {@code SET key value}.
     *
     * @param key the key
     * @param value the value
     * @return {@code "OK"}
     */
    public String set(String key, String value) {
        return Futures.await(async.set(key, value));
    }

    /**
     * {@code DEL key [key ...]}.
     *
     * @param keys the keys
     * @return how many existed
     */
    public long del(String... keys) {
        return Futures.await(async.del(keys));
    }

    /**
     * {@code PUBLISH channel message}.
     *
     * @param channel the channel
     * @param message the message
     * @return how many subscribers received it
     */
    public long publish(String channel, String message) {
        return Futures.await(async.publish(channel, message));
    }

    /**
     * {@code LEASE key ttl_ms}: takes the single-holder lock. Never retried automatically.
     *
     * @param key the lock's key
     * @param ttlMs the lease time in milliseconds (1 to 30 days)
     * @return the fencing token (you hold the lock), or {@code null} (someone else holds it)
     */
    public Long lease(String key, long ttlMs) {
        return Futures.await(async.lease(key, ttlMs));
    }

    /**
     * {@code LEASE key ttl_ms WAIT timeout_ms}: waits in line (arrival order) for the lock, on a dedicated
     * connection. Never retried automatically.
     *
     * @param key the lock's key
     * @param ttlMs the lease time in milliseconds
     * @param waitMs how long to wait; 0 waits without a limit
     * @return the fencing token, or {@code null} when the wait ended without a grant
     */
    public Long lease(String key, long ttlMs, long waitMs) {
        return Futures.await(async.lease(key, ttlMs, waitMs));
    }

    /**
     * {@code SEMAPHORE key limit ttl_ms}: takes one of {@code limit} slots. Never retried automatically.
     *
     * @param key the semaphore's key
     * @param limit the number of slots (fixed while the semaphore has holders)
     * @param ttlMs this slot's TTL in milliseconds
     * @return the slot's fencing token, or {@code null} when all slots are taken
     */
    public Long semaphore(String key, int limit, long ttlMs) {
        return Futures.await(async.semaphore(key, limit, ttlMs));
    }

    /**
     * {@code SEMAPHORE key limit ttl_ms WAIT timeout_ms}, on a dedicated connection.
     *
     * @param key the semaphore's key
     * @param limit the number of slots
     * @param ttlMs this slot's TTL in milliseconds
     * @param waitMs how long to wait; 0 waits without a limit
     * @return the slot's fencing token, or {@code null} when the wait ended without a grant
     */
    public Long semaphore(String key, int limit, long ttlMs, long waitMs) {
        return Futures.await(async.semaphore(key, limit, ttlMs, waitMs));
    }

    /**
     * {@code RENEW key token ttl_ms}: moves the holder's deadline to now + ttl; never revives an expired lock.
     * Retried once after a lost connection.
     *
     * @param key the lock's key
     * @param token the holder's token
     * @param ttlMs the new TTL in milliseconds
     * @return {@code true} when renewed, {@code false} when the token does not hold the lock
     */
    public boolean renew(String key, long token, long ttlMs) {
        return Futures.await(async.renew(key, token, ttlMs));
    }

    /**
     * {@code RELEASE key token}: frees the lease or the token's semaphore slot. Retried once after a lost connection.
     *
     * @param key the lock's key
     * @param token the holder's token
     * @return {@code true} when released, {@code false} when the token no longer matches (nothing changed)
     */
    public boolean release(String key, long token) {
        return Futures.await(async.release(key, token));
    }

    /**
     * {@code IFGT key token value}: the fenced write; refuses a token lower than one that already wrote the key.
     *
     * @param key the key written
     * @param token the writer's fencing token
     * @param value the value
     * @return {@code true} when written, {@code false} when a higher token already wrote the key
     */
    public boolean ifGt(String key, long token, String value) {
        return Futures.await(async.ifGt(key, token, value));
    }

    /**
     * {@code IFGT key token value PX ms}.
     *
     * @param key the key written
     * @param token the writer's fencing token
     * @param value the value
     * @param pxMs the value's TTL in milliseconds
     * @return {@code true} when written, {@code false} when a higher token already wrote the key
     */
    public boolean ifGt(String key, long token, String value, long pxMs) {
        return Futures.await(async.ifGt(key, token, value, pxMs));
    }

    /**
     * {@code LOCKINFO key}: the lock's kind, limit, holders and waiters.
     *
     * @param key the lock's key
     * @return the description, or {@code null} when the key does not exist
     */
    public LockInfo lockInfo(String key) {
        return Futures.await(async.lockInfo(key));
    }

    /**
     * The lock helper: waits (without a limit, in arrival order) for the lock and returns a handle that renews it at
     * TTL/3 and signals loss. Use it with try-with-resources; see {@link LockHandle}.
     *
     * @param name the lock's key
     * @param ttl the lease TTL
     * @return the handle (never {@code null})
     */
    public LockHandle lock(String name, Duration ttl) {
        return Futures.await(async.lock(name, ttl));
    }

    /**
     * The lock helper without waiting.
     *
     * @param name the lock's key
     * @param ttl the lease TTL
     * @return the handle, or {@code null} when someone else holds the lock
     */
    public LockHandle tryLock(String name, Duration ttl) {
        return Futures.await(async.tryLock(name, ttl));
    }

    /**
     * The lock helper, waiting up to {@code wait}.
     *
     * @param name the lock's key
     * @param ttl the lease TTL
     * @param wait how long to wait for the lock
     * @return the handle, or {@code null} when the wait ended without a grant
     */
    public LockHandle tryLock(String name, Duration ttl, Duration wait) {
        return Futures.await(async.tryLock(name, ttl, LockOptions.defaults().waitFor(wait)));
    }

    /**
     * The lock helper with options (waiting, cap on the hold time, renewal, loss callback).
     *
     * @param name the lock's key
     * @param ttl the lease TTL
     * @param options the options
     * @return the handle, or {@code null} when the lock was not granted
     */
    public LockHandle tryLock(String name, Duration ttl, LockOptions options) {
        return Futures.await(async.tryLock(name, ttl, options));
    }

    /**
     * The lock helper for one slot of a semaphore: takes a slot ({@code SEMAPHORE key limit ttl}, waiting as the
     * options say) and returns a handle that renews that slot at TTL/3, signals its loss and releases it on
     * {@link LockHandle#close()}, exactly as for a lease.
     *
     * @param name the semaphore's key
     * @param limit the number of slots
     * @param ttl the slot's TTL
     * @param options waiting, hold cap, renewal, loss callback
     * @return the handle of the slot, or {@code null} when no slot was granted
     */
    public LockHandle trySemaphore(String name, int limit, Duration ttl, LockOptions options) {
        return Futures.await(async.trySemaphore(name, limit, ttl, options));
    }

    /**
     * A new pipeline on the shared connection.
     *
     * @return the pipeline
     */
    public Pipeline pipeline() {
        return new Pipeline(core);
    }

    /**
     * A transaction without WATCH, run on a pooled connection when {@link Transaction#exec()} is called.
     *
     * @return the transaction
     */
    public Transaction multi() {
        return new Transaction(new RuvioConnection(core), true);
    }

    /**
     * A connection for the caller alone (WATCH + MULTI/EXEC, connection state). Close it to give it back.
     *
     * @return the connection
     */
    public RuvioConnection dedicated() {
        return new RuvioConnection(core);
    }

    /**
     * Opens a subscription on its own connection and subscribes to channels.
     *
     * @param listener receives the messages
     * @param channels the channels (may be empty; subscribe later)
     * @return the subscription
     */
    public Subscription subscribe(MessageListener listener, String... channels) {
        Subscription s = new Subscription(core, listener);
        if (channels.length > 0) {
            try {
                s.subscribe(channels);
            } catch (RuntimeException e) {
                s.close();
                throw e;
            }
        }
        return s;
    }

    /**
     * Opens a subscription on its own connection and subscribes to patterns.
     *
     * @param listener receives the messages
     * @param patterns the patterns
     * @return the subscription
     */
    public Subscription psubscribe(MessageListener listener, String... patterns) {
        Subscription s = new Subscription(core, listener);
        try {
            s.psubscribe(patterns);
        } catch (RuntimeException e) {
            s.close();
            throw e;
        }
        return s;
    }

    /**
     * The RESP version of the shared connection: 3, or 2 when the server refused HELLO 3 or RESP2 was asked for.
     *
     * @return 2 or 3
     */
    public int protocol() {
        return core.shared().protocol();
    }

    /** Closes every connection; in-flight commands fail with {@link RuvioConnectionException}. */
    @Override
    public void close() {
        core.close();
    }
}
