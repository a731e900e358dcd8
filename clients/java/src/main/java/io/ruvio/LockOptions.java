package io.ruvio;

import java.time.Duration;
import java.util.function.Consumer;

/**
 * Options of the lock helper ({@link RuvioClient#tryLock(String, Duration, LockOptions)}). A small fluent holder;
 * the helper copies the values when it acquires, so one instance may be reused.
 *
 * <pre>{@code
 * var opts = LockOptions.defaults()
 *         .waitFor(Duration.ofSeconds(5))
 *         .maxHold(Duration.ofMinutes(10))
 *         .onLost(h -> log.warn("lost {} ({})", h.name(), h.lossReason()));
 * }</pre>
 */
public final class LockOptions {
    Duration wait = Duration.ZERO;
    boolean waitForever;
    Duration maxHold;
    boolean autoRenew = true;
    Consumer<LockHandle> onLost;

    private LockOptions() {
    }

    /**
     * Options with the defaults: do not wait, renew automatically at TTL/3, no cap on the hold time, no callback.
     *
     * @return new options
     */
    public static LockOptions defaults() {
        return new LockOptions();
    }

    /**
     * How long to wait for the lock when it is taken (served in arrival order by the server's {@code WAIT}).
     *
     * @param wait the longest wait; zero does not wait
     * @return these options
     */
    public LockOptions waitFor(Duration wait) {
        this.wait = wait;
        this.waitForever = false;
        return this;
    }

    /**
     * Waits for the lock without a time limit.
     *
     * @return these options
     */
    public LockOptions waitForever() {
        this.waitForever = true;
        return this;
    }

    /**
     * A cap on the total hold time: renewals never extend the lock beyond acquisition + {@code cap}, so a stuck
     * process cannot hold it forever. When the cap is reached the loss signal fires with
     * {@link LockLossReason#HOLD_CAP_REACHED}.
     *
     * @param cap the longest total hold time, or {@code null} for none
     * @return these options
     */
    public LockOptions maxHold(Duration cap) {
        this.maxHold = cap;
        return this;
    }

    /**
     * Whether a watchdog renews the lock at TTL/3 (default {@code true}). Without it the loss signal fires shortly
     * before the TTL ends.
     *
     * @param autoRenew whether to renew
     * @return these options
     */
    public LockOptions autoRenew(boolean autoRenew) {
        this.autoRenew = autoRenew;
        return this;
    }

    /**
     * A callback run once when the lock is lost, before {@link LockHandle#lost()} completes (on the client's callback
     * thread, shared by all handles of the client: keep it short, do not block).
     *
     * @param callback receives the handle; {@link LockHandle#lossReason()} says why
     * @return these options
     */
    public LockOptions onLost(Consumer<LockHandle> callback) {
        this.onLost = callback;
        return this;
    }
}
