package io.ruvio;

import java.util.ArrayList;
import java.util.List;

/**
 * A MULTI/EXEC transaction. Commands are collected locally and sent as {@code MULTI}, the commands and {@code EXEC}
 * in one write when {@link #exec()} is called, on a dedicated connection (the one that ran {@code WATCH}, when the
 * transaction comes from {@link RuvioConnection#multi()}).
 *
 * <pre>{@code
 * try (RuvioConnection conn = c.dedicated()) {
 *     conn.watch("counter");
 *     long n = Long.parseLong((String) conn.command("GET", "counter"));
 *     Transaction tx = conn.multi();
 *     tx.command("SET", "counter", Long.toString(n + 1));
 *     List<Object> result = tx.exec();     // null: "counter" changed after WATCH, nothing ran
 * }
 * }</pre>
 *
 * <p>Not thread-safe.
 */
public final class Transaction {
    private final RuvioConnection conn;
    private final boolean ownsConnection;
    private final List<Object[]> commands = new ArrayList<>();
    private boolean done;

    Transaction(RuvioConnection conn, boolean ownsConnection) {
        this.conn = conn;
        this.ownsConnection = ownsConnection;
    }

    /**
     * Queues a command.
     *
     * @param args the command name and arguments
     * @return this transaction
     */
    public Transaction command(Object... args) {
        if (done) {
            throw new IllegalStateException("the transaction has already run");
        }
        commands.add(args.clone());
        return this;
    }

    /**
     * Runs the transaction.
     *
     * @return the replies of the queued commands (an error reply as a {@link RuvioServerException} value), or
     *     {@code null} when a WATCHed key changed and nothing ran
     * @throws RuvioServerException {@code EXECABORT} when the server refused a queued command
     */
    public List<Object> exec() {
        return run(false);
    }

    /**
     * Runs the transaction, the replies binary-safe: bulk strings as {@code byte[]} (see
     * {@link RuvioClient#commandBytes(Object...)}).
     *
     * @return as {@link #exec()}, bulk strings as {@code byte[]}
     * @throws RuvioServerException {@code EXECABORT} when the server refused a queued command
     */
    public List<Object> execBytes() {
        return run(true);
    }

    @SuppressWarnings("unchecked")
    private List<Object> run(boolean binary) {
        if (done) {
            throw new IllegalStateException("the transaction has already run");
        }
        done = true;
        List<Object[]> batch = new ArrayList<>(commands.size() + 2);
        batch.add(new Object[] {"MULTI"});
        batch.addAll(commands);
        batch.add(new Object[] {"EXEC"});
        try {
            boolean[] modes = new boolean[batch.size()];
            modes[modes.length - 1] = binary; // the EXEC reply carries the results
            List<Object> replies = conn.batch(batch, modes);
            conn.watching = false;
            Object exec = replies.get(replies.size() - 1);
            if (exec instanceof RuvioServerException e) {
                throw new RuvioServerException(e.serverMessage());
            }
            return (List<Object>) exec;
        } finally {
            if (ownsConnection) {
                conn.close();
            }
        }
    }

    /** Drops the queued commands without sending them (and releases the connection if the transaction owns it). */
    public void discard() {
        done = true;
        commands.clear();
        if (ownsConnection) {
            conn.close();
        }
    }
}
