package io.ruvio;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** A real server process for the tests: ruvio from $RUVIO_BIN (required), or redis-server/redis-sentinel. */
final class ServerProcess implements AutoCloseable {
    final int port;
    final Path dir;
    private final List<String> command;
    /** Whether readiness is a PING answered in plain text (false: a TLS-only port, ready once it accepts TCP). */
    private boolean plainPing = true;
    private Process process;

    private ServerProcess(List<String> command, int port, Path dir) {
        this.command = command;
        this.port = port;
        this.dir = dir;
    }

    /** The ruvio binary from RUVIO_BIN; fails (does not skip) when it is unset or missing. */
    static String ruvioBin() {
        String bin = System.getenv("RUVIO_BIN");
        if (bin == null || bin.isBlank()) {
            throw new IllegalStateException("RUVIO_BIN is not set: point it at a ruvio binary (target/release/ruvio)");
        }
        if (!new File(bin).canExecute()) {
            throw new IllegalStateException("RUVIO_BIN=" + bin + " is not an executable file");
        }
        return bin;
    }

    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            s.setReuseAddress(true);
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static ServerProcess ruvio(String... extra) {
        try {
            int port = freePort();
            Path dir = Files.createTempDirectory("ruvio-java-test");
            List<String> cmd = new ArrayList<>(List.of(ruvioBin(), "--port", Integer.toString(port), "--dir",
                    dir.toString()));
            cmd.addAll(List.of(extra));
            ServerProcess p = new ServerProcess(cmd, port, dir);
            p.start();
            return p;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** redis-server (for the benchmark partner and the sentinel tests). */
    static ServerProcess redis(String... extra) {
        try {
            int port = freePort();
            Path dir = Files.createTempDirectory("redis-java-test");
            List<String> cmd = new ArrayList<>(List.of("redis-server", "--port", Integer.toString(port), "--dir",
                    dir.toString(), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"));
            cmd.addAll(List.of(extra));
            ServerProcess p = new ServerProcess(cmd, port, dir);
            p.start();
            return p;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Ruvio listening only on a TLS port (no plain port), with the given certificate, key and CA files; clients are
     * not asked for certificates. The directives are redis.conf's, which Ruvio takes as redis-server does.
     */
    static ServerProcess ruvioTls(Path cert, Path key, Path ca) {
        try {
            int port = freePort();
            Path dir = Files.createTempDirectory("ruvio-tls-java-test");
            List<String> cmd = List.of(ruvioBin(), "--port", "0", "--tls-port", Integer.toString(port),
                    "--tls-cert-file", cert.toString(), "--tls-key-file", key.toString(),
                    "--tls-ca-cert-file", ca.toString(), "--tls-auth-clients", "no",
                    "--dir", dir.toString(), "--appendonly", "no", "--bind", "127.0.0.1");
            ServerProcess p = new ServerProcess(cmd, port, dir);
            p.plainPing = false;
            p.start();
            return p;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** redis-sentinel monitoring a primary under the name given. */
    static ServerProcess sentinel(String name, int primaryPort) {
        try {
            int port = freePort();
            Path dir = Files.createTempDirectory("sentinel-java-test");
            Path conf = dir.resolve("sentinel.conf");
            Files.writeString(conf, String.join("\n",
                    "port " + port,
                    "bind 127.0.0.1",
                    "dir " + dir,
                    "sentinel monitor " + name + " 127.0.0.1 " + primaryPort + " 1",
                    "sentinel down-after-milliseconds " + name + " 1000",
                    "sentinel failover-timeout " + name + " 5000",
                    "sentinel parallel-syncs " + name + " 1",
                    ""));
            ServerProcess p = new ServerProcess(List.of("redis-sentinel", conf.toString()), port, dir);
            p.start();
            return p;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** `ruvio coordinator --config conf`, listening on {@code port} (the file says so). */
    static ServerProcess coordinator(int port, Path conf, Path dir) {
        ServerProcess p = new ServerProcess(List.of(ruvioBin(), "coordinator", "--config", conf.toString()), port, dir);
        p.start();
        return p;
    }

    void start() {
        try {
            ProcessBuilder pb = new ProcessBuilder(command);
            pb.redirectErrorStream(true);
            pb.redirectOutput(dir.resolve("server.log").toFile());
            process = pb.start();
        } catch (IOException e) {
            throw new IllegalStateException("cannot start " + command + ": " + e, e);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("server exited at start: " + command + "\n" + log());
            }
            try (Socket s = new Socket("127.0.0.1", port)) {
                if (!plainPing) {
                    return; // the TLS port accepts connections: the server is up (the tests then talk TLS)
                }
                s.setSoTimeout(2000);
                s.getOutputStream().write("PING\r\n".getBytes());
                int b = s.getInputStream().read();
                if (b == '+' || b == '-') {
                    return;
                }
            } catch (IOException e) {
                // not up yet
            }
            sleep(50);
        }
        throw new IllegalStateException("server did not come up on port " + port + ": " + command);
    }

    String log() {
        try {
            return Files.readString(dir.resolve("server.log"));
        } catch (IOException e) {
            return "";
        }
    }

    String addr() {
        return "127.0.0.1:" + port;
    }

    long pid() {
        return process.pid();
    }

    void signal(String sig) {
        try {
            Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(process.pid())).inheritIO().start();
            if (k.waitFor() != 0) {
                throw new IllegalStateException("kill -" + sig + " failed");
            }
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** SIGSTOP, and waits until the kernel shows every thread stopped: kill(2) returns before the stop takes effect. */
    void pause() {
        signal("STOP");
        if (!waitFor(10_000, this::everyThreadStopped)) {
            throw new IllegalStateException("process " + process.pid() + " did not stop after SIGSTOP");
        }
    }

    private boolean everyThreadStopped() {
        try (var threads = Files.list(Path.of("/proc/" + process.pid() + "/task"))) {
            return threads.allMatch(ServerProcess::threadStopped);
        } catch (IOException e) {
            return false;
        }
    }

    /** The state field of /proc/PID/task/TID/stat comes right after the parenthesised command name. */
    private static boolean threadStopped(Path task) {
        try {
            String stat = Files.readString(task.resolve("stat"));
            return stat.substring(stat.lastIndexOf(')') + 2).startsWith("T");
        } catch (IOException e) {
            return true; // the thread ended
        }
    }

    void resume() {
        signal("CONT");
    }

    /** Stops the process (SIGKILL) and waits for it. */
    void kill() {
        if (process != null && process.isAlive()) {
            signal("CONT");
            process.destroyForcibly();
            try {
                process.waitFor(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Kills and starts again on the same port with the same data folder. */
    void restart() {
        kill();
        start();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** Waits up to timeoutMs for the condition, polling. */
    static boolean waitFor(long timeoutMs, java.util.function.BooleanSupplier cond) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (System.nanoTime() < deadline) {
            try {
                if (cond.getAsBoolean()) {
                    return true;
                }
            } catch (RuntimeException e) {
                // keep polling
            }
            sleep(50);
        }
        return cond.getAsBoolean();
    }

    @Override
    public void close() {
        kill();
    }
}
