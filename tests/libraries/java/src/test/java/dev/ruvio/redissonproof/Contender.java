package dev.ruvio.redissonproof;

import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RMap;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * One contending JVM process: {@code Contender <redis://host:port> <rounds> <id>}. Waits until the other contender is
 * ready, then {@code rounds} times: lock() (watchdog), check nobody else is inside, a read-modify-write of a counter
 * that loses updates unless the lock excludes the other process, record who made each step, unlock(). Exits 1 on any
 * overlap it sees.
 */
public final class Contender {
    private Contender() {
    }

    public static void main(String[] args) throws Exception {
        String address = args[0];
        int rounds = Integer.parseInt(args[1]);
        String id = args[2];
        RedissonClient redisson = Redisson.create(RedissonProofTest.config(address));
        int status = 0;
        try {
            RBucket<String> count = redisson.getBucket("j:count", StringCodec.INSTANCE);
            RBucket<String> inside = redisson.getBucket("j:inside", StringCodec.INSTANCE);
            RMap<String, String> record = redisson.getMap("j:record", StringCodec.INSTANCE);
            redisson.getBucket("j:ready:" + id, StringCodec.INSTANCE).set("1");
            String peer = id.equals("p0") ? "p1" : "p0";
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!redisson.getBucket("j:ready:" + peer, StringCodec.INSTANCE).isExists()) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("the other contender never started");
                }
                Thread.sleep(20);
            }
            RLock lock = redisson.getLock("j:contended");
            for (int i = 0; i < rounds; i++) {
                lock.lock();
                try {
                    String before = inside.getAndSet(id);
                    if (before != null) {
                        System.out.println(id + " OVERLAP: " + before + " was inside");
                        status = 1;
                    }
                    String v = count.get();
                    int next = (v == null ? 0 : Integer.parseInt(v)) + 1;
                    Thread.sleep(2);
                    count.set(String.valueOf(next));
                    record.fastPut(String.valueOf(next), id);
                    String still = inside.getAndDelete();
                    if (!id.equals(still)) {
                        System.out.println(id + " OVERLAP: " + still + " came inside");
                        status = 1;
                    }
                } finally {
                    lock.unlock();
                }
                Thread.sleep(5); // outside the lock: give the other process its turn
            }
            System.out.println(id + " done " + rounds);
        } catch (Exception e) {
            e.printStackTrace(System.out);
            status = 1;
        } finally {
            redisson.shutdown(0, 5, TimeUnit.SECONDS);
        }
        System.exit(status);
    }
}
