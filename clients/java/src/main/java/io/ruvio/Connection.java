package io.ruvio;

import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;

/**
 * One TCP (or TLS) connection. Many threads may send on it at once: requests are written under a lock in the order
 * their futures are queued, and one reader thread completes the futures in that same order (RESP answers in order).
 * A command without a reply in time completes with {@link RuvioTimeoutException} and closes the connection.
 */
final class Connection {
    private final Socket socket;
    private final OutputStream out;
    private final Resp.Reader reader;
    /** Guards {@link #outbox}, {@link #flushing} and the order of {@link #pending}. */
    private final Object queueLock = new Object();
    private final Queue<Pending> pending = new ConcurrentLinkedQueue<>();
    private ArrayList<byte[]> outbox = new ArrayList<>();
    private boolean flushing;
    private ScheduledFuture<?> tick;
    private final ScheduledExecutorService timer;
    private final String address;
    private volatile boolean closed;
    private volatile Consumer<Object> pushHandler;
    private volatile boolean allToHandler;
    private int protocol = 2;
    final long createdNanos = System.nanoTime();

    private Connection(Socket socket, ScheduledExecutorService timer, String address) throws IOException {
        this.socket = socket;
        this.out = new BufferedOutputStream(socket.getOutputStream(), 16 * 1024);
        this.reader = new Resp.Reader(socket.getInputStream());
        this.timer = timer;
        this.address = address;
    }

    /**
     * A command waiting for its reply; deadline is a System.nanoTime() value, or 0 for none; binary: bulk strings of
     * the reply as {@code byte[]}.
     */
    private record Pending(CompletableFuture<Object> future, long deadline, boolean binary) {
    }

    /** Opens a connection to host:port and runs the handshake (HELLO/AUTH, SETNAME, SELECT, DURABILITY). */
    static Connection open(String host, int port, ClientOptions o, ScheduledExecutorService timer,
                           boolean handshakeForSentinel) {
        long connectMs = Math.max(1, o.connectTimeout().toMillis());
        Socket s = new Socket();
        String addr = host + ":" + port;
        try {
            s.setTcpNoDelay(true);
            s.setKeepAlive(true);
            s.connect(new InetSocketAddress(host, port), (int) Math.min(Integer.MAX_VALUE, connectMs));
            if (o.tls() && !handshakeForSentinel) {
                SSLSocketFactory f = o.sslSocketFactory() != null ? o.sslSocketFactory()
                        : (SSLSocketFactory) SSLSocketFactory.getDefault();
                SSLSocket ssl = (SSLSocket) f.createSocket(s, host, port, true);
                if (o.verifyHostname()) {
                    SSLParameters p = ssl.getSSLParameters();
                    p.setEndpointIdentificationAlgorithm("HTTPS");
                    ssl.setSSLParameters(p);
                }
                ssl.setSoTimeout((int) Math.min(Integer.MAX_VALUE, connectMs));
                ssl.startHandshake();
                ssl.setSoTimeout(0);
                s = ssl;
            }
        } catch (SocketTimeoutException e) {
            closeQuietly(s);
            throw new RuvioTimeoutException("connecting to " + addr + " took longer than " + connectMs + " ms");
        } catch (IOException e) {
            closeQuietly(s);
            throw new RuvioConnectionException("cannot connect to " + addr + ": " + e, e, false);
        }
        Connection c;
        try {
            c = new Connection(s, timer, addr);
        } catch (IOException e) {
            closeQuietly(s);
            throw new RuvioConnectionException("cannot connect to " + addr + ": " + e, e, false);
        }
        c.startReader();
        try {
            if (handshakeForSentinel) {
                if (o.sentinelPassword() != null) {
                    c.call(connectMs, "AUTH", o.sentinelPassword());
                }
            } else {
                c.handshake(o, connectMs);
            }
        } catch (RuntimeException e) {
            c.close(e);
            throw e;
        }
        return c;
    }

