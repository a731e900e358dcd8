package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The generic command API, pipelines, transactions, pub/sub and the connection options. */
class CommandApiTest {
    static ServerProcess server;
    static RuvioClient c;

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
    void anyCommandInNaturalTypesResp3AndResp2() {
        String k = key("k");
        assertEquals("OK", c.command("SET", k, "v"));
        assertEquals("v", c.command("GET", k));
        assertNull(c.command("GET", key("missing")));
        assertEquals(5L, c.command("INCRBY", key("n"), 5));
        assertEquals("v", c.command("GET".getBytes(), k.getBytes()), "byte[] arguments");
        Object hello = c.command("HELLO", "3");
        assertInstanceOf(Map.class, hello, "RESP3 maps are Maps");
        assertEquals("ruvio", ((Map<?, ?>) hello).get("server"));
        Object info = c.command("CLIENT", "INFO");
        assertInstanceOf(String.class, info, "verbatim strings are Strings");
        assertTrue(((String) info).startsWith("id="), "the txt: prefix is removed: " + info);
        try (RuvioClient r2 = RuvioClient.connect(ClientOptions.builder().port(server.port).protocol(2).build())) {
            assertEquals(2, r2.protocol());
            Object h2 = r2.command("HELLO");
            assertInstanceOf(List.class, h2, "RESP2 maps are flat arrays");
            assertEquals("v", r2.command("GET", k));
            assertNull(r2.command("GET", key("missing")));
        }
        RuvioServerException e = assertThrows(RuvioServerException.class, () -> c.command("NOSUCHCOMMAND"));
        assertEquals("ERR", e.code());
    }

    @Test
    void pipeline() {
        String k = key("p");
        Pipeline p = c.pipeline();
        CompletableFuture<Object> first = p.command("SET", k, "1");
        p.command("INCR", k);
        p.command("LEASE", k, 1000); // WRONGTYPE: the others still run
        p.command("GET", k);
        assertEquals(4, p.size());
        List<Object> r = p.execute();
        assertEquals("OK", r.get(0));
        assertEquals(2L, r.get(1));
        assertInstanceOf(RuvioServerException.class, r.get(2));
        assertEquals("WRONGTYPE", ((RuvioServerException) r.get(2)).code());
        assertEquals("2", r.get(3));
        assertTrue(first.isDone());
        assertEquals("OK", first.join());
        assertEquals(List.of(), c.pipeline().execute());
        // a large pipeline
        Pipeline big = c.pipeline();
        for (int i = 0; i < 2000; i++) {
            big.command("INCR", k);
        }
        List<Object> rs = big.execute();
        assertEquals(2002L, rs.get(rs.size() - 1));
    }

    @Test
    void multiExecAndWatch() {
        String k = key("tx");
        c.set(k, "10");
        List<Object> r = c.multi().command("INCR", k).command("INCR", k).exec();
        assertEquals(List.of(11L, 12L), r);
        // WATCH with no interference: runs
        try (RuvioConnection conn = c.dedicated()) {
            conn.watch(k);
            long n = Long.parseLong((String) conn.command("GET", k));
            Transaction tx = conn.multi();
            tx.command("SET", k, Long.toString(n * 2));
            assertEquals(List.of("OK"), tx.exec());
        }
        assertEquals("24", c.get(k));
        // WATCH, then another client changes the key: EXEC answers null and nothing runs
        try (RuvioConnection conn = c.dedicated()) {
            conn.watch(k);
            c.set(k, "changed");
            Transaction tx = conn.multi();
            tx.command("SET", k, "mine");
            assertNull(tx.exec());
        }
        assertEquals("changed", c.get(k));
        // a command refused while queuing aborts the transaction
        RuvioServerException e = assertThrows(RuvioServerException.class,
                () -> c.multi().command("SET", k).exec());
        assertEquals("EXECABORT", e.code());
        // lock commands inside MULTI: WAIT never blocks there
        String l = key("txlock");
        List<Object> lr = c.multi().command("LEASE", l, 30_000).command("LEASE", l, 30_000, "WAIT", 5000).exec();
        assertInstanceOf(Long.class, lr.get(0));
        assertNull(lr.get(1));
    }

