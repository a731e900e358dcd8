package io.ruvio;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A pub/sub subscription on its own connection. Messages go to the {@link MessageListener}. Subscribing waits for the
 * server's confirmation, so a message published after {@link #subscribe(String...)} returns is delivered.
 *
 * <p>When the connection is lost, {@link #closed()} completes; the subscription is not re-established automatically
 * (subscribe again on a new one). Thread-safe.
 */
public final class Subscription implements AutoCloseable {
    private final ClientCore core;
    private final Connection conn;
    private final MessageListener listener;
    private final Map<String, CompletableFuture<Void>> confirmations = new ConcurrentHashMap<>();
    private final CompletableFuture<Void> closed = new CompletableFuture<>();

    Subscription(ClientCore core, MessageListener listener) {
        this.core = core;
        this.listener = listener;
        this.conn = core.openConnection();
        conn.setPushHandler(this::onReply, true);
    }

    private void onReply(Object v) {
        if (v instanceof RuntimeException) {
            closed.complete(null);
            confirmations.values().forEach(f -> f.completeExceptionally((RuntimeException) v));
            return;
        }
        List<?> items = v instanceof Push p ? p.items() : v instanceof List<?> l ? l : null;
        if (items == null || items.isEmpty()) {
            return;
        }
        String kind = String.valueOf(items.get(0));
        switch (kind) {
            case "message" -> listener.onMessage(str(items.get(1)), str(items.get(2)));
            case "pmessage" -> listener.onPatternMessage(str(items.get(1)), str(items.get(2)), str(items.get(3)));
            case "subscribe", "psubscribe", "unsubscribe", "punsubscribe" -> {
                CompletableFuture<Void> f = confirmations.remove(kind + " " + items.get(1));
                if (f != null) {
                    f.complete(null);
                }
            }
            default -> {
                // pong and others: nothing to do
            }
        }
    }

    private static String str(Object o) {
        return o == null ? null : o.toString();
    }

    private void run(String command, String... names) {
        List<CompletableFuture<Void>> waits = new ArrayList<>();
        for (String n : names) {
            CompletableFuture<Void> f = new CompletableFuture<>();
            confirmations.put(command.toLowerCase(java.util.Locale.ROOT) + " " + n, f);
            waits.add(f);
        }
        Object[] args = new Object[names.length + 1];
        args[0] = command;
        System.arraycopy(names, 0, args, 1, names.length);
        conn.sendNoReply(args);
        CompletableFuture<Void> all = CompletableFuture.allOf(waits.toArray(new CompletableFuture<?>[0]));
        try {
            all.get(core.commandTimeoutMs(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new RuvioTimeoutException(command + " was not confirmed within " + core.commandTimeoutMs() + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RuvioException("interrupted", e);
        } catch (java.util.concurrent.ExecutionException e) {
            throw Futures.unwrap(e.getCause());
        }
    }

    /**
     * Subscribes to channels and waits for the confirmation.
     *
     * @param channels the channels
     */
    public void subscribe(String... channels) {
        run("SUBSCRIBE", channels);
    }

    /**
     * Subscribes to channel patterns ({@code news.*}) and waits for the confirmation.
     *
     * @param patterns the patterns
     */
    public void psubscribe(String... patterns) {
        run("PSUBSCRIBE", patterns);
    }

    /**
     * Unsubscribes from channels and waits for the confirmation.
     *
     * @param channels the channels (at least one)
     */
    public void unsubscribe(String... channels) {
        run("UNSUBSCRIBE", channels);
    }

    /**
     * Unsubscribes from patterns and waits for the confirmation.
     *
     * @param patterns the patterns (at least one)
     */
    public void punsubscribe(String... patterns) {
        run("PUNSUBSCRIBE", patterns);
    }

    /**
     * Completes when the subscription's connection is closed or lost.
     *
     * @return the future
     */
    public CompletableFuture<Void> closed() {
        return closed;
    }

    /** Closes the subscription's connection. */
    @Override
    public void close() {
        conn.close(new RuvioConnectionException("subscription closed", null, false));
    }
}
