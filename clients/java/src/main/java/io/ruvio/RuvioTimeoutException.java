package io.ruvio;

/**
 * No reply arrived within the command timeout (or the connect timeout while connecting). The command's fate is
 * unknown: it may or may not have been carried out. The connection it was sent on is closed, so that a late reply
 * can never be taken for the answer to another command; the next command opens a new connection.
 *
 * <p>{@code LEASE} and {@code SEMAPHORE} are never retried after this: a grant may have happened and its token is
 * lost (the lock then stays taken until its TTL ends).
 */
public class RuvioTimeoutException extends RuvioException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what timed out
     */
    public RuvioTimeoutException(String message) {
        super(message);
    }
}
