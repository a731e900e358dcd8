package io.ruvio;

/**
 * The base of every exception this client throws. All are unchecked, so the product post's snippets compile without
 * {@code try}/{@code catch}.
 *
 * <p>The subclasses tell the cases apart:
 * <ul>
 *   <li>{@link RuvioServerException}: the server answered with an error reply; {@link RuvioServerException#code()}
 *       gives its code ({@code ERR}, {@code WRONGTYPE}, {@code READONLY}, ...). The command's fate is known: it did
 *       not do what was asked.</li>
 *   <li>{@link RuvioTimeoutException}: no reply within the command timeout. The command's fate is unknown.</li>
 *   <li>{@link RuvioConnectionException}: the connection could not be opened, or was lost.
 *       {@link RuvioConnectionException#isFateUnknown()} says whether the command may have reached the server.</li>
 * </ul>
 */
public class RuvioException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates an exception.
     *
     * @param message what happened
     * @param cause the underlying cause, or {@code null}
     */
    public RuvioException(String message, Throwable cause) {
        super(message, cause);
    }

    /**
     * Creates an exception.
     *
     * @param message what happened
     */
    public RuvioException(String message) {
        super(message);
    }
}