    @Test
    void pubSubBothProtocols() throws Exception {
        for (int proto : new int[] {3, 2}) {
            try (RuvioClient sc = RuvioClient.connect(ClientOptions.builder().port(server.port).protocol(proto)
                    .build())) {
                LinkedBlockingQueue<String> got = new LinkedBlockingQueue<>();
                String ch = key("ch");
                try (Subscription s = sc.subscribe((channel, message) -> got.add(channel + "=" + message), ch)) {
                    assertEquals(1L, c.publish(ch, "hello"));
                    assertEquals(ch + "=hello", got.poll(10, TimeUnit.SECONDS));
                    s.psubscribe(ch + ".*");
                    c.publish(ch + ".x", "pattern");
                    assertEquals(ch + ".x=pattern", got.poll(10, TimeUnit.SECONDS));
                    s.unsubscribe(ch);
                    assertEquals(0L, c.publish(ch, "nobody"));
                    assertFalse(s.closed().isDone());
                }
            }
        }
    }

    @Test
    void optionsAuthDatabaseNameDurability() {
        try (ServerProcess secured = ServerProcess.ruvio("--requirepass", "s3cret")) {
            RuvioServerException e = assertThrows(RuvioServerException.class,
                    () -> RuvioClient.connect("127.0.0.1", secured.port).command("GET", "x"));
            assertEquals("NOAUTH", e.code());
            RuvioServerException wrong = assertThrows(RuvioServerException.class,
                    () -> RuvioClient.connect("redis://:nope@127.0.0.1:" + secured.port));
            assertEquals("WRONGPASS", wrong.code());
            for (int proto : new int[] {3, 2}) {
                try (RuvioClient a = RuvioClient.connect("redis://default:s3cret@127.0.0.1:" + secured.port
                        + "/3?clientName=java-test&protocol=" + proto)) {
                    assertEquals(proto, a.protocol());
                    assertEquals("java-test", a.command("CLIENT", "GETNAME"));
                    String info = (String) a.command("CLIENT", "INFO");
                    assertTrue(info.contains(" db=3 "), info);
                    a.set("k", "in-db-3");
                }
            }
            try (RuvioClient a = RuvioClient.connect(ClientOptions.builder().port(secured.port).password("s3cret")
                    .build())) {
                assertNull(a.get("k"), "database 0 is another database");
            }
        }
        // the durability option is sent on every connection (CLIENT DURABILITY REPLICAS 1); this server has no
        // replica, so a write that needs one is refused before it runs, with the server's own error
        ClientOptions durable = ClientOptions.builder().port(server.port).durabilityReplicas(1).build();
        try (RuvioClient d = RuvioClient.connect(durable)) {
            RuvioServerException e = assertThrows(RuvioServerException.class, () -> d.lease(key("durable"), 1000));
            assertTrue(e.getMessage().contains("NOREPLICAS"), e.getMessage());
        }
        ClientOptions o = ClientOptions.fromUri("rediss://u:p%40ss@example.com:7000/5?timeout=1500&connectTimeout=700");
        assertTrue(o.tls());
        assertEquals("example.com", o.host());
        assertEquals(7000, o.port());
        assertEquals("u", o.username());
        assertEquals("p@ss", o.password());
        assertEquals(5, o.database());
        assertEquals(Duration.ofMillis(1500), o.commandTimeout());
        assertEquals(Duration.ofMillis(700), o.connectTimeout());
        assertThrows(IllegalArgumentException.class, () -> ClientOptions.fromUri("http://x"));
    }

    @Test
    void unreachableServerIsAnErrorNotAHang() {
        int port = ServerProcess.freePort();
        RuvioConnectionException e = assertThrows(RuvioConnectionException.class,
                () -> RuvioClient.connect("127.0.0.1", port));
        assertFalse(e.isFateUnknown());
    }

