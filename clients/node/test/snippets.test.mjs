// The product post's Node.js snippets (test/snippets/lease.mjs and semaphore.mjs, copied verbatim) run against a
// real ruvio and behave as their comments say.
import assert from "node:assert/strict";
import { register } from "node:module";
import { after, before, test } from "node:test";
import { readFileSync } from "node:fs";
import { createClient } from "ruvio-client";
import { startRuvio } from "./helpers.mjs";

register("./snippets/hooks.mjs", import.meta.url);

let server;
let admin;
let run = 0;

before(async () => {
  server = await startRuvio();
  admin = createClient({ port: server.port });
});
after(async () => {
  await admin?.close();
  await server?.cleanup();
});

async function runSnippet(name) {
  const h = { port: server.port, options: [], clients: [], calls: [] };
  globalThis.__ruvioSnippetHarness = h;
  try {
    await import(new URL(`./snippets/${name}.mjs?run=${++run}`, import.meta.url).href);
  } finally {
    // The snippets do not close their client (a real program would exit); the harness does.
    await Promise.all(h.clients.map((c) => c.close()));
    h.clients.forEach((c) => c.disconnect());
    delete globalThis.__ruvioSnippetHarness;
  }
  assert.deepEqual(h.options, [{ host: "127.0.0.1", port: 6379 }], "the snippet creates its client as the post shows");
  return h.calls;
}

test("the snippets are the ones in the product post (imports ruvio-client, nothing added)", () => {
  for (const name of ["lease", "semaphore"]) {
    const text = readFileSync(new URL(`./snippets/${name}.mjs`, import.meta.url), "utf8");
    assert.match(text, /^import \{ createClient \} from 'ruvio-client';\n/);
  }
});

test("lease snippet: token -> you hold it, release -> true", async () => {
  const calls = await runSnippet("lease");
  assert.equal(calls.length, 2);
  assert.equal(calls[0].method, "lease");
  assert.equal(typeof calls[0].result, "string");
  assert.match(calls[0].result, /^[1-9][0-9]*$/);
  assert.deepEqual(calls[1], { method: "release", args: ["job:nightly-report", calls[0].result], result: true });
  assert.equal(await admin.lockInfo("job:nightly-report"), null, "released");
});

test("lease snippet: null -> someone else holds it (and nothing is released)", async () => {
  const other = await admin.lease("job:nightly-report", 30_000);
  assert.notEqual(other, null);
  const calls = await runSnippet("lease");
  assert.deepEqual(calls, [{ method: "lease", args: ["job:nightly-report", 30_000], result: null }]);
  const info = await admin.lockInfo("job:nightly-report");
  assert.deepEqual(info.holders.map((h) => h.token), [other]);
  assert.equal(await admin.release("job:nightly-report", other), true);
});

test("lease snippet: a stale token's release answers false", async () => {
  const t = await admin.lease("job:nightly-report", 30_000);
  assert.equal(await admin.release("job:nightly-report", t), true);
  assert.equal(await admin.release("job:nightly-report", t), false);
});

test("semaphore snippet: a decimal-string token, released", async () => {
  const calls = await runSnippet("semaphore");
  assert.equal(calls.length, 2);
  assert.equal(calls[0].method, "semaphore");
  assert.match(calls[0].result, /^[1-9][0-9]*$/);
  assert.deepEqual(calls[1], { method: "release", args: ["upstream:billing", calls[0].result], result: true });
  assert.equal(await admin.lockInfo("upstream:billing"), null);
});

test("semaphore snippet: null -> all 8 slots are taken", async () => {
  const held = [];
  for (let i = 0; i < 8; i++) held.push(await admin.semaphore("upstream:billing", 8, 15_000));
  assert.ok(held.every((t) => typeof t === "string"));
  const calls = await runSnippet("semaphore");
  assert.deepEqual(calls, [{ method: "semaphore", args: ["upstream:billing", 8, 15_000], result: null }]);
  for (const t of held) assert.equal(await admin.release("upstream:billing", t), true);
});
