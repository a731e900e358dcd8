package io.ruvio;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A held lock: its fencing token, a watchdog that renews it, a loss signal, and release on {@link #close()}, for
 * try-with-resources:
 *
 * <pre>{@code
 * try (var held = c.lock("job:nightly-report", Duration.ofSeconds(30))) {
 *     writeReport(held.token());          // pass the token to the write you protect (IFGT, a fence column, ...)
 *     if (held.lost().isDone()) return;   // or: held.lost().thenRun(worker::cancel)
 * }                                       // RELEASE here
 * }</pre>
 *
 * <p><b>Renewal.</b> Unless turned off, a watchdog sends {@code RENEW key token ttl} every TTL/3 (Redisson's
 * rhythm). A failed renewal (timeout, lost connection) is retried every TTL/10; RENEW carries the token, so retrying
 * is safe. A renewal never revives an expired lock: the server answers 0 and the handle reports loss.
 *
 * <p><b>Loss.</b> The handle keeps, on the client's monotonic clock ({@link System#nanoTime()}), the earliest time at
 * which the server-side deadline can pass: the send time of the last successful LEASE or RENEW plus its TTL. When no
 * renewal has succeeded by that time minus a margin of TTL/5, it reports loss
 * ({@link LockLossReason#DEADLINE_PASSED}) before the server frees the lock, even if the server cannot be reached.
 * Loss runs the {@link LockOptions#onLost} callback, then completes {@link #lost()}, once.
 *
 * <p><b>Release.</b> {@link #release()} and {@link #close()} stop the watchdog and send {@code RELEASE} (retried once
 * if the connection was lost). After a loss, release never throws: it answers {@code false} (or {@code true} in the
 * rare case where the server still had the lease, e.g. a renewal that succeeded after the local deadline), and
 * {@code false} when the server cannot be reached. A lock that is released is not "lost": {@link #lost()} then never
 * completes.
 *
 * <p>Thread-safe.
 */
public final class LockHandle implements AutoCloseable {
    private final RuvioAsyncClient client;
    private final ClientCore core;
    private final String name;
    private final long token;
    private final long ttlMs;
    private final long marginNanos;
    private final long capDeadline;
    private final boolean hasCap;
    private final boolean autoRenew;
    private final Consumer<LockHandle> onLost;
    private final CompletableFuture<Void> lost = new CompletableFuture<>();
    private volatile LockLossReason lossReason;
    private volatile long lostAtNanos;
    private long confirmedUntil;
    private boolean done;
    private boolean released;
    private boolean capReached;
    private ScheduledFuture<?> renewTask;
    private ScheduledFuture<?> lossTask;

    private LockHandle(RuvioAsyncClient client, ClientCore core, String name, long token, long ttlMs,
                       long sentAt, LockOptions o) {
        this.client = client;
        this.core = core;
        this.name = name;
        this.token = token;
        this.ttlMs = ttlMs;
        this.marginNanos = TimeUnit.MILLISECONDS.toNanos(Math.max(1, ttlMs / 5));
        this.hasCap = o.maxHold != null;
        this.capDeadline = hasCap ? sentAt + o.maxHold.toNanos() : Long.MAX_VALUE;
        this.autoRenew = o.autoRenew;
        this.onLost = o.onLost;
        this.confirmedUntil = sentAt + TimeUnit.MILLISECONDS.toNanos(ttlMs);
        if (hasCap && capDeadline < confirmedUntil) {
            capReached = true;
        }
    }

    static CompletableFuture<LockHandle> acquire(RuvioAsyncClient client, ClientCore core, String name,
                                                 Duration ttl, LockOptions o) {
        return acquire(client, core, name, 0, ttl, o);
    }

    /** Takes a lease (limit 0) or a semaphore slot (limit above 0) and starts the watchdog. */
    static CompletableFuture<LockHandle> acquire(RuvioAsyncClient client, ClientCore core, String name, int limit,
                                                 Duration ttl, LockOptions o) {
        long ttlMs = ttl.toMillis();
        if (ttlMs < 1) {
            throw new IllegalArgumentException("the lock TTL must be at least 1 ms");
        }
        long sentAt = System.nanoTime();
        long waitMs = o.waitForever ? 0 : o.wait != null && o.wait.toMillis() > 0 ? o.wait.toMillis() : -1;
        CompletableFuture<Long> f;
        if (limit > 0) {
            f = waitMs < 0 ? client.semaphore(name, limit, ttlMs) : client.semaphore(name, limit, ttlMs, waitMs);
        } else {
            f = waitMs < 0 ? client.lease(name, ttlMs) : client.lease(name, ttlMs, waitMs);
        }
        return f.thenApply(tok -> {
            if (tok == null) {
                return null;
            }
            LockHandle h = new LockHandle(client, core, name, tok, ttlMs, sentAt, o);
            h.start();
            return h;
        });
    }

    private synchronized void start() {
        scheduleLossCheck();
        if (autoRenew && !capReached) {
            renewTask = core.timer.schedule(this::renew, Math.max(1, ttlMs / 3), TimeUnit.MILLISECONDS);
        }
    }

    private synchronized void scheduleLossCheck() {
        if (lossTask != null) {
            lossTask.cancel(false);
        }
        long delay = confirmedUntil - marginNanos - System.nanoTime();
        lossTask = core.timer.schedule(this::checkLoss, Math.max(0, delay), TimeUnit.NANOSECONDS);
    }

    private synchronized void checkLoss() {
        if (done) {
            return;
        }
        if (System.nanoTime() >= confirmedUntil - marginNanos) {
            markLost(capReached ? LockLossReason.HOLD_CAP_REACHED : LockLossReason.DEADLINE_PASSED);
        } else {
            scheduleLossCheck();
        }
    }

    private void renew() {
        long sentAt;
        long ask;
        synchronized (this) {
            if (done) {
                return;
            }
            sentAt = System.nanoTime();
            ask = ttlMs;
            if (hasCap) {
                long left = TimeUnit.NANOSECONDS.toMillis(capDeadline - sentAt);
                if (left <= 0) {
                    capReached = true;
                    return;
                }
                if (left < ask) {
                    ask = left;
                    capReached = true;
                }
            }
        }
        final long asked = ask;
        CompletableFuture<Boolean> f;
        try {
            f = client.renew(name, token, asked);
        } catch (RuntimeException e) {
            f = CompletableFuture.failedFuture(e);
        }
        f.whenComplete((ok, e) -> {
            synchronized (this) {
                if (done) {
                    return;
                }
                if (e == null && Boolean.TRUE.equals(ok)) {
                    confirmedUntil = sentAt + TimeUnit.MILLISECONDS.toNanos(asked);
                    scheduleLossCheck();
                    if (!capReached) {
                        renewTask = core.timer.schedule(this::renew, Math.max(1, ttlMs / 3), TimeUnit.MILLISECONDS);
                    }
                } else if (e == null) {
                    markLost(LockLossReason.RENEW_REJECTED);
                } else if (!core.isClosed()) {
                    renewTask = core.timer.schedule(this::renew, Math.max(1, ttlMs / 10), TimeUnit.MILLISECONDS);
                }
            }
        });
    }

    private void markLost(LockLossReason reason) {
        synchronized (this) {
            if (done) {
                return;
            }
            done = true;
            lostAtNanos = System.nanoTime();
            lossReason = reason;
            cancelTasks();
        }
        Runnable signal = () -> {
            if (onLost != null) {
                try {
                    onLost.accept(this);
                } catch (RuntimeException e) {
                    // a failing callback must not stop the signal
                }
            }
            lost.complete(null);
        };
        try {
            core.callbacks.execute(signal);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            signal.run(); // the client is closing
        }
    }

    private void cancelTasks() {
        if (renewTask != null) {
            renewTask.cancel(false);
        }
        if (lossTask != null) {
            lossTask.cancel(false);
        }
    }

    /**
     * The lock's key.
     *
     * @return the name given when acquiring
     */
    public String name() {
        return name;
    }

    /**
     * The fencing token of this grant. Pass it to the write you protect.
     *
     * @return the token (positive)
     */
    public long token() {
        return token;
    }

    /**
     * Completes (with {@code null}) when the lock is lost; never completes if it is released first. Completed on the
     * client's callback thread (shared by all handles of the client): do not block in dependent stages.
     *
     * @return the loss future
     */
    public CompletableFuture<Void> lost() {
        return lost;
    }

    /**
     * Runs {@code action} when the lock is lost (at once if it is already lost).
     *
     * @param action what to run
     * @return this handle
     */
    public LockHandle onLost(Runnable action) {
        lost.thenRun(action);
        return this;
    }

    /**
     * When the loss was detected, on the {@link System#nanoTime()} clock (the callback and {@link #lost()} follow
     * on the client's callback thread).
     *
     * @return the detection instant, or 0 while not lost
     */
    public long lostAtNanos() {
        return lostAtNanos;
    }

    /**
     * Why the lock was lost.
     *
     * @return the reason, or {@code null} while not lost
     */
    public LockLossReason lossReason() {
        return lossReason;
    }

    /**
     * Whether the lock is still held as far as the client can tell: neither released nor lost, and the monotonic
     * clock is before the local deadline minus the margin.
     *
     * @return {@code true} while held
     */
    public synchronized boolean isHeld() {
        return !done && System.nanoTime() < confirmedUntil - marginNanos;
    }

    /**
     * Stops the watchdog and sends {@code RELEASE} (retried once after a lost connection).
     *
     * @return {@code true} when released; {@code false} when the token no longer held the lock (after a loss, or a
     *     second call); after a loss it never throws (an unreachable server then answers {@code false})
     */
    public boolean release() {
        return Futures.await(releaseAsync());
    }

    /**
     * Like {@link #release()}, without blocking.
     *
     * @return the future of the release's outcome
     */
    public CompletableFuture<Boolean> releaseAsync() {
        boolean wasLost;
        synchronized (this) {
            if (released) {
                return CompletableFuture.completedFuture(false);
            }
            released = true;
            wasLost = done;
            done = true;
            cancelTasks();
        }
        CompletableFuture<Boolean> f;
        try {
            f = client.release(name, token);
        } catch (RuntimeException e) {
            f = CompletableFuture.failedFuture(e);
        }
        if (wasLost) {
            return f.exceptionally(e -> false);
        }
        return f;
    }

    /** Releases the lock if not released yet (see {@link #release()}). */
    @Override
    public void close() {
        release();
    }
}
