package io.ruvio.bench;

import io.ruvio.RuvioClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;
import redis.clients.jedis.params.SetParams;

/**
 * Lock-cycle benchmark (bench/java_client_locks.sh): N concurrent callers each doing lock cycles on their own key,
 * either LEASE + RELEASE through this client against ruvio, or Jedis doing SET NX PX + EVALSHA compare-and-delete
 * against redis-server. Prints one line: mode, cycles/s, p50/p99 latency of a cycle, server CPU ms per 1000 cycles.
 *
 * <p>Usage: LockBench ruvio|jedis port serverPid threads seconds
 */
public final class LockBench {
    private static final String CAD =
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    interface Cycle {
        void run(int caller) throws Exception;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int port = Integer.parseInt(args[1]);
        long pid = Long.parseLong(args[2]);
        int threads = Integer.parseInt(args[3]);
        int seconds = Integer.parseInt(args[4]);
        AutoCloseable closer;
        Cycle cycle;
        if (mode.equals("ruvio")) {
            RuvioClient c = RuvioClient.connect("127.0.0.1", port);
            closer = c;
            cycle = caller -> {
                String key = "bench:lock:" + caller;
                Long token = c.lease(key, 30_000);
                if (token == null || !c.release(key, token)) {
                    throw new IllegalStateException("lock cycle failed on " + key);
                }
            };
        } else {
            JedisPoolConfig cfg = new JedisPoolConfig();
            cfg.setMaxTotal(threads);
            cfg.setMaxIdle(threads);
            JedisPool pool = new JedisPool(cfg, "127.0.0.1", port);
            closer = pool;
            String sha;
            try (var j = pool.getResource()) {
                sha = j.scriptLoad(CAD);
            }
            SetParams nxpx = SetParams.setParams().nx().px(30_000);
            cycle = caller -> {
                String key = "bench:lock:" + caller;
                String me = UUID.randomUUID().toString();
                try (var j = pool.getResource()) {
                    if (!"OK".equals(j.set(key, me, nxpx))) {
                        throw new IllegalStateException("SET NX failed on " + key);
                    }
                    Object r = j.evalsha(sha, 1, key, me);
                    if (!Long.valueOf(1).equals(r)) {
                        throw new IllegalStateException("compare-and-delete failed on " + key);
                    }
                }
            };
        }
        // warm up (JIT, connections)
        runFor(cycle, threads, 2, null);
        long cpu0 = cpuMillis(pid);
        long[][] lat = new long[threads][];
        long t0 = System.nanoTime();
        long total = runFor(cycle, threads, seconds, lat);
        double elapsed = (System.nanoTime() - t0) / 1e9;
        long cpu1 = cpuMillis(pid);
        closer.close();
        long[] all = Arrays.stream(lat).flatMapToLong(Arrays::stream).sorted().toArray();
        double p50 = all[all.length / 2] / 1000.0;
        double p99 = all[(int) (all.length * 0.99)] / 1000.0;
        System.out.printf("%s cycles_per_s=%.0f p50_us=%.0f p99_us=%.0f server_cpu_ms_per_1000=%.3f cycles=%d%n",
                mode, total / elapsed, p50, p99, (cpu1 - cpu0) * 1000.0 / total, total);
    }

    private static long runFor(Cycle cycle, int threads, int seconds, long[][] lat) throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(threads);
        long[] counts = new long[threads];
        Throwable[] err = new Throwable[1];
        for (int i = 0; i < threads; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                long[] mine = new long[1 << 16];
                int n = 0;
                try {
                    while (!stop.get()) {
                        long s = System.nanoTime();
                        cycle.run(id);
                        if (n == mine.length) {
                            mine = Arrays.copyOf(mine, n * 2);
                        }
                        mine[n++] = System.nanoTime() - s;
                    }
                } catch (Throwable e) {
                    err[0] = e;
                } finally {
                    counts[id] = n;
                    if (lat != null) {
                        lat[id] = Arrays.copyOf(mine, n);
                    }
                    done.countDown();
                }
            });
            t.setDaemon(true);
            t.start();
        }
        TimeUnit.SECONDS.sleep(seconds);
        stop.set(true);
        done.await(60, TimeUnit.SECONDS);
        if (err[0] != null) {
            throw new IllegalStateException("a caller failed", err[0]);
        }
        return Arrays.stream(counts).sum();
    }

    /** utime + stime of a process, in milliseconds (from /proc; clock ticks assumed 100/s, as on Linux). */
    private static long cpuMillis(long pid) throws Exception {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * 10;
    }
}
