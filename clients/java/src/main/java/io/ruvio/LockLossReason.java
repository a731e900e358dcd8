package io.ruvio;

/** Why a {@link LockHandle} reports its lock as lost. */
public enum LockLossReason {
    /** A {@code RENEW} answered 0: the token no longer holds the lock (expired, deleted, or taken over). */
    RENEW_REJECTED,
    /**
     * No renewal succeeded in time: by the client's monotonic clock the server-side deadline is about to pass (the
     * signal fires a safety margin before it). The server may have been unreachable, paused, or slow.
     */
    DEADLINE_PASSED,
    /** The cap on the total hold time ({@link LockOptions#maxHold}) was reached, so renewals stopped. */
    HOLD_CAP_REACHED
}
