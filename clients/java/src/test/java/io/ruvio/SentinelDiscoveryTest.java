package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Failover discovery through the Sentinel protocol, against Debian's redis-sentinel and redis-server (the
 * `ruvio coordinator` speaks the same protocol once it exists), and -READONLY handling against a real replica.
 */
class SentinelDiscoveryTest {
    static String cli(int port, String... args) {
        List<String> cmd = new java.util.ArrayList<>(List.of("redis-cli", "-p", Integer.toString(port)));
        cmd.addAll(List.of(args));
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes()).trim();
            p.waitFor();
            return out;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static int configPort(RuvioClient c) {
        Object r = c.command("CONFIG", "GET", "port");
        Object v = r instanceof java.util.Map<?, ?> m ? m.get("port") : ((List<?>) r).get(1);
        return Integer.parseInt(v.toString());
    }

    @Test
    void findsThePrimaryAndFollowsFailovers() {
        try (ServerProcess primary = ServerProcess.redis();
             ServerProcess replica = ServerProcess.redis()) {
            cli(replica.port, "REPLICAOF", "127.0.0.1", Integer.toString(primary.port));
            assertTrue(ServerProcess.waitFor(30_000,
                    () -> cli(replica.port, "INFO", "replication").contains("master_link_status:up")));
            try (ServerProcess sentinel = ServerProcess.sentinel("svc", primary.port)) {
                assertTrue(ServerProcess.waitFor(30_000, () -> cli(sentinel.port, "SENTINEL", "replicas", "svc")
                        .contains(Integer.toString(replica.port))), "the sentinel found the replica");
                ClientOptions o = ClientOptions.builder().sentinels("svc", List.of(sentinel.addr()))
                        .commandTimeout(Duration.ofSeconds(2)).connectTimeout(Duration.ofSeconds(2)).build();
                try (RuvioClient c = RuvioClient.connect(o)) {
                    assertEquals(primary.port, configPort(c), "discovered the primary");
                    c.set("k", "v1");

                    // a manual failover: the replica is promoted, the old primary demoted
                    // (the sentinel answers NOGOODSLAVE until it has the replica's own INFO: ask again until OK)
                    String[] answer = {""};
                    assertTrue(ServerProcess.waitFor(60_000, () -> {
                        answer[0] = cli(sentinel.port, "SENTINEL", "FAILOVER", "svc").trim();
                        return answer[0].equals("OK");
                    }), "SENTINEL FAILOVER answered " + answer[0]);
                    assertTrue(ServerProcess.waitFor(60_000, () -> {
                        try {
                            c.set("k", "v2");
                            return configPort(c) == replica.port;
                        } catch (RuvioException e) {
                            return false;
                        }
                    }), "writes go to the promoted replica");
                    assertEquals("v2", c.get("k"));

                    // the new primary dies: the sentinel promotes the old one back and the client follows
                    assertTrue(ServerProcess.waitFor(60_000, () -> cli(primary.port, "INFO", "replication")
                            .contains("master_link_status:up")), "the old primary replicates the new one");
                    replica.kill();
                    assertTrue(ServerProcess.waitFor(90_000, () -> {
                        try {
                            c.set("k", "v3");
                            return configPort(c) == primary.port;
                        } catch (RuvioException e) {
                            return false;
                        }
                    }), "reconnected to the new primary after the old one died");
                    assertEquals("v3", c.get("k"));
                }
            }
        }
    }

    @Test
    void readonlyReplyCarriesItsCodeAndTheNextCommandReconnects() {
        try (ServerProcess primary = ServerProcess.redis();
             ServerProcess replica = ServerProcess.redis("--replicaof", "127.0.0.1",
                     Integer.toString(primary.port))) {
            try (RuvioClient c = RuvioClient.connect("127.0.0.1", replica.port)) {
                RuvioServerException e = assertThrows(RuvioServerException.class, () -> c.set("k", "v"));
                assertEquals("READONLY", e.code());
                // the connection was dropped so that a discovering client would find the new primary;
                // the next command opens a new one
                assertEquals("PONG", c.ping());
                assertEquals("slave", ((List<?>) c.command("ROLE")).get(0));
            }
        }
    }

    @Test
    void unknownServiceIsAConnectionError() {
        try (ServerProcess primary = ServerProcess.redis();
             ServerProcess sentinel = ServerProcess.sentinel("svc", primary.port)) {
            ClientOptions o = ClientOptions.builder().sentinels("nope", List.of(sentinel.addr()))
                    .connectTimeout(Duration.ofMillis(500)).build();
            RuvioConnectionException e = assertThrows(RuvioConnectionException.class, () -> RuvioClient.connect(o));
            assertTrue(e.getMessage().contains("nope"), e.getMessage());
        }
    }
}
