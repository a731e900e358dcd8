package io.ruvio;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A batch of commands sent in one write on the client's shared connection, their replies read back in order. Not a
 * transaction: other clients' commands may run between them (use {@link Transaction} for atomicity).
 *
 * <pre>{@code
 * Pipeline p = c.pipeline();
 * CompletableFuture<Object> a = p.command("SET", "a", "1");
 * p.command("INCR", "a");
 * List<Object> replies = p.execute();      // ["OK", 2]
 * }</pre>
 *
 * <p>An error reply appears in the result list as a {@link RuvioServerException} value (and fails that command's
 * future); it does not stop the other commands. Not thread-safe; use one pipeline per thread.
 */
public final class Pipeline {
    private final ClientCore core;
    private final List<Object[]> commands = new ArrayList<>();
    private final List<CompletableFuture<Object>> futures = new ArrayList<>();
    private final List<Boolean> binary = new ArrayList<>();

    Pipeline(ClientCore core) {
        this.core = core;
    }

    /**
     * Queues a command (nothing is sent until {@link #execute()}).
     *
     * @param args the command name and arguments
     * @return the command's reply, completed once the pipeline has run
     */
    public CompletableFuture<Object> command(Object... args) {
        return queue(false, args);
    }

    /**
     * Queues a command whose reply comes back binary-safe: bulk strings as {@code byte[]} (see
     * {@link RuvioClient#commandBytes(Object...)}). Text and binary commands mix freely in one pipeline.
     *
     * @param args the command name and arguments
     * @return the command's reply, completed once the pipeline has run
     */
    public CompletableFuture<Object> commandBytes(Object... args) {
        return queue(true, args);
    }

    private CompletableFuture<Object> queue(boolean bin, Object[] args) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        commands.add(args.clone());
        futures.add(f);
        binary.add(bin);
        return f;
    }

    /**
     * How many commands are queued.
     *
     * @return the count
     */
    public int size() {
        return commands.size();
    }

    /**
     * Sends every queued command in one write and waits for all replies.
     *
     * @return the replies in order; error replies as {@link RuvioServerException} values
     * @throws RuvioTimeoutException or {@link RuvioConnectionException} when the batch did not complete
     */
    public List<Object> execute() {
        return Futures.await(executeAsync());
    }

    /**
     * Like {@link #execute()}, without blocking.
     *
     * @return the future of the replies
     */
    public CompletableFuture<List<Object>> executeAsync() {
        List<Object[]> cmds = List.copyOf(commands);
        List<CompletableFuture<Object>> mine = List.copyOf(futures);
        boolean[] modes = new boolean[binary.size()];
        for (int i = 0; i < modes.length; i++) {
            modes[i] = binary.get(i);
        }
        commands.clear();
        futures.clear();
        binary.clear();
        if (cmds.isEmpty()) {
            return CompletableFuture.completedFuture(List.of());
        }
        List<CompletableFuture<Object>> sent = core.sendBatch(cmds, modes);
        for (int i = 0; i < sent.size(); i++) {
            CompletableFuture<Object> target = mine.get(i);
            sent.get(i).whenComplete((v, e) -> {
                if (e == null) {
                    target.complete(v);
                } else {
                    target.completeExceptionally(Futures.cause(e));
                }
            });
        }
        return CompletableFuture.allOf(sent.toArray(new CompletableFuture<?>[0])).handle((x, e) -> {
            List<Object> out = new ArrayList<>(sent.size());
            for (CompletableFuture<Object> f : sent) {
                try {
                    out.add(f.join());
                } catch (RuntimeException ex) {
                    Throwable t = Futures.cause(ex);
                    if (t instanceof RuvioServerException s) {
                        out.add(s);
                    } else {
                        throw Futures.unwrap(t);
                    }
                }
            }
            return out;
        });
    }
}
