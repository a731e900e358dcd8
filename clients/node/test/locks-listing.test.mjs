// LOCKS through the client's typed methods (locks, scanLocks), RESP3 and RESP2, against a real ruvio.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient } from "ruvio-client";
import { startRuvio } from "./helpers.mjs";

let server;
before(async () => {
  server = await startRuvio();
});
after(async () => {
  await server?.cleanup();
});

for (const protocol of [3, 2]) {
  test(`locks and scanLocks list holders with their clients (RESP${protocol})`, async () => {
    const worker = createClient({ port: server.port, name: "report-worker", protocol });
    const admin = createClient({ port: server.port, protocol });
    try {
      await admin.call("FLUSHALL");
      const workerId = Number(await worker.call("CLIENT", "ID"));
      const token = await worker.lease("job:report", 30_000);
      const slot = await admin.semaphore("upstream:billing", 4, 15_000);
      await admin.set("plain", "v");
      const all = [];
      for await (const l of admin.scanLocks()) all.push(l);
      all.sort((a, b) => a.key.localeCompare(b.key));
      assert.deepEqual(all.map((l) => l.key), ["job:report", "upstream:billing"]);
      const [h] = all[0].holders;
      assert.equal(h.token, token);
      assert.equal(h.clientId, workerId);
      assert.equal(h.clientName, "report-worker");
      assert.match(h.clientAddr, /^127\.0\.0\.1:\d+$/);
      assert.ok(h.remainingMs > 29_000 && h.heldMs < 10_000 && h.grantedMs > 1.7e12);
      assert.equal(all[1].kind, "semaphore");
      assert.equal(all[1].limit, 4);
      assert.deepEqual(all[1].holders.map((x) => [x.token, x.clientName]), [[slot, null]]);
      const page = await admin.locks(0, { match: "job:*", count: 1000 });
      assert.equal(page.cursor, "0");
      assert.deepEqual(page.locks.map((l) => l.key), ["job:report"]);
    } finally {
      await worker.close();
      await admin.close();
    }
  });
}
