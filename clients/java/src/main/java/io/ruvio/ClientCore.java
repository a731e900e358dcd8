package io.ruvio;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.function.Function;

/**
 * What the sync and async clients share: the options, one multiplexed connection for ordinary commands, a small pool
 * of dedicated connections (waiting forms, transactions), the timer thread and, with sentinels, the discovery.
 */
final class ClientCore {
    final ClientOptions options;
    final ScheduledExecutorService timer;
    /** Runs user callbacks (lock loss) so that a slow callback cannot delay timeouts and renewals. */
    final java.util.concurrent.ExecutorService callbacks;
    private final Object connectLock = new Object();
    private volatile Connection shared;
    private RuntimeException lastConnectFailure;
    private long lastConnectFailureNanos;
    private final Deque<Connection> idle = new ArrayDeque<>();
    private final SentinelDiscovery discovery;
    private volatile boolean closed;

    ClientCore(ClientOptions options) {
        this.options = options;
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
            Thread th = new Thread(r, "ruvio-timer");
            th.setDaemon(true);
            return th;
        });
        t.setRemoveOnCancelPolicy(true);
        this.timer = Executors.unconfigurableScheduledExecutorService(t);
        this.callbacks = Executors.newSingleThreadExecutor(r -> {
            Thread th = new Thread(r, "ruvio-callbacks");
            th.setDaemon(true);
            return th;
        });
        this.discovery = options.sentinels().isEmpty() ? null : new SentinelDiscovery(this);
    }

    long commandTimeoutMs() {
        return Math.max(1, options.commandTimeout().toMillis());
    }

    /** Opens a new connection to the primary (direct, or found through the sentinels). */
    Connection openConnection() {
        if (closed) {
            throw new RuvioConnectionException("the client is closed", null, false);
        }
        if (discovery != null) {
            return discovery.openPrimary();
        }
        return Connection.open(options.host(), options.port(), options, timer, false);
    }

    /** The shared multiplexed connection, opened (or reopened after a loss) on demand. */
    Connection shared() {
        Connection c = shared;
        if (c != null && c.isOpen()) {
            return c;
        }
        long waitingSince = System.nanoTime();
        synchronized (connectLock) {
            c = shared;
            if (c != null && c.isOpen()) {
                return c;
            }
            // Callers that queued behind an attempt that failed share its failure instead of each waiting a whole
            // connect timeout in turn (50 threads against a dead server must not wait 50 timeouts).
            RuntimeException failed = lastConnectFailure;
            if (failed != null && lastConnectFailureNanos - waitingSince > 0) {
                if (failed instanceof RuvioTimeoutException) {
                    throw new RuvioTimeoutException(failed.getMessage());
                }
                if (failed instanceof RuvioServerException se) {
                    throw new RuvioServerException(se.serverMessage());
                }
                throw new RuvioConnectionException(failed.getMessage(), failed, false);
            }
            try {
                c = openConnection();
            } catch (RuntimeException e) {
                lastConnectFailure = e;
                lastConnectFailureNanos = System.nanoTime();
                throw e;
            }
            shared = c;
            return c;
        }
    }

    /** Sends one command on the shared connection. */
    CompletableFuture<Object> send(Object... args) {
        Connection c;
        try {
            c = shared();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        return watchReadonly(c, c.send(commandTimeoutMs(), args));
    }

    /** Sends one command on the shared connection; the bulk strings of its reply as byte[]. */
    CompletableFuture<Object> sendBinary(Object... args) {
        Connection c;
        try {
            c = shared();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        return watchReadonly(c, c.sendBinary(commandTimeoutMs(), args));
    }

    /** Sends a batch (pipeline) on the shared connection in one write. */
    List<CompletableFuture<Object>> sendBatch(List<Object[]> commands) {
        return sendBatch(commands, null);
    }

    /** Sends a batch on the shared connection in one write; {@code binary[i]}: command i's bulk replies as byte[]. */
    List<CompletableFuture<Object>> sendBatch(List<Object[]> commands, boolean[] binary) {
        Connection c;
        try {
            c = shared();
        } catch (RuntimeException e) {
            return commands.stream().map(x -> CompletableFuture.<Object>failedFuture(e)).toList();
        }
        List<CompletableFuture<Object>> fs = c.sendBatch(commandTimeoutMs(), commands, binary);
        fs.forEach(f -> watchReadonly(c, f));
        return fs;
    }

    /** A -READONLY reply closes its connection (in Connection's reader) so the next command rediscovers. */
    CompletableFuture<Object> watchReadonly(Connection c, CompletableFuture<Object> f) {
        return f;
    }

    /**
     * Runs a command on a dedicated connection (for commands that block the connection, such as the WAIT forms),
     * returning it to the pool afterwards if still healthy.
     */
    CompletableFuture<Object> sendDedicated(long timeoutMs, Object... args) {
        Connection c;
        try {
            c = borrow();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        CompletableFuture<Object> f = watchReadonly(c, c.send(timeoutMs, args));
        return f.whenComplete((v, e) -> giveBack(c));
    }

    Connection borrow() {
        synchronized (idle) {
            while (!idle.isEmpty()) {
                Connection c = idle.pollFirst();
                if (c.isOpen()) {
                    return c;
                }
            }
        }
        return openConnection();
    }

    void giveBack(Connection c) {
        if (!c.isOpen()) {
            return;
        }
        synchronized (idle) {
            if (!closed && idle.size() < options.maxIdleConnections()) {
                idle.addFirst(c);
                return;
            }
        }
        c.close(new RuvioConnectionException("connection closed by the pool", null, false));
    }

    /** Closes every open connection (after a failover) so the next command reconnects. */
    void dropConnections(String why) {
        RuvioConnectionException e = new RuvioConnectionException(why, null, true);
        Connection c = shared;
        if (c != null) {
            c.close(e);
        }
        synchronized (idle) {
            idle.forEach(x -> x.close(e));
            idle.clear();
        }
    }

    /** Retries once on a new connection when the connection was lost (only for RENEW and RELEASE). */
    <T> CompletableFuture<T> retryOnConnectionLoss(java.util.function.Supplier<CompletableFuture<T>> op) {
        return op.get().handle((v, e) -> {
            if (e == null) {
                return CompletableFuture.completedFuture(v);
            }
            Throwable t = Futures.cause(e);
            if (t instanceof RuvioConnectionException && !closed) {
                return op.get();
            }
            return CompletableFuture.<T>failedFuture(t);
        }).thenCompose(Function.identity());
    }

    boolean isClosed() {
        return closed;
    }

    void close() {
        closed = true;
        dropConnections("the client is closed");
        if (discovery != null) {
            discovery.close();
        }
        timer.shutdownNow();
        callbacks.shutdown();
    }
}