    private void handshake(ClientOptions o, long ms) {
        boolean resp3 = false;
        if (o.protocol() == 3) {
            List<Object> hello = new ArrayList<>(List.of("HELLO", "3"));
            if (o.password() != null) {
                hello.addAll(List.of("AUTH", o.username() == null ? "default" : o.username(), o.password()));
            }
            if (o.clientName() != null) {
                hello.addAll(List.of("SETNAME", o.clientName()));
            }
            try {
                call(ms, hello.toArray());
                resp3 = true;
                protocol = 3;
            } catch (RuvioServerException e) {
                boolean refused = "NOPROTO".equals(e.code())
                        || e.serverMessage().toLowerCase(java.util.Locale.ROOT).contains("unknown command");
                if (!refused) {
                    throw e;
                }
            }
        }
        if (!resp3) {
            if (o.password() != null) {
                if (o.username() != null) {
                    call(ms, "AUTH", o.username(), o.password());
                } else {
                    call(ms, "AUTH", o.password());
                }
            }
            if (o.clientName() != null) {
                call(ms, "CLIENT", "SETNAME", o.clientName());
            }
        }
        if (o.database() != 0) {
            call(ms, "SELECT", Integer.toString(o.database()));
        }
        if (o.durabilityReplicas() != null) {
            call(ms, "CLIENT", "DURABILITY", "REPLICAS", o.durabilityReplicas().toString());
        }
    }

    /** The RESP version this connection speaks: 3 after a successful HELLO 3, else 2. */
    int protocol() {
        return protocol;
    }

    String address() {
        return address;
    }

    boolean isOpen() {
        return !closed;
    }

    /** Routes RESP3 pushes (and, once {@code all} is set, every reply) to the handler. */
    void setPushHandler(Consumer<Object> handler, boolean all) {
        this.pushHandler = handler;
        this.allToHandler = all;
    }

    private void startReader() {
        // one periodic check per connection instead of one timer task per command
        tick = timer.scheduleWithFixedDelay(this::checkTimeouts, 10, 10, TimeUnit.MILLISECONDS);
        Thread t = new Thread(this::readLoop, "ruvio-reader-" + address);
        t.setDaemon(true);
        t.start();
    }

    private void readLoop() {
        try {
            while (!closed) {
                // The reply's command is queued before its bytes are written, so once a byte of the reply has
                // arrived the head of the queue says how to decode it.
                reader.awaitInput();
                Pending head = allToHandler ? null : pending.peek();
                boolean binary = head != null && head.binary();
                Object v = reader.read(binary);
                if (binary && v instanceof Push) {
                    v = Resp.toText(v); // an out-of-band push in the middle: always text
                }
                Consumer<Object> h = pushHandler;
                if (h != null && (allToHandler || v instanceof Push)) {
                    try {
                        h.accept(v);
                    } catch (RuntimeException e) {
                        // a listener's failure must not kill the connection
                    }
                    continue;
                }
                if (v instanceof Push) {
                    continue; // out-of-band message nobody listens to
                }
                Pending p = pending.poll();
                CompletableFuture<Object> f = p == null ? null : p.future();
                if (f == null) {
                    close(new RuvioConnectionException("protocol error: a reply arrived that no command waits for",
                            null, true));
                    return;
                }
                if (v instanceof RuvioServerException e) {
                    if ("READONLY".equals(e.code())) {
                        // The node is no longer the primary: close before answering, so the caller's next command
                        // already goes to a new connection (which rediscovers the primary with sentinels).
                        close(new RuvioConnectionException("connection to " + address
                                + " closed: the server answered READONLY (not the primary)", e, true));
                        f.completeExceptionally(new RuvioServerException(e.serverMessage()));
                        return;
                    }
                    f.completeExceptionally(new RuvioServerException(e.serverMessage()));
                } else {
                    f.complete(v);
                }
            }
        } catch (IOException e) {
            close(new RuvioConnectionException("connection to " + address + " lost: " + e.getMessage(), e, true));
        } catch (RuntimeException e) {
            close(new RuvioConnectionException("connection to " + address + " broken: " + e, e, true));
        }
    }

    /**
     * Sends one command. The future completes with the reply, or exceptionally with a {@link RuvioServerException},
     * {@link RuvioTimeoutException} (after timeoutMs; 0 = no timeout) or {@link RuvioConnectionException}.
     */
    CompletableFuture<Object> send(long timeoutMs, Object... args) {
        return sendBatch(timeoutMs, List.<Object[]>of(args), null).get(0);
    }

    /** Like {@link #send(long, Object...)}, the bulk strings of the reply as byte[]. */
    CompletableFuture<Object> sendBinary(long timeoutMs, Object... args) {
        return sendBatch(timeoutMs, List.<Object[]>of(args), new boolean[] {true}).get(0);
    }

    List<CompletableFuture<Object>> sendBatch(long timeoutMs, List<Object[]> commands) {
        return sendBatch(timeoutMs, commands, null);
    }

