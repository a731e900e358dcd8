package io.ruvio;

/**
 * The connection could not be opened, or it was lost. When it was lost after the command was sent,
 * {@link #isFateUnknown()} is {@code true}: the command may or may not have been carried out.
 */
public class RuvioConnectionException extends RuvioException {
    private static final long serialVersionUID = 1L;
    private final boolean fateUnknown;

    /**
     * Creates the exception.
     *
     * @param message what happened
     * @param cause the underlying cause, or {@code null}
     * @param fateUnknown whether the command may have reached the server
     */
    public RuvioConnectionException(String message, Throwable cause, boolean fateUnknown) {
        super(message, cause);
        this.fateUnknown = fateUnknown;
    }

    /**
     * Whether the command may have reached the server before the connection was lost (its fate is unknown), as
     * opposed to a connection that could not be opened or was already closed before the command was sent.
     *
     * @return {@code true} when the command may have been carried out
     */
    public boolean isFateUnknown() {
        return fateUnknown;
    }
}
