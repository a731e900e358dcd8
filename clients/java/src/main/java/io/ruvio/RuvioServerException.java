package io.ruvio;

/**
 * The server answered with an error reply, such as {@code WRONGTYPE Operation against a key holding the wrong kind of
 * value}. The command was not carried out as asked.
 *
 * <p>Inside the result list of a pipeline or a transaction, an error reply appears as an instance of this class
 * (returned as a value, not thrown).
 */
public class RuvioServerException extends RuvioException {
    private static final long serialVersionUID = 1L;
    private final String code;
    private final String serverMessage;

    /**
     * Creates the exception from the text of an error reply.
     *
     * @param reply the error reply without its leading {@code -} and line end, e.g. {@code "ERR syntax error"}
     */
    public RuvioServerException(String reply) {
        super(reply);
        this.serverMessage = reply;
        int sp = reply.indexOf(' ');
        String first = sp < 0 ? reply : reply.substring(0, sp);
        this.code = first.isEmpty() || !first.equals(first.toUpperCase(java.util.Locale.ROOT)) ? "ERR" : first;
    }

    /**
     * The error code: the first word of the reply ({@code ERR}, {@code WRONGTYPE}, {@code READONLY},
     * {@code NOAUTH}, {@code WRONGPASS}, {@code MISCONF}, {@code EXECABORT}, ...).
     *
     * @return the error code
     */
    public String code() {
        return code;
    }

    /**
     * The whole error reply as the server sent it, code included.
     *
     * @return the reply text
     */
    public String serverMessage() {
        return serverMessage;
    }
}