    /**
     * Sends several commands in one write; their futures, in order. Writes are combined: a thread that finds no
     * write in progress writes everything queued so far (its own bytes and those other threads add meanwhile) in as
     * few system calls as possible, so many threads sharing the connection pipeline naturally. {@code binary} (null:
     * none) marks the commands whose bulk replies are decoded as byte[].
     */
    List<CompletableFuture<Object>> sendBatch(long timeoutMs, List<Object[]> commands, boolean[] binary) {
        ByteArrayOutputStream buf = new ByteArrayOutputStream(64 * commands.size());
        for (Object[] c : commands) {
            Resp.encode(buf, c);
        }
        long deadline = timeoutMs > 0 ? Math.max(1, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs)) : 0;
        List<CompletableFuture<Object>> fs = new ArrayList<>(commands.size());
        List<Pending> ps = new ArrayList<>(commands.size());
        for (int i = 0; i < commands.size(); i++) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            fs.add(f);
            ps.add(new Pending(f, deadline, binary != null && binary[i]));
        }
        synchronized (queueLock) {
            if (closed) {
                RuvioConnectionException e = new RuvioConnectionException(
                        "connection to " + address + " is closed", null, false);
                fs.forEach(f -> f.completeExceptionally(e));
                return fs;
            }
            pending.addAll(ps);
            outbox.add(buf.toByteArray());
            if (flushing) {
                return fs;
            }
            flushing = true;
        }
        flushLoop();
        return fs;
    }

    private void flushLoop() {
        while (true) {
            ArrayList<byte[]> batch;
            synchronized (queueLock) {
                if (outbox.isEmpty() || closed) {
                    flushing = false;
                    outbox.clear();
                    return;
                }
                batch = outbox;
                outbox = new ArrayList<>();
            }
            try {
                for (byte[] b : batch) {
                    out.write(b);
                }
                out.flush();
            } catch (IOException e) {
                close(new RuvioConnectionException("connection to " + address + " lost while sending: " + e,
                        e, true));
                synchronized (queueLock) {
                    flushing = false;
                    outbox.clear();
                }
                return;
            }
        }
    }

    private void checkTimeouts() {
        long now = System.nanoTime();
        for (Pending p : pending) {
            if (p.deadline() != 0 && now - p.deadline() > 0 && !p.future().isDone()) {
                RuvioTimeoutException te = new RuvioTimeoutException("no reply from " + address
                        + " within the timeout; the command's fate is unknown");
                // close first, so the caller's next command already opens a new connection
                pending.remove(p);
                close(new RuvioConnectionException("connection to " + address
                        + " closed after a command timed out", te, true));
                p.future().completeExceptionally(te);
                return;
            }
        }
    }

    /** Sends a command that gets no paired reply (subscribed mode: replies go to the push handler). */
    void sendNoReply(Object... args) {
        synchronized (queueLock) {
            if (closed) {
                throw new RuvioConnectionException("connection to " + address + " is closed", null, false);
            }
            outbox.add(Resp.encode(args));
            if (flushing) {
                return;
            }
            flushing = true;
        }
        flushLoop();
        if (closed) {
            throw new RuvioConnectionException("connection to " + address + " lost while sending", null, true);
        }
    }

    /** Sends a command and waits for its reply (for the handshake and internal use). */
    Object call(long timeoutMs, Object... args) {
        return Futures.await(send(timeoutMs, args));
    }

    /** Closes the connection; every command still waiting fails with the given cause. */
    void close(RuntimeException cause) {
        List<Pending> toFail = new ArrayList<>();
        boolean wasClosed;
        synchronized (queueLock) {
            wasClosed = closed;
            closed = true;
            Pending p;
            while ((p = pending.poll()) != null) {
                toFail.add(p);
            }
        }
        ScheduledFuture<?> t = tick;
        if (t != null) {
            t.cancel(false);
        }
        closeQuietly(socket);
        for (Pending p : toFail) {
            p.future().completeExceptionally(cause);
        }
        Consumer<Object> h = pushHandler;
        if (h != null && !wasClosed) {
            try {
                h.accept(cause);
            } catch (RuntimeException e) {
                // ignore
            }
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // nothing to do
        }
    }

    /** Converts a RESP2 flat array or RESP3 map into a map. */
    @SuppressWarnings("unchecked")
    static Map<Object, Object> asMap(Object v) {
        if (v instanceof Map<?, ?> m) {
            return (Map<Object, Object>) m;
        }
        if (v instanceof List<?> l) {
            Map<Object, Object> m = new java.util.LinkedHashMap<>();
            for (int i = 0; i + 1 < l.size(); i += 2) {
                m.put(l.get(i), l.get(i + 1));
            }
            return m;
        }
        throw new RuvioException("expected a map reply, got " + v);
    }
}
