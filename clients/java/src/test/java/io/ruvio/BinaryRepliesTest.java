package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Binary-safe replies ({@code commandBytes} and friends) against a real ruvio, with values that are not UTF-8. */
class BinaryRepliesTest {
    static ServerProcess server;
    static RuvioClient c;

    /** Every byte value 0..255 once, then the same reversed: far from valid UTF-8 (0x80..0xff alone, 0xc0, 0xff). */
    static final byte[] ALL_BYTES = allBytes();

    static byte[] allBytes() {
        byte[] b = new byte[512];
        for (int i = 0; i < 256; i++) {
            b[i] = (byte) i;
            b[511 - i] = (byte) i;
        }
        return b;
    }

    @BeforeAll
    static void start() {
        server = ServerProcess.ruvio();
        c = RuvioClient.connect("redis://127.0.0.1:" + server.port);
    }

    @AfterAll
    static void stop() {
        c.close();
        server.close();
    }

    static String key(String s) {
        return s + ":" + UUID.randomUUID();
    }

    @Test
    void allByteValuesRoundTripThroughSetGet() {
        String k = key("bin");
        assertEquals("OK", c.command("SET", k, ALL_BYTES), "simple strings stay String in text mode");
        Object back = c.commandBytes("GET", k);
        assertInstanceOf(byte[].class, back);
        assertArrayEquals(ALL_BYTES, (byte[]) back);
        assertArrayEquals(ALL_BYTES, c.getBytes(k));
        assertArrayEquals(ALL_BYTES, c.getBytes(k.getBytes(StandardCharsets.UTF_8)), "byte[] key");
        assertEquals(512L, c.command("STRLEN", k), "the server stored 512 bytes");

        // The text API, unchanged, decodes as UTF-8 and so cannot give the bytes back (the reason for commandBytes).
        Object text = c.command("GET", k);
        assertInstanceOf(String.class, text);
        assertNotEquals(Arrays.toString(ALL_BYTES),
                Arrays.toString(((String) text).getBytes(StandardCharsets.UTF_8)));

        // Each single byte value as its own value, and as part of a key.
        for (int i = 0; i < 256; i++) {
            byte[] v = {(byte) i};
            byte[] bk = (key("one") + "-").getBytes(StandardCharsets.UTF_8);
            bk = Arrays.copyOf(bk, bk.length + 1);
            bk[bk.length - 1] = (byte) i;
            c.command("SET", bk, v);
            assertArrayEquals(v, c.getBytes(bk), "byte value " + i);
        }
    }

    @Test
    void statusIntegersNilAndErrorsInBinaryMode() {
        String k = key("modes");
        assertEquals("OK", c.commandBytes("SET", k, ALL_BYTES), "simple strings stay String");
        assertEquals(512L, c.commandBytes("STRLEN", k));
        assertNull(c.commandBytes("GET", key("missing")));
        assertNull(c.getBytes(key("missing")));
        RuvioServerException e = assertThrows(RuvioServerException.class, () -> c.commandBytes("INCR", k));
        assertEquals("ERR", e.code());
        // The connection is still in order afterwards, in both modes.
        assertArrayEquals(ALL_BYTES, (byte[]) c.commandBytes("GET", k));
        assertEquals("OK", c.command("SET", k, "text"));
        assertEquals("text", c.command("GET", k));
    }

    @Test
    void nestedRepliesArraysAndMaps() {
        String a = key("a");
        String b = key("b");
        byte[] va = Arrays.copyOfRange(ALL_BYTES, 128, 256);
        c.command("SET", a, va);
        c.command("SET", b, "plain");
        List<?> l = (List<?>) c.commandBytes("MGET", a, key("none"), b);
        assertEquals(3, l.size());
        assertArrayEquals(va, (byte[]) l.get(0));
        assertNull(l.get(1));
        assertArrayEquals("plain".getBytes(StandardCharsets.UTF_8), (byte[]) l.get(2));

        Object hello = c.commandBytes("HELLO", "3"); // a RESP3 map: bulk keys and values as byte[]
        Map<?, ?> m = assertInstanceOf(Map.class, hello);
        Object serverName = null;
        for (Map.Entry<?, ?> en : m.entrySet()) { // byte[] keys compare by identity: iterate
            if (Arrays.equals("server".getBytes(StandardCharsets.UTF_8), (byte[]) en.getKey())) {
                serverName = en.getValue();
            }
        }
        assertArrayEquals("ruvio".getBytes(StandardCharsets.UTF_8), (byte[]) serverName);

        try (RuvioClient r2 = RuvioClient.connect(ClientOptions.builder().port(server.port).protocol(2).build())) {
            List<?> l2 = (List<?>) r2.commandBytes("MGET", a, b); // RESP2
            assertArrayEquals(va, (byte[]) l2.get(0));
            assertArrayEquals(va, r2.getBytes(a));
        }
    }

    @Test
    void asyncPipelineTransactionAndDedicatedConnection() throws Exception {
        String k = key("p");
        c.command("SET", k, ALL_BYTES);
        assertArrayEquals(ALL_BYTES, (byte[]) c.async().commandBytes("GET", k).get(30, TimeUnit.SECONDS));

        Pipeline p = c.pipeline();
        CompletableFuture<Object> t1 = p.command("GET", k);
        CompletableFuture<Object> b1 = p.commandBytes("GET", k);
        p.command("SET", k + ":2", "x");
        p.commandBytes("GET", k + ":2");
        List<Object> r = p.execute();
        assertInstanceOf(String.class, r.get(0), "text and binary commands mix in one pipeline");
        assertInstanceOf(String.class, t1.get());
        assertArrayEquals(ALL_BYTES, (byte[]) r.get(1));
        assertArrayEquals(ALL_BYTES, (byte[]) b1.get());
        assertEquals("OK", r.get(2));
        assertArrayEquals(new byte[] {'x'}, (byte[]) r.get(3));

        List<Object> tx = c.multi().command("SET", k + ":3", ALL_BYTES).command("GET", k + ":3").execBytes();
        assertEquals("OK", tx.get(0));
        assertArrayEquals(ALL_BYTES, (byte[]) tx.get(1));
        List<Object> txText = c.multi().command("GET", k + ":3").exec();
        assertInstanceOf(String.class, txText.get(0), "exec() is unchanged");

        try (RuvioConnection conn = c.dedicated()) {
            assertArrayEquals(ALL_BYTES, (byte[]) conn.commandBytes("GET", k));
            assertInstanceOf(String.class, conn.command("GET", k));
        }
    }

    /** Many threads mixing text and binary commands on the one shared connection: each gets its own mode back. */
    @Test
    void concurrentMixedModesOnTheSharedConnection() throws Exception {
        String bk = key("mixed-bin");
        String tk = key("mixed-text");
        c.command("SET", bk, ALL_BYTES);
        c.command("SET", tk, "héllo");
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                boolean binary = t % 2 == 0;
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < 300; i++) {
                        if (binary) {
                            assertArrayEquals(ALL_BYTES, (byte[]) c.commandBytes("GET", bk));
                        } else {
                            assertEquals("héllo", c.command("GET", tk));
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(pool.awaitTermination(30, TimeUnit.SECONDS));
    }
}
