package io.ruvio;

import java.util.List;

/**
 * A connection taken from the client's pool for the caller alone, for what needs connection state: WATCH and
 * MULTI/EXEC, or a blocking command. Closing it gives it back (or closes it when it still holds state such as
 * WATCHed keys).
 *
 * <p>Not thread-safe: use it from one thread at a time.
 */
public final class RuvioConnection implements AutoCloseable {
    private final ClientCore core;
    private final Connection conn;
    boolean watching;
    private boolean closed;

    RuvioConnection(ClientCore core) {
        this.core = core;
        this.conn = core.borrow();
    }

    /**
     * Sends any command on this connection and waits for the reply.
     *
     * @param args the command name and arguments
     * @return the reply (see {@link RuvioClient#command(Object...)})
     */
    public Object command(Object... args) {
        check();
        return Futures.await(core.watchReadonly(conn, conn.send(core.commandTimeoutMs(), args)));
    }

    /**
     * Sends any command on this connection and waits for the reply, binary-safe: bulk strings as {@code byte[]}
     * (see {@link RuvioClient#commandBytes(Object...)}).
     *
     * @param args the command name and arguments
     * @return the reply, bulk strings as {@code byte[]}
     */
    public Object commandBytes(Object... args) {
        check();
        return Futures.await(core.watchReadonly(conn, conn.sendBinary(core.commandTimeoutMs(), args)));
    }

    List<Object> batch(List<Object[]> commands, boolean[] binary) {
        check();
        List<java.util.concurrent.CompletableFuture<Object>> fs = conn.sendBatch(core.commandTimeoutMs(), commands,
                binary);
        List<Object> out = new java.util.ArrayList<>(fs.size());
        for (var f : fs) {
            try {
                out.add(Futures.await(f));
            } catch (RuvioServerException e) {
                out.add(e);
            }
        }
        return out;
    }

    /**
     * {@code WATCH key [key ...]}: the next {@link Transaction#exec()} on this connection runs only if none of the keys
     * changed meanwhile.
     *
     * @param keys the keys
     */
    public void watch(String... keys) {
        Object[] args = new Object[keys.length + 1];
        args[0] = "WATCH";
        System.arraycopy(keys, 0, args, 1, keys.length);
        command(args);
        watching = true;
    }

    /** {@code UNWATCH}. */
    public void unwatch() {
        command("UNWATCH");
        watching = false;
    }

    /**
     * Starts a transaction on this connection.
     *
     * @return the transaction
     */
    public Transaction multi() {
        check();
        return new Transaction(this, false);
    }

    /**
     * The RESP version this connection speaks (3, or 2 when the server refused HELLO 3 or RESP2 was asked for).
     *
     * @return 2 or 3
     */
    public int protocol() {
        return conn.protocol();
    }

    private void check() {
        if (closed) {
            throw new IllegalStateException("this connection was given back");
        }
    }

    /** Gives the connection back to the pool (closing it instead if WATCHed keys are still set). */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (watching) {
            conn.close(new RuvioConnectionException("closed with WATCHed keys", null, false));
        } else {
            core.giveBack(conn);
        }
    }
}
