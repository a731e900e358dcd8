// The client's own Sentinel discovery (`sentinels` + `serviceName`) against three `ruvio coordinator`s watching a
// Ruvio primary and two replicas: it finds the primary, makes a durable grant (durability: { replicas: 1 }), and after
// kill -9 of the primary it reaches the new one, where the grant is held.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, openSync, closeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { createClient } from "ruvio-client";
import { freePort, ruvioBin, waitFor } from "./helpers.mjs";

const dir = mkdtempSync(path.join(os.tmpdir(), "ruvio-node-coordinator-"));
const procs = [];
const clients = [];
after(async () => {
  for (const c of clients) c.disconnect();
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});
const track = (c) => (c.on("error", () => {}), clients.push(c), c);

function run(name, args) {
  const log = openSync(path.join(dir, `${name}.log`), "a");
  const p = spawn(ruvioBin(), args, { stdio: ["ignore", log, log] });
  closeSync(log);
  procs.push(p);
  return p;
}

async function ask(port, ...args) {
  const c = createClient({ port, protocol: 2, connectTimeout: 1000, commandTimeout: 3000 });
  c.on("error", () => {});
  try {
    return await c.call(...args);
  } finally {
    c.disconnect();
  }
}

const COORD_PASS = "test-coordinator-secret";

function node(port, primary) {
  const d = path.join(dir, `node-${port}`);
  mkdirSync(d);
  // The nodes enable the built-in `coordinator` user the coordinators log in as (coordination commands).
  const args = ["--port", String(port), "--dir", d, "--appendonly", "yes", "--appendfsync", "always", "--coordinator-pass", COORD_PASS];
  if (primary) args.push("--replicaof", `127.0.0.1 ${primary}`);
  return run(`node-${port}`, args);
}

test("discovers the primary through ruvio coordinators and follows a kill -9 failover", async () => {
  const nodes = [await freePort(), await freePort(), await freePort()];
  const primary = node(nodes[0]);
  await waitFor(async () => (await ask(nodes[0], "PING").catch(() => null)) === "PONG", 20_000, "the primary");
  for (const p of nodes.slice(1)) node(p, nodes[0]);
  const coords = [await freePort(), await freePort(), await freePort()];
  for (const c of coords) {
    const d = path.join(dir, `coordinator-${c}`);
    mkdirSync(d);
    const conf = path.join(d, "coordinator.conf");
    writeFileSync(
      conf,
      [
        `port ${c}`,
        "bind 127.0.0.1",
        `dir ${d}`,
        `coordinator-peers ${coords.map((p) => `127.0.0.1:${p}`).join(" ")}`,
        `sentinel monitor mymaster 127.0.0.1 ${nodes[0]} 2`,
        "sentinel down-after-milliseconds mymaster 1000",
        "sentinel durability-replicas mymaster 1",
        "sentinel auth-user mymaster coordinator",
        `sentinel auth-pass mymaster ${COORD_PASS}`,
        "sentinel sentinel-user coordinators",
        "sentinel sentinel-pass test-peer-secret",
        "",
      ].join("\n"),
    );
    run(`coordinator-${c}`, ["coordinator", "--config", conf]);
  }
  await waitFor(
    async () => {
      for (const c of coords) {
        const reps = await ask(c, "SENTINEL", "REPLICAS", "mymaster").catch(() => []);
        if (reps.length !== 2) return false;
      }
      return true;
    },
    60_000,
    "every coordinator to know both replicas",
  );

  // Durable writes count only the replicas a majority of the coordinators' write leases name (durable=1 on the
  // primary's INFO replication lines, docs/replication.md).
  await waitFor(
    async () => ((await ask(nodes[0], "INFO", "replication").catch(() => "")).match(/durable=1/g) ?? []).length === 2,
    60_000,
    "the primary to count both replicas for durable writes",
  );

  const c = track(
    createClient({
      sentinels: coords.map((port) => ({ host: "127.0.0.1", port })),
      serviceName: "mymaster",
      durability: { replicas: 1 },
      commandTimeout: 3000,
    }),
  );
  // A durable grant, as the README shows: answered once a replica holds it.
  const token = await c.lease("job:nightly-report", 30_000);
  assert.match(token, /^[1-9][0-9]*$/);
  assert.equal(await c.set("before", "1"), "OK");
  assert.equal(c.address.port, nodes[0]);

  primary.kill("SIGKILL");
  let failures = 0;
  await waitFor(
    async () => {
      const ok = (await c.set("after", "2").catch(() => null)) === "OK";
      if (!ok) failures++;
      return ok && c.address.port !== nodes[0];
    },
    60_000,
    "the client to write to the new primary",
  );
  assert.ok(failures > 0, "a command failed while the primary was dead (the failover was exercised)");
  assert.ok(nodes.slice(1).includes(c.address.port), `the new primary ${c.address.port} is one of the replicas`);
  const named = await ask(coords[0], "SENTINEL", "get-master-addr-by-name", "mymaster");
  assert.equal(Number(named[1]), c.address.port, "the client talks to the primary the coordinators name");
  assert.equal((await c.call("ROLE"))[0], "master");
  assert.equal(await c.get("before"), "1");
  const info = await c.lockInfo("job:nightly-report");
  assert.deepEqual(info.holders.map((h) => h.token), [token], "the durable grant survived the failover");
});
