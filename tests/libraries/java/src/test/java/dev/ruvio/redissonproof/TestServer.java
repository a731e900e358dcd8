package dev.ruvio.redissonproof;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The server under test, started on 127.0.0.1 with a free port and a fresh data folder: {@code LIBRARY_TARGET=redis}
 * starts Debian's {@code redis-server}; anything else (the default) starts {@code $RUVIO_BIN}, which must name the
 * ruvio binary (a missing one fails the test, it never skips).
 */
final class TestServer implements AutoCloseable {
    final String target;
    final int port;
    private final Path dir;
    private final Process process;

    private TestServer(String target, int port, Path dir, Process process) {
        this.target = target;
        this.port = port;
        this.dir = dir;
        this.process = process;
    }

    static String target() {
        String t = System.getenv("LIBRARY_TARGET");
        return t == null || t.isEmpty() ? "ruvio" : t.toLowerCase(Locale.ROOT);
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            s.setReuseAddress(true);
            return s.getLocalPort();
        }
    }

    static TestServer start() throws Exception {
        return start(null);
    }

    /** A server; with {@code primaryPort} a replica of the server on that port. */
    static TestServer start(Integer primaryPort) throws Exception {
        return start(primaryPort, null);
    }

    /** A server; with {@code primaryPort} a replica of the server on that port; with {@code password} requirepass. */
    /** The secret Ruvio nodes give their built-in `coordinator` user, and the coordinator logs in with. */
    static final String COORD_PASS = "test-coordinator-secret";

    static TestServer start(Integer primaryPort, String password) throws Exception {
        String target = target();
        Path dir = Files.createTempDirectory("ruvio-redisson-");
        int port = freePort();
        List<String> cmd = new ArrayList<>();
        if (target.equals("redis")) {
            cmd.addAll(List.of("redis-server", "--port", String.valueOf(port), "--dir", dir.toString(),
                    "--save", "", "--appendonly", "no"));
            if (primaryPort != null) {
                cmd.addAll(List.of("--replicaof", "127.0.0.1 " + primaryPort));
            }
            if (password != null) {
                cmd.addAll(List.of("--requirepass", password));
            }
        } else {
            // coordinator-pass: the built-in `coordinator` user the coordinator logs in as (coordination commands).
            cmd.addAll(List.of(ruvioBin(), "--port", String.valueOf(port), "--dir", dir.toString(),
                    "--coordinator-pass", COORD_PASS));
            if (primaryPort != null) {
                cmd.addAll(List.of("--replicaof", "127.0.0.1 " + primaryPort));
            }
            if (password != null) {
                cmd.addAll(List.of("--requirepass", password));
            }
        }
        return launch(target, port, dir, cmd, password);
    }

    /**
     * A Sentinel for the primary on {@code primaryPort}, group name {@code mymaster}: {@code redis-sentinel} for the
     * redis target, {@code $RUVIO_BIN coordinator} (a one-node coordinator) for ruvio.
     */
    static TestServer startSentinel(int primaryPort) throws Exception {
        String target = target();
        Path dir = Files.createTempDirectory("ruvio-redisson-sentinel-");
        int port = freePort();
        Path conf = dir.resolve("sentinel.conf");
        String monitor = "sentinel monitor mymaster 127.0.0.1 " + primaryPort + " 1\n"
                + "sentinel down-after-milliseconds mymaster 5000\n"
                + "sentinel failover-timeout mymaster 20000\n";
        if (!target.equals("redis")) {
            monitor += "sentinel auth-user mymaster coordinator\nsentinel auth-pass mymaster " + COORD_PASS + "\n";
        }
        Files.writeString(conf, "port " + port + "\nbind 127.0.0.1\ndir " + dir + "\n" + monitor);
        List<String> cmd = target.equals("redis")
                ? List.of("redis-sentinel", conf.toString())
                : List.of(ruvioBin(), "coordinator", "--config", conf.toString());
        return launch(target, port, dir, cmd, null);
    }

    private static String ruvioBin() {
        String bin = System.getenv("RUVIO_BIN");
        if (bin == null || bin.isEmpty() || !new File(bin).canExecute()) {
            throw new IllegalStateException("RUVIO_BIN must name the ruvio binary (got " + bin + ")");
        }
        return bin;
    }

    private static TestServer launch(String target, int port, Path dir, List<String> cmd, String password)
            throws Exception {
        Process p = new ProcessBuilder(cmd)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("server.log").toFile())
                .start();
        TestServer server = new TestServer(target, port, dir, p);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            try (Resp r = new Resp(port)) {
                if (password != null) {
                    r.call("AUTH", password);
                }
                if ("PONG".equals(r.call("PING"))) {
                    return server;
                }
            } catch (IOException | Resp.RespError notYet) {
                // not listening yet
            }
            if (!p.isAlive() || System.nanoTime() > deadline) {
                String log = Files.readString(dir.resolve("server.log"));
                server.close();
                throw new IllegalStateException(cmd.get(0) + " did not start on port " + port + ":\n" + log);
            }
            Thread.sleep(50);
        }
    }

    /** SIGSTOP (true) or SIGCONT (false): a server that is alive but answers nothing. */
    void pause(boolean stop) throws Exception {
        Process kill = new ProcessBuilder("kill", stop ? "-STOP" : "-CONT", String.valueOf(process.pid()))
                .inheritIO().start();
        if (kill.waitFor() != 0) {
            throw new IllegalStateException("kill failed");
        }
    }

    String address() {
        return "redis://127.0.0.1:" + port;
    }

    Resp resp() throws IOException {
        return new Resp(port);
    }

    @Override
    public void close() throws Exception {
        pause(false);
        process.destroyForcibly();
        process.waitFor(20, TimeUnit.SECONDS);
        try (Stream<Path> walk = Files.walk(dir)) {
            walk.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
    }
}
