package io.ruvio;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Finds the primary through the Sentinel protocol ({@code SENTINEL get-master-addr-by-name}, then {@code ROLE} on
 * the answer to confirm it is a primary), and watches {@code +switch-master} to drop connections on a failover.
 */
final class SentinelDiscovery {
    private final ClientCore core;
    private final ClientOptions o;
    private final Thread watcher;
    private volatile boolean closed;
    private volatile Connection watchConn;

    SentinelDiscovery(ClientCore core) {
        this.core = core;
        this.o = core.options;
        this.watcher = new Thread(this::watchLoop, "ruvio-sentinel-watch");
        this.watcher.setDaemon(true);
        this.watcher.start();
    }

    /** Asks the sentinels, in order, for the primary's address and opens a confirmed connection to it. */
    Connection openPrimary() {
        long deadline = System.nanoTime() + Math.max(1, o.connectTimeout().toNanos()) * 2;
        RuntimeException last = null;
        while (!closed) {
            for (String s : o.sentinels()) {
                try {
                    String[] hp = ask(s);
                    if (hp == null) {
                        last = new RuvioConnectionException("sentinel " + s + " does not know the service '"
                                + o.serviceName() + "'", null, false);
                        continue;
                    }
                    Connection c = Connection.open(hp[0], Integer.parseInt(hp[1]), o, core.timer, false);
                    Object role;
                    try {
                        role = c.call(core.commandTimeoutMs(), "ROLE");
                    } catch (RuntimeException e) {
                        c.close(e);
                        throw e;
                    }
                    if (role instanceof List<?> l && !l.isEmpty() && "master".equals(l.get(0))) {
                        return c;
                    }
                    c.close(new RuvioConnectionException("not a primary", null, false));
                    last = new RuvioConnectionException("sentinel " + s + " named " + hp[0] + ":" + hp[1]
                            + " but its ROLE is " + role, null, false);
                } catch (RuntimeException e) {
                    last = e;
                }
            }
            if (System.nanoTime() > deadline) {
                break;
            }
            sleep(100);
        }
        throw new RuvioConnectionException("no primary found for service '" + o.serviceName() + "' through "
                + o.sentinels() + (last == null ? "" : ": " + last.getMessage()), last, false);
    }

    private String[] ask(String sentinel) {
        int colon = sentinel.lastIndexOf(':');
        Connection c = Connection.open(sentinel.substring(0, colon), Integer.parseInt(sentinel.substring(colon + 1)),
                o, core.timer, true);
        try {
            Object r = c.call(core.commandTimeoutMs(), "SENTINEL", "get-master-addr-by-name", o.serviceName());
            if (r instanceof List<?> l && l.size() == 2) {
                return new String[] {String.valueOf(l.get(0)), String.valueOf(l.get(1))};
            }
            return null;
        } finally {
            c.close(new RuvioConnectionException("done", null, false));
        }
    }

    /** Keeps a subscription to {@code +switch-master} on one sentinel; on a switch of our service, reconnect. */
    private void watchLoop() {
        while (!closed) {
            for (String s : o.sentinels()) {
                if (closed) {
                    return;
                }
                CompletableFuture<Void> ended = new CompletableFuture<>();
                try {
                    int colon = s.lastIndexOf(':');
                    Connection c = Connection.open(s.substring(0, colon), Integer.parseInt(s.substring(colon + 1)),
                            o, core.timer, true);
                    watchConn = c;
                    c.setPushHandler(v -> {
                        if (v instanceof RuntimeException) {
                            ended.complete(null);
                        } else if (v instanceof List<?> l && l.size() == 3 && "message".equals(l.get(0))
                                && String.valueOf(l.get(2)).startsWith(o.serviceName() + " ")) {
                            core.dropConnections("failover announced by " + s + ": " + l.get(2));
                        }
                    }, true);
                    c.sendNoReply("SUBSCRIBE", "+switch-master");
                    if (closed) {
                        c.close(new RuvioConnectionException("closed", null, false));
                    }
                    ended.get();
                } catch (InterruptedException e) {
                    return;
                } catch (Exception e) {
                    // try the next sentinel
                }
                sleep(200);
            }
        }
    }

    private static void sleep(long ms) {
        try {
            TimeUnit.MILLISECONDS.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    void close() {
        closed = true;
        Connection c = watchConn;
        if (c != null) {
            c.close(new RuvioConnectionException("closed", null, false));
        }
        watcher.interrupt();
    }
}
