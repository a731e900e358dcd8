package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The client's own Sentinel discovery against three {@code ruvio coordinator}s watching a Ruvio primary and two
 * replicas: it finds the primary, makes a durable grant ({@code durabilityReplicas(1)}), and after kill -9 of the
 * primary it finds the new one, writes there, and the grant is held there with its token.
 */
class CoordinatorDiscoveryTest {
    private static final String COORD_PASS = "test-coordinator-secret";

    @Test
    void findsThePrimaryThroughCoordinatorsAndFollowsAKill9Failover() throws Exception {
        List<ServerProcess> all = new ArrayList<>();
        try {
            // coordinator-pass: the built-in `coordinator` user the coordinators log in as (coordination commands).
            ServerProcess primary = ServerProcess.ruvio("--appendonly", "yes", "--appendfsync", "always",
                    "--coordinator-pass", COORD_PASS);
            all.add(primary);
            List<ServerProcess> replicas = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                ServerProcess r = ServerProcess.ruvio("--appendonly", "yes", "--appendfsync", "always",
                        "--coordinator-pass", COORD_PASS, "--replicaof", "127.0.0.1 " + primary.port);
                replicas.add(r);
                all.add(r);
            }
            List<Integer> ports = new ArrayList<>();
            List<String> peers = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                int p = ServerProcess.freePort();
                ports.add(p);
                peers.add("127.0.0.1:" + p);
            }
            for (int port : ports) {
                Path dir = Files.createTempDirectory("coordinator-java-test");
                Path conf = dir.resolve("coordinator.conf");
                Files.writeString(conf, String.join("\n",
                        "port " + port,
                        "bind 127.0.0.1",
                        "dir " + dir,
                        "coordinator-peers " + String.join(" ", peers),
                        "sentinel monitor mymaster 127.0.0.1 " + primary.port + " 2",
                        "sentinel down-after-milliseconds mymaster 1000",
                        "sentinel durability-replicas mymaster 1",
                        "sentinel auth-user mymaster coordinator",
                        "sentinel auth-pass mymaster " + COORD_PASS,
                        "sentinel sentinel-user coordinators",
                        "sentinel sentinel-pass test-peer-secret",
                        ""));
                all.add(ServerProcess.coordinator(port, conf, dir));
            }
            for (int port : ports) {
                assertTrue(ServerProcess.waitFor(60_000, () -> {
                    String out = SentinelDiscoveryTest.cli(port, "SENTINEL", "replicas", "mymaster");
                    return out.contains(Integer.toString(replicas.get(0).port))
                            && out.contains(Integer.toString(replicas.get(1).port));
                }), "coordinator " + port + " knows both replicas");
            }
            // Durable writes count only the replicas a majority of the coordinators' write leases name
            // (durable=1 on the primary's INFO replication lines, docs/replication.md).
            assertTrue(ServerProcess.waitFor(60_000, () -> {
                String info = SentinelDiscoveryTest.cli(primary.port, "INFO", "replication");
                return info.split("durable=1", -1).length - 1 == 2;
            }), "the primary counts both replicas for durable writes");
            ClientOptions o = ClientOptions.builder().sentinels("mymaster", peers).durabilityReplicas(1)
                    .commandTimeout(Duration.ofSeconds(2)).connectTimeout(Duration.ofSeconds(2)).build();
            try (RuvioClient c = RuvioClient.connect(o)) {
                assertEquals(primary.port, SentinelDiscoveryTest.configPort(c), "discovered the primary");
                // A durable grant, as the README shows: answered once a replica holds it.
                Long token = c.lease("job:nightly-report", 30_000);
                assertTrue(token != null && token > 0, "the durable grant");
                c.set("before", "1");
                primary.kill();
                int[] failures = {0};
                assertTrue(ServerProcess.waitFor(60_000, () -> {
                    try {
                        c.set("after", "2");
                        return SentinelDiscoveryTest.configPort(c) != primary.port;
                    } catch (RuvioException e) {
                        failures[0]++;
                        return false;
                    }
                }), "writes reach a new primary");
                // (failures may be 0: the client retries a refused connection within its timeouts, before sending)
                System.out.println("writes that failed during the failover: " + failures[0]);
                int now = SentinelDiscoveryTest.configPort(c);
                assertTrue(now == replicas.get(0).port || now == replicas.get(1).port, "the new primary is a replica");
                String named = SentinelDiscoveryTest.cli(ports.get(0), "SENTINEL", "get-master-addr-by-name", "mymaster");
                assertTrue(named.contains(Integer.toString(now)), "the client talks to the primary the coordinators name");
                assertEquals("1", c.get("before"));
                assertEquals("2", c.get("after"));
                LockInfo info = c.lockInfo("job:nightly-report");
                assertEquals(token.longValue(), info.holders().get(0).token(), "the durable grant survived the failover");
            }
        } finally {
            for (ServerProcess p : all) {
                p.close();
            }
        }
    }
}