    @Test
    void manyThreadsAgainstADeadServerFailWithinAboutOneTimeout() throws Exception {
        ServerProcess own = ServerProcess.ruvio();
        RuvioClient a = RuvioClient.connect(ClientOptions.builder().port(own.port)
                .connectTimeout(Duration.ofMillis(1000)).commandTimeout(Duration.ofMillis(1000)).build());
        own.pause(); // TCP connects still succeed (kernel backlog), the handshake never answers
        try {
            var pool = java.util.concurrent.Executors.newFixedThreadPool(20);
            long start = System.nanoTime();
            var fs = new java.util.ArrayList<java.util.concurrent.Future<?>>();
            for (int i = 0; i < 20; i++) {
                fs.add(pool.submit(() -> assertThrows(RuvioException.class, a::ping)));
            }
            for (var f : fs) {
                f.get(60, TimeUnit.SECONDS);
            }
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            // one command timeout plus at most one or two connect timeouts, not 20 in turn (generous bound)
            assertTrue(ms < 15_000, "20 callers failed after " + ms + " ms");
            pool.shutdown();
        } finally {
            own.resume();
            a.close();
            own.close();
        }
    }

    @Test
    void tlsHandshakeAgainstAPlainServerFailsWithinTheTimeout() {
        // Ruvio has no TLS listener yet: a rediss:// client must fail cleanly (no hang) against a plain port
        long start = System.nanoTime();
        RuntimeException e = assertThrows(RuntimeException.class, () -> RuvioClient.connect(ClientOptions.builder()
                .port(server.port).tls(true).connectTimeout(Duration.ofSeconds(3)).build()));
        assertTrue(e instanceof RuvioTimeoutException || e instanceof RuvioConnectionException, e.toString());
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(60));
    }

    @Test
    void pausedServerTimesOutAndRestartedServerIsReconnected() throws Exception {
        try (ServerProcess own = ServerProcess.ruvio();
             RuvioClient a = RuvioClient.connect(ClientOptions.builder().port(own.port)
                     .commandTimeout(Duration.ofMillis(500)).connectTimeout(Duration.ofSeconds(2)).build())) {
            assertEquals("PONG", a.ping());
            own.pause();
            try {
                RuvioTimeoutException te = assertThrows(RuvioTimeoutException.class, () -> a.set("k", "v"));
                assertTrue(te.getMessage().contains("fate is unknown"));
                CompletableFuture<Long> f = a.async().lease("lk", 1000);
                var ex = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> f.get(30, TimeUnit.SECONDS));
                assertTrue(ex.getCause() instanceof RuvioTimeoutException
                        || ex.getCause() instanceof RuvioConnectionException, ex.getCause().toString());
            } finally {
                own.resume();
            }
            assertTrue(ServerProcess.waitFor(30_000, () -> "PONG".equals(a.ping())), "works again after resume");
            a.set("k", "before-restart");
            own.restart();
            // the first command may find the old connection dead; the client reconnects on the next one
            assertTrue(ServerProcess.waitFor(30_000, () -> "PONG".equals(a.ping())), "reconnected after restart");
            Long t = a.lease("after-restart", 30_000);
            assertNotNull(t);
            assertTrue(a.release("after-restart", t));
        }
    }

    @Test
    void connectionLossIsReportedAsFateUnknown() throws Exception {
        try (ServerProcess own = ServerProcess.ruvio();
             RuvioClient a = RuvioClient.connect("127.0.0.1", own.port)) {
            String k = "held";
            Long t = a.lease(k, 30_000);
            CompletableFuture<Long> waiting = a.async().lease(k, 30_000, 0);
            assertTrue(ServerProcess.waitFor(10_000, () -> a.lockInfo(k).waiters() == 1));
            own.kill();
            var ex = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> waiting.get(30, TimeUnit.SECONDS));
            assertInstanceOf(RuvioConnectionException.class, ex.getCause());
            assertTrue(((RuvioConnectionException) ex.getCause()).isFateUnknown());
            assertNotNull(t);
        }
    }
}
