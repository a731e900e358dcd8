// Failover discovery through the Sentinel protocol, against Debian's redis-sentinel and redis-server (the same
// protocol `ruvio coordinator` will speak): discovery, failover (+switch-master / connection loss), -READONLY.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { createClient, ReplyError } from "ruvio-client";
import { startRedis, startSentinel, waitFor } from "./helpers.mjs";

const procs = [];
const clients = [];
after(async () => {
  for (const c of clients) c.disconnect();
  for (const p of procs) await p.cleanup();
});

const track = (c) => (clients.push(c), c);

async function setup(name) {
  const a = await startRedis();
  procs.push(a);
  const b = await startRedis(["--replicaof", "127.0.0.1", String(a.port)]);
  procs.push(b);
  const bAdmin = track(createClient({ port: b.port, protocol: 2 }));
  await waitFor(async () => /master_link_status:up/.test(await bAdmin.call("INFO", "replication")), 30_000, "the replica to sync");
  const s = await startSentinel(name, a);
  procs.push(s);
  const sAdmin = track(createClient({ port: s.port, protocol: 2 }));
  // The sentinel learns about the replica from the primary's INFO.
  // It must also have talked to the replica itself (flags plain "slave", link ok), or it refuses to promote it.
  await waitFor(
    async () => {
      const replicas = await sAdmin.call("SENTINEL", "REPLICAS", name);
      if (replicas.length !== 1) return false;
      const f = {};
      for (let i = 0; i + 1 < replicas[0].length; i += 2) f[replicas[0][i]] = replicas[0][i + 1];
      return f.flags === "slave" && f["master-link-status"] === "ok";
    },
    60_000,
    "the sentinel to see the replica",
  );
  return { a, b, s, sAdmin, bAdmin };
}

test("discovers the primary, follows a failover (+switch-master), and keeps working", async () => {
  const name = "svc-failover";
  const { a, b, s, sAdmin } = await setup(name);
  const c = track(createClient({ sentinels: [{ host: "127.0.0.1", port: s.port }], serviceName: name, commandTimeout: 5000 }));
  const switches = [];
  c.on("switch-master", (addr) => switches.push(addr));
  c.on("error", () => {});
  assert.equal(await c.set("k", "v1"), "OK");
  assert.deepEqual(c.address, { host: "127.0.0.1", port: a.port });
  assert.equal((await c.call("ROLE"))[0], "master");

  // The sentinel may still answer NOGOODSLAVE for a moment (its view of the replica is refreshed by its own pings).
  await waitFor(async () => (await sAdmin.call("SENTINEL", "FAILOVER", name)) === "OK", 30_000, "SENTINEL FAILOVER to be accepted");
  // Writes fail for a moment (connection lost, or READONLY); they are not retried by the client. Poll until the
  // client reaches the new primary.
  await waitFor(
    async () => (await c.set("k", "v2").catch(() => null)) === "OK" && c.address.port === b.port,
    60_000,
    "the client to write to the new primary",
  );
  assert.equal((await c.call("ROLE"))[0], "master");
  assert.equal(await c.get("k"), "v2");
  const direct = track(createClient({ port: b.port }));
  assert.equal(await direct.get("k"), "v2", "the write went to the promoted node");
  await waitFor(() => switches.length > 0, 30_000, "the +switch-master event");
  assert.equal(switches.at(-1).port, b.port);
});

test("a -READONLY reply makes the client rediscover the primary", async () => {
  const name = "svc-readonly";
  const { a, b, sAdmin, bAdmin } = await setup(name);
  const s = procs.at(-1);
  const c = track(createClient({ sentinels: [{ host: "127.0.0.1", port: s.port }], serviceName: name }));
  c.on("error", () => {});
  assert.equal(await c.set("k", "1"), "OK");
  assert.equal(c.address.port, a.port);
  // Swap the roles behind the client's back, and point the coordinator at the new primary (no +switch-master).
  assert.equal(await bAdmin.call("REPLICAOF", "NO", "ONE"), "OK");
  const aAdmin = track(createClient({ port: a.port, protocol: 2 }));
  assert.equal(await aAdmin.call("REPLICAOF", "127.0.0.1", String(b.port)), "OK");
  assert.equal(await sAdmin.call("SENTINEL", "REMOVE", name), "OK");
  assert.equal(await sAdmin.call("SENTINEL", "MONITOR", name, "127.0.0.1", String(b.port), "1"), "OK");
  // The client still talks to a, now a replica: READONLY, surfaced as a ReplyError (not retried) ...
  await assert.rejects(c.set("k", "2"), (e) => e instanceof ReplyError && e.code === "READONLY");
  // ... and the client moves to the primary the coordinator names.
  await waitFor(async () => (await c.set("k", "3").catch(() => null)) === "OK", 30_000, "a write after rediscovery");
  assert.equal(c.address.port, b.port);
  assert.equal(await bAdmin.call("GET", "k"), "3");
});

test("no coordinator knows the service: a ConnectionError within the timeout", async () => {
  const s = procs.find((p) => p.cmd === "redis-sentinel");
  const c = track(createClient({ sentinels: [{ host: "127.0.0.1", port: s.port }], serviceName: "nope", reconnect: false }));
  await assert.rejects(c.ping(), /no coordinator gave the primary of nope/);
});
